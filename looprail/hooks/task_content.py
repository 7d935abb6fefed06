"""`execute:task`: resolve a task's content (`beads:GSD-42`) with the one capability whose
`trackerPrefix` is its prefix (docs/checks.md, "taskContentResolver"). Four results; anything
else raises `TaskContentError`, a hard halt, never a quiet fallback to stale PLAN.md text."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from looprail.errors import TaskContentError
from looprail.hooks.capset import CapabilitySet, FailedCapability
from looprail.hooks.sources import ORIGIN_RANK
from looprail.jsonload import json_type_name, loads_strict
from looprail.runtime.process import escape_untrusted, run_bounded, tail

if TYPE_CHECKING:
    from looprail.hooks.manifest import Invoke, TaskContentResolver

ID_PLACEHOLDER = "{{id}}"
STDERR_TAIL_CHARS = 2000
STDOUT_SAMPLE_CHARS = 200


class ResolvedContent(BaseModel):
    """The task content a resolver delivered, under the PLAN.md task element names."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    action: str
    verify: str = ""
    acceptanceCriteria: list[str] = []
    readFirst: list[str] = []
    done: str = ""


class TaskContentResult(BaseModel):
    """One of the four non-failing outcomes; `to_json()` is the exact CLI output."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    resolved: bool
    reason: Literal["no-resolver", "empty"] | None = None
    content: ResolvedContent | None = None

    @model_validator(mode="after")
    def _consistent(self) -> TaskContentResult:
        if self.resolved != (self.content is not None):
            raise ValueError("content is present exactly when resolved is true")
        if self.resolved and self.reason is not None:
            raise ValueError("a resolved result has no reason")
        return self

    @property
    def outcome(self) -> Literal["not-applicable", "no-resolver", "empty", "resolved"]:
        if self.resolved:
            return "resolved"
        return self.reason or "not-applicable"

    def to_json(self) -> dict[str, object]:
        """The exact CLI output (content fields are never None)."""
        return self.model_dump(exclude_none=True)


NOT_APPLICABLE = TaskContentResult(resolved=False)
NO_RESOLVER = TaskContentResult(resolved=False, reason="no-resolver")
EMPTY = TaskContentResult(resolved=False, reason="empty")


def split_tracker_id(tracker_id: str) -> tuple[str, str] | None:
    """`(prefix, id)` split on the first `:` (`beads:issue:GSD-1` → `beads`, `issue:GSD-1`), or
    None when there is no `:` or either side is empty."""
    if not isinstance(tracker_id, str):
        return None
    prefix, sep, ident = tracker_id.partition(":")
    if not sep or not prefix or not ident:
        return None
    return prefix, ident


def build_argv(invoke: Invoke, ident: str) -> list[str]:
    """`[binary, *args]` with every element that is exactly `{{id}}` replaced by `ident`;
    `{{id}}` inside a longer element is left alone (no templating, no shell)."""
    return [invoke.binary, *(ident if a == ID_PLACEHOLDER else a for a in invoke.args)]


def content_from_output(stdout: str) -> ResolvedContent | str | None:
    """Map a resolver's stdout to content, `None` for an empty description, or a reason (str)
    why the output is malformed."""
    if not stdout.strip():
        return "stdout is empty (expected a JSON object)"

    try:
        body, duplicates = loads_strict(stdout)
    except json.JSONDecodeError as exc:
        return f"stdout is not valid JSON ({exc.msg}) (sample: {_sample(stdout)})"
    except ValueError as exc:  # NaN / Infinity
        return f"stdout is not valid JSON ({exc}) (sample: {_sample(stdout)})"
    except RecursionError:  # hostile depth must end as a hard halt, not a traceback
        return f"stdout JSON is nested too deeply (sample: {_sample(stdout)})"
    if duplicates:  # which value wins differs between readers: refuse to guess
        return f"stdout has duplicate key {escape_untrusted(json.dumps(duplicates[0]))}"
    if not isinstance(body, dict):
        return f"stdout is JSON {json_type_name(body)}, not an object (sample: {_sample(stdout)})"
    texts: dict[str, str] = {}
    for source in ("description", "verify", "done"):
        value = "" if body.get(source) is None else body[source]  # absent or null: the default
        if not isinstance(value, str):
            return f"field {source!r} must be a string, got {json_type_name(value)}"
        texts[source] = value
    lists: dict[str, list[str]] = {}
    for source in ("acceptance_criteria", "read_first"):
        value = [] if body.get(source) is None else body[source]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"field {source!r} must be an array of strings"
        lists[source] = value
    if not texts["description"].strip():
        return None
    return ResolvedContent(
        action=texts["description"],
        verify=texts["verify"],
        done=texts["done"],
        acceptanceCriteria=lists["acceptance_criteria"],
        readFirst=lists["read_first"],
    )


def resolve_task_content(
    tracker_id: str,
    resolvers: Sequence[tuple[str, TaskContentResolver]],
    *,
    cwd: Path,
    unloadable: Sequence[tuple[str, str, str]] = (),
) -> TaskContentResult:
    """Resolve `tracker_id` with the matching resolver among `(cap_id, resolver)`, run in `cwd`
    (the project). Raises `TaskContentError` for an ambiguous prefix and any resolver failure,
    and for a prefix claimed by one of `unloadable` (`unloadable_resolvers`), which would
    otherwise quietly become `no-resolver`."""
    split = split_tracker_id(tracker_id)
    if split is None:
        return NOT_APPLICABLE
    prefix, ident = split
    matches = [(cap_id, r) for cap_id, r in resolvers if r.trackerPrefix == prefix]
    broken = [(cap_id, reason) for cap_id, p, reason in unloadable if p == prefix]
    if broken:
        raise TaskContentError(
            tracker_id,
            prefix,
            [c for c, _ in broken] + [c for c, _ in matches],
            f"a capability declaring this trackerPrefix cannot be used: {broken[0][1]}",
        )
    if not matches:
        return NO_RESOLVER
    if len(matches) > 1:
        raise TaskContentError(
            tracker_id,
            prefix,
            [cap_id for cap_id, _ in matches],
            f"ambiguous: {len(matches)} capabilities declare this trackerPrefix; refusing to pick",
        )
    cap_id, resolver = matches[0]

    def fail(reason: str, stderr: str = "") -> TaskContentError:
        return TaskContentError(
            tracker_id, prefix, [cap_id], reason, tail(stderr, STDERR_TAIL_CHARS)
        )

    content = _run(resolver.invoke, ident, cwd, fail)
    if content is None:
        return EMPTY
    return TaskContentResult(resolved=True, content=content)


def _run(
    invoke: Invoke, ident: str, cwd: Path, fail: Callable[..., TaskContentError]
) -> ResolvedContent | None:
    """Run the resolver for `ident`: its content, None for an empty description, or the
    `fail(reason, stderr)` error raised."""
    timeout_ms = invoke.timeoutMs  # an integer of 1 to 120000 (the model says so)
    if not isinstance(invoke.binary, str) or not invoke.binary.strip():
        raise fail("invoke.binary is empty")
    if ident.startswith("-"):
        # `git:--output=FILE` would reach the resolver as an option, not as an id.
        raise fail(
            "the id after the prefix starts with '-' (it would be read as an option); refused"
        )
    argv = build_argv(invoke, ident)
    binary = escape_untrusted(invoke.binary)
    if any("\0" in a for a in argv):  # no process can receive it (and Popen would raise)
        raise fail(f"resolver '{binary}': the tracker id or invoke argv contains a NUL byte")
    result = run_bounded(argv, timeout_s=timeout_ms / 1000, cwd=cwd)
    if result.spawn_error:
        raise fail(f"resolver '{binary}' could not start: {result.spawn_error}")
    if result.timed_out:
        raise fail(f"resolver '{binary}' timed out after {timeout_ms}ms", result.stderr)
    if result.exit_code != 0:
        code = result.exit_code
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited {code}"
        raise fail(f"resolver '{binary}' {how}", result.stderr)
    content = content_from_output(result.stdout)
    if isinstance(content, str):
        raise fail(f"resolver '{binary}' produced malformed output: {content}")
    return content


def runnable_resolvers(caps: CapabilitySet) -> list[tuple[str, TaskContentResolver]]:
    """Every loaded capability's resolver (not gated by `activationKey`: execute:task has no
    `when`), but one without the user's consent."""
    loaded = caps.capabilities
    return [
        (cid, r) for cid, r in caps.task_content_resolvers() if loaded[cid].consent is not False
    ]


