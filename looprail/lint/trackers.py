"""Task tracker-id findings: a prefix with no resolver, several, or one that failed to load."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from looprail.hooks.task_content import split_tracker_id, unloadable_resolvers
from looprail.lint.findings import Finding, finding
from looprail.lint.inputs import LintInput, _rel

if TYPE_CHECKING:
    from looprail.hooks.manifest import TaskContentResolver
    from looprail.plans.planfile import Plan


@dataclass(frozen=True)
class _Resolvers:
    active: dict[str, list[tuple[str, TaskContentResolver]]]  # prefix → [(cap id, resolver)]
    inactive: dict[str, list[str]]  # prefix → cap ids (loaded, not active)
    broken: dict[str, list[tuple[str, str]]]  # prefix → [(cap id, reason)] (failed to load)


def _resolvers(data: LintInput) -> _Resolvers:
    # As the run does (`loading.Loaded.resolvers`): every loaded resolver counts, whatever its
    # capability's activationKey (execute:task has no `when`), except one without consent.
    found = _Resolvers({}, {}, {})
    caps = data.compiled.capabilities
    for cid, r in data.compiled.task_content_resolvers():
        if caps[cid].consent is not False:
            found.active.setdefault(r.trackerPrefix, []).append((cid, r))
        else:
            found.inactive.setdefault(r.trackerPrefix, []).append(cid)
    served = {prefix: caps[pairs[0][0]].origin for prefix, pairs in found.active.items()}
    for cid, prefix, reason in unloadable_resolvers(data.compiled.failed, served):
        found.broken.setdefault(prefix, []).append((cid, reason))
    return found


def _trackers(data: LintInput, plan: Plan, resolvers: _Resolvers) -> Iterator[Finding]:
    file = _rel(plan.path, data.project)
    for task in plan.tasks:
        tid = task.tracker_id
        if not tid or task.is_checkpoint:
            continue  # a checkpoint pauses: execute:task never resolves it
        where = f"line {task.line} (task {task.index} tracker-id)"
        split = split_tracker_id(tid)
        if split is None:
            yield finding(
                "tracker-id-malformed",
                file,
                f"tracker-id {tid!r} has no `prefix:id` form, so no resolver is asked and the "
                "task runs from the plan's inline content",
                "write it as prefix:ID (e.g. beads:GSD-42), or remove it",
                path=where,
            )
        else:
            yield from _tracker(data, resolvers, file, where, tid, split[0])


def _tracker(
    data: LintInput, resolvers: _Resolvers, file: str, where: str, tid: str, prefix: str
) -> Iterator[Finding]:
    matches = resolvers.active.get(prefix, [])
    if resolvers.broken.get(prefix):
        cid, reason = resolvers.broken[prefix][0]
        yield finding(
            "tracker-resolver-broken",
            file,
            f"tracker-id {tid!r}: capability {cid!r}, which resolves {prefix!r}, failed to load "
            f"({reason}); the task halts",
            f"fix capability {cid}",
            path=where,
        )
    elif len(matches) > 1:
        yield finding(
            "tracker-resolver-ambiguous",
            file,
            f"tracker-id {tid!r}: {len(matches)} capabilities resolve prefix {prefix!r} "
            f"({', '.join(c for c, _ in matches)}); the task halts",
            "keep one capability with this trackerPrefix",
            path=where,
        )
    elif not matches:
        yield _no_resolver(resolvers.inactive.get(prefix), file, where, tid, prefix)
    elif not data.probe.runnable(binary := matches[0][1].invoke.binary):
        cid = matches[0][0]
        yield finding(
            "tracker-resolver-missing",
            file,
            f"tracker-id {tid!r}: resolver binary {binary!r} of capability {cid!r} is not there "
            "(relative to the project, or on PATH); the task halts",
            f"install {binary} or fix {cid}'s taskContentResolver.invoke.binary",
            path=where,
        )


def _no_resolver(off: list[str] | None, file: str, where: str, tid: str, prefix: str) -> Finding:
    why = (
        f"capability {off[0]!r} declares it but has no consent"
        if off
        else "no capability declares that trackerPrefix"
    )
    return finding(
        "tracker-no-resolver",
        file,
        f"tracker-id {tid!r}: no resolver for prefix {prefix!r} ({why}); the task runs from "
        "the plan's inline content",
        f"review {off[0]} and run `looprail trust`"
        if off
        else f"add a capability whose taskContentResolver.trackerPrefix is {prefix!r}, or "
        "remove the tracker-id",
        path=where,
    )
