"""Task tracker-id findings: a prefix with no resolver, several, or one that failed to load."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from looprail.hooks.task_content import split_tracker_id, unloadable_resolvers

if TYPE_CHECKING:
    pass


from looprail.lint.findings import Finding
from looprail.lint.inputs import LintInput, _rel


@dataclass(frozen=True)
class _Resolvers:
    active: dict[str, list[tuple[str, Any]]]  # prefix → [(cap id, resolver)]
    inactive: dict[str, list[str]]  # prefix → cap ids (loaded, not active)
    broken: dict[str, list[tuple[str, str]]]  # prefix → [(cap id, reason)] (failed to load)


def _resolvers(data: LintInput) -> _Resolvers:
    # As the run does (`loading.Loaded.resolvers`): every loaded resolver counts, whatever its
    # capability's activationKey (execute:task has no `when`), except one without consent.
    active: dict[str, list[tuple[str, Any]]] = {}
    inactive: dict[str, list[str]] = {}
    caps = data.compiled.capabilities
    for cid, r in data.compiled.task_content_resolvers():
        if caps[cid].consent is not False:
            active.setdefault(r.trackerPrefix, []).append((cid, r))
        else:
            inactive.setdefault(r.trackerPrefix, []).append(cid)
    broken: dict[str, list[tuple[str, str]]] = {}
    served = {prefix: caps[pairs[0][0]].origin for prefix, pairs in active.items()}
    for cid, prefix, reason in unloadable_resolvers(data.compiled.failed, served):
        broken.setdefault(prefix, []).append((cid, reason))
    return _Resolvers(active, inactive, broken)


def _trackers(data: LintInput, plan: Any, resolvers: _Resolvers) -> Iterable[Finding]:
    file = _rel(plan.path, data.project)
    for task in plan.tasks:
        tid = task.tracker_id
        if not tid or task.is_checkpoint:
            continue  # a checkpoint pauses: execute:task never resolves it
        where = f"line {task.line} (task {task.index} tracker-id)"
        split = split_tracker_id(tid)
        if split is None:
            yield Finding(
                severity="warning",
                code="tracker-id-malformed",
                file=file,
                path=where,
                message=f"tracker-id {tid!r} has no `prefix:id` form, so no resolver is asked "
                "and the task runs from the plan's inline content",
                fix="write it as prefix:ID (e.g. beads:GSD-42), or remove it",
            )
            continue
        prefix = split[0]
        if resolvers.broken.get(prefix):
            cid, reason = resolvers.broken[prefix][0]
            yield Finding(
                severity="error",
                code="tracker-resolver-broken",
                file=file,
                path=where,
                message=f"tracker-id {tid!r}: capability {cid!r}, which resolves {prefix!r}, "
                f"failed to load ({reason}); the task halts",
                fix=f"fix capability {cid}",
            )
            continue
        matches = resolvers.active.get(prefix, [])
        if len(matches) > 1:
            yield Finding(
                severity="error",
                code="tracker-resolver-ambiguous",
                file=file,
                path=where,
                message=f"tracker-id {tid!r}: {len(matches)} capabilities resolve prefix "
                f"{prefix!r} ({', '.join(c for c, _ in matches)}); the task halts",
                fix="keep one capability with this trackerPrefix",
            )
        elif not matches:
            off = resolvers.inactive.get(prefix)
            why = (
                f"capability {off[0]!r} declares it but has no consent"
                if off
                else "no capability declares that trackerPrefix"
            )
            yield Finding(
                severity="warning",
                code="tracker-no-resolver",
                file=file,
                path=where,
                message=f"tracker-id {tid!r}: no resolver for prefix {prefix!r} ({why}); the "
                "task runs from the plan's inline content",
                fix=f"review {off[0]} and run `looprail trust`"
                if off
                else f"add a capability whose "
                f"taskContentResolver.trackerPrefix is {prefix!r}, or remove the tracker-id",
            )
        else:
            cid, resolver = matches[0]
            binary = resolver.invoke.binary
            if not data.probe.runnable(binary):
                yield Finding(
                    severity="error",
                    code="tracker-resolver-missing",
                    file=file,
                    path=where,
                    message=f"tracker-id {tid!r}: resolver binary {binary!r} of capability "
                    f"{cid!r} is not there (relative to the project, or on PATH); the task "
                    "halts",
                    fix=f"install {binary} or fix {cid}'s taskContentResolver.invoke.binary",
                )