def halting_resolvers(caps: CapabilitySet) -> list[tuple[str, str, str]]:
    """`(cap_id, trackerPrefix, why)` for the resolvers that must not run (their capability
    failed to load, or lacks consent): a task with their prefix halts, never falls back to the
    inline plan."""
    loaded = caps.capabilities
    unconsented = [
        (cid, r.trackerPrefix, "no consent for this project capability (run `looprail trust`)")
        for cid, r in caps.task_content_resolvers()
        if loaded[cid].consent is False
    ]
    served = {r.trackerPrefix: loaded[cid].origin for cid, r in runnable_resolvers(caps)}
    return unloadable_resolvers(caps.failed, served) + unconsented


def unloadable_resolvers(
    failed: Sequence[FailedCapability], served: Mapping[str, str] | None = None
) -> list[tuple[str, str, str]]:
    """`(cap_id, trackerPrefix, first issue)` for each failed capability whose manifest still
    names a trackerPrefix. `served` maps each prefix a usable resolver answers to its origin: a
    failed capability never disables a prefix served by a *more trusted* origin, so a cloned
    project cannot switch off the user's own tracker resolver."""
    out: list[tuple[str, str, str]] = []
    served = served or {}
    for cap in failed:
        try:
            body = json.loads(Path(cap.file).read_bytes())
        except (OSError, ValueError, RecursionError):
            continue
        declared = body.get("taskContentResolver") if isinstance(body, dict) else None
        prefix = declared.get("trackerPrefix") if isinstance(declared, dict) else None
        if isinstance(prefix, str) and prefix:
            owner = served.get(prefix)
            mine = ORIGIN_RANK.get(cap.origin, 2)
            if owner is not None and ORIGIN_RANK.get(owner, 2) < mine:
                continue
            reason = str(cap.issues[0]) if cap.issues else "invalid manifest"
            out.append((cap.id, prefix, "failed to load: " + escape_untrusted(reason)))
    return out


def _sample(text: str) -> str:
    return escape_untrusted(text[:STDOUT_SAMPLE_CHARS])
