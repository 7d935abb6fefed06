"""The native-hook event catalog (the table of docs/native-hooks.md): which events exist, what
a failing hook means at each one (`pass` or its one failure kind: `block` at a `:pre` point and
`task_call`, else `report`), what a `filter` sees (the *candidate*) and what a `when`/`shell`
sees (`LOOPRAIL_*` variables)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from looprail.points import POINTS

Outcome = Literal["pass", "block", "report"]
FailureKind = Literal["block", "report"]
OUTCOMES: tuple[Outcome, ...] = ("pass", "block", "report")

Encoding = Literal["text", "lines", "json"]


@dataclass(frozen=True)
class Field:
    """One documented candidate field and the environment variable that carries it: `text`
    (strings as they are, booleans `true`/`false`, numbers in JSON), `lines` (one string a line)
    or `json` (compact). A missing or null value leaves the variable unset."""

    key: str
    env: str
    encoding: Encoding = "text"


@dataclass(frozen=True)
class EventSpec:
    name: str
    failure: FailureKind
    fields: tuple[Field, ...]

    @property
    def outcomes(self) -> tuple[Outcome, Outcome]:
        return ("pass", self.failure)


_POINT_FIELDS = (
    Field("point", "LOOPRAIL_POINT"),
    Field("phase", "LOOPRAIL_PHASE"),
    Field("wave", "LOOPRAIL_WAVE"),
)
_TASK_FIELDS = (
    Field("taskId", "LOOPRAIL_TASK_ID"),
    Field("trackerId", "LOOPRAIL_TASK_TRACKER_ID"),
    Field("name", "LOOPRAIL_TASK_NAME"),
    Field("plan", "LOOPRAIL_TASK_PLAN"),
    Field("phase", "LOOPRAIL_PHASE"),
    Field("wave", "LOOPRAIL_WAVE"),
    Field("files", "LOOPRAIL_TASK_FILES", "lines"),
    Field("resolved", "LOOPRAIL_TASK_RESOLVED"),
    Field("content", "LOOPRAIL_TASK_CONTENT", "json"),
)


_SPECS: tuple[EventSpec, ...] = (
    *(EventSpec(p, "block" if p.endswith(":pre") else "report", _POINT_FIELDS) for p in POINTS),
    EventSpec("task_call", "block", _TASK_FIELDS),
    EventSpec("task_result", "report", (*_TASK_FIELDS, Field("ok", "LOOPRAIL_TASK_OK"))),
    EventSpec(
        "loop_settled",
        "report",
        (Field("status", "LOOPRAIL_LOOP_STATUS"), Field("phase", "LOOPRAIL_PHASE")),
    ),
    # raised by the engine once per result of another hook (one level, never changing it)
    EventSpec(
        "hook_result",
        "report",
        (
            Field("hookRef", "LOOPRAIL_ORIGIN_HOOK_REF"),
            Field("invocationId", "LOOPRAIL_ORIGIN_INVOCATION_ID"),
            Field("outcome", "LOOPRAIL_ORIGIN_OUTCOME"),
            Field("code", "LOOPRAIL_ORIGIN_CODE"),
            Field("originEvent", "LOOPRAIL_ORIGIN_EVENT"),
        ),
    ),
    EventSpec(  # raised by an emit-custom-event Action
        "custom_event",
        "report",
        (
            Field("name", "LOOPRAIL_CUSTOM_EVENT_NAME"),
            Field("data", "LOOPRAIL_CUSTOM_EVENT_DATA", "json"),
            Field("hookRef", "LOOPRAIL_ORIGIN_HOOK_REF"),
            Field("originEvent", "LOOPRAIL_ORIGIN_EVENT"),
        ),
    ),
)

EVENTS: Mapping[str, EventSpec] = {spec.name: spec for spec in _SPECS}
EVENT_NAMES: tuple[str, ...] = tuple(EVENTS)

# `hook_result` filters may use only these keys; `outcome` and `code` match exactly (the
# selector semantics Actions use), the others are regular expressions.
HOOK_RESULT_FILTER_KEYS = ("event", *(field.key for field in EVENTS["hook_result"].fields))
HOOK_RESULT_EXACT_KEYS = frozenset({"outcome", "code"})

# Variables the engine sets for every invocation (besides the event's own fields).
ALWAYS_SET_ENV = (
    "LOOPRAIL_EVENT",
    "LOOPRAIL_EVENT_PAYLOAD",
    "LOOPRAIL_HOOK_REF",
    "LOOPRAIL_HOOK_EVENT",
    "LOOPRAIL_HOOK_INVOCATION_ID",
    "LOOPRAIL_RUN_ID",
    "LOOPRAIL_CWD",
)
MANAGED_ENV: frozenset[str] = frozenset(
    {*ALWAYS_SET_ENV, *(f.env for spec in _SPECS for f in spec.fields)}
)
# Inherited variables with these prefixes are stale data from an outer hook, never settings.
_MANAGED_PREFIXES = (
    "LOOPRAIL_TASK_",
    "LOOPRAIL_ORIGIN_",
    "LOOPRAIL_CUSTOM_EVENT_",
    "LOOPRAIL_HOOK_",
)


def is_managed_env(name: str) -> bool:
    """True for a variable the engine owns: inherited copies are removed before a shell runs so
    a hook never sees another evaluation's data (user settings such as `LOOPRAIL_HOME` stay)."""
    return name in MANAGED_ENV or name.startswith(_MANAGED_PREFIXES)


def unknown_event_message(event: object) -> str:
    return f"unknown event {json.dumps(event)}; supported events: {', '.join(EVENT_NAMES)}"


def event_spec(event: str) -> EventSpec:
    """The spec of `event`; `ValueError` (listing the supported events) for anything else."""
    try:
        return EVENTS[event]
    except (KeyError, TypeError):
        raise ValueError(unknown_event_message(event)) from None


def encode_env_value(value: Any, encoding: Encoding = "text") -> str | None:
    """How one candidate value travels in the environment; None means "leave it unset"."""
    if value is None:
        return None
    lines = encoding == "lines" and isinstance(value, (list, tuple))
    if lines and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    if isinstance(value, str) and encoding != "json":
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))  # `true`, not `True`


def event_environment(spec: EventSpec, candidate: Mapping[str, Any]) -> dict[str, str]:
    """`LOOPRAIL_EVENT`, `LOOPRAIL_EVENT_PAYLOAD` (the candidate as JSON) and the event's own
    field variables, derived from the same candidate the filter sees."""
    env = {
        "LOOPRAIL_EVENT": spec.name,
        "LOOPRAIL_EVENT_PAYLOAD": json.dumps(candidate, ensure_ascii=False, separators=(",", ":")),
    }
    for field in spec.fields:
        encoded = encode_env_value(candidate.get(field.key), field.encoding)
        if encoded is not None:
            env[field.env] = encoded
    return env


# The loop builds candidates with these so that filter keys and variables stay the documented
# ones. Extra keys are allowed (a filter may use them); `event` is always set by the engine.


def point_candidate(
    point: str, *, phase: str | None = None, wave: int | None = None, **extra: object
) -> dict[str, object]:
    """The candidate of one of the twelve loop points (`wave` only for the wave points)."""
    spec = event_spec(point)
    if spec.name not in POINTS:
        raise ValueError(f"{point!r} is not a loop point; points: {', '.join(POINTS)}")
    candidate: dict[str, object] = {"event": point, "point": point, "phase": phase}
    if wave is not None:
        candidate["wave"] = wave
    return {**candidate, **extra}


def task_candidate(
    event: Literal["task_call", "task_result"],
    *,
    task_id: str,
    name: str,
    plan: str,
    wave: int,
    files: Sequence[str] = (),
    tracker_id: str | None = None,
    phase: str | None = None,
    content: Mapping[str, Any] | None = None,
    resolved: bool = False,
    ok: bool | None = None,
    **extra: object,
) -> dict[str, object]:
    """The candidate of `task_call` / `task_result`. `content` is the task's effective content:
    from the tracker when `resolved`, else the PLAN.md text; `ok` (task_result only) says whether
    the executor succeeded."""
    if event not in ("task_call", "task_result"):
        raise ValueError(f"{event!r} is not a task event; use task_call or task_result")
    candidate: dict[str, object] = {
        "event": event,
        "taskId": task_id,
        "trackerId": tracker_id,
        "name": name,
        "plan": plan,
        "phase": phase,
        "wave": wave,
        "files": list(files),
        "resolved": resolved,
        "content": dict(content) if content is not None else None,
    }
    if event == "task_result":
        candidate["ok"] = ok
    return {**candidate, **extra}


def loop_settled_candidate(*, status: str, phase: str | None = None, **extra: object) -> dict:
    """The candidate of `loop_settled`; `status` is how the run ended (`completed`, `halted`,
    `paused`, …)."""
    return {"event": "loop_settled", "status": status, "phase": phase, **extra}
