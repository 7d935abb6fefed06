"""The `Request` a runtime's `handle` receives (its JSON: docs/runtime.md), its parts, and the
`DispatchContext` beside it; `looprail.runtime.base` re-exports them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from looprail.layout import Flavor as Flavor

# `context`: a contribution's fragment was queued for a role (a runtime may ignore it);
# `host`: `<host tool> <words>`, for the gates the host's workflow answers directly.
RequestKind = Literal[
    "skill", "agent", "command", "query", "verdict", "phase", "task", "message", "compact",
    "context", "host",
]  # fmt: skip

PROTOCOL_VERSION = 1


def step_of(point: str) -> str:
    """The loop step a point belongs to: `execute:wave:pre` → `execute`."""
    return point.split(":", 1)[0]


class Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class DispatchContext(Frozen):
    """Where a unit of work runs: the project, the phase, and the hook that asked for it."""

    project: Path
    phase_number: str
    phase_dir: Path | None = None
    point: str | None = None
    cap_id: str | None = None
    flavor: Flavor = "gsd"
    plan_id: str | None = None
    task_id: str | None = None
    wave: int | None = None
    host_tool: str | None = None  # None: the runtime's own setting
    timeout_s: float | None = None  # None: the runtime's per-kind default
    workdir: Path | None = None  # a plan's git worktree; None: the project
    env: dict[str, str] = Field(default_factory=dict)
    # the work may have the user's terminal (`run --interactive`, runtime/interactive.py)
    terminal: bool = False

    @model_validator(mode="after")
    def _checked(self) -> DispatchContext:
        if not self.phase_number.strip():
            raise ValueError("phase_number must not be empty")
        for name, path in (("phase_dir", self.phase_dir), ("workdir", self.workdir)):
            if path is not None and not path.is_absolute():
                raise ValueError(f"{name} must be absolute, got {path}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")
        return self

    @property
    def step(self) -> str | None:
        return step_of(self.point) if self.point else None


class _Camel(Frozen):
    """Python names in code, camelCase in the JSON a unit of work reads."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class CheckFailure(_Camel):
    """A check of the task that failed after the executor's last call (docs/loop.md,
    "Verification"): `command` as the plan wrote it (or `must_have: …`)."""

    command: str
    exit_code: int | None = None
    reason: str
    output_tail: str = ""
    attempt: int = 1


class TaskWork(_Camel):
    """One task of a plan, with its content already final (inline PLAN.md or tracker-resolved)."""

    plan_id: str
    task_id: str
    index: int
    name: str
    type: str = "auto"
    files: tuple[str, ...] = ()
    read_first: tuple[str, ...] = ()
    action: str = ""
    verify: str = ""
    acceptance_criteria: tuple[str, ...] = ()
    done: str = ""
    tracker_id: str | None = None
    resolved_by_tracker: bool = False
    # what `read_first` says beside a path, by path ("": a note that names no file)
    read_first_notes: dict[str, str] = {}
    # its plan's `path` and parts, as written (plans/briefing.py; prompts._PLAN_TITLES)
    plan_sections: dict[str, str] = {}
    # the task's own: `tdd`, `behavior`, `implementation`, `precondition`, `reversibility`
    task_sections: dict[str, str] = {}
    checks: tuple[str, ...] = ()  # its automated check commands (plans/taskchecks.py)
    check_failures: tuple[CheckFailure, ...] = ()  # after the previous call (a retry)

    @property
    def key(self) -> str:
        return f"{self.plan_id}/{self.task_id}"


class PhaseRef(_Camel):
    number: str
    dir: str | None


class VerdictAsk(_Camel):
    ref: str
    prompt: str = ""


class MessageAsk(_Camel):
    text: str
    send_as: str
    delivery: str
    trigger_turn: bool


# Keys present only for the kinds that use them (absent, not null, elsewhere).
_KIND_SPECIFIC = ("role", "step", "words", "role_context", "task", "verdict", "message")


class Request(_Camel):
    """What one unit of work is asked to do; the JSON on an executable's stdin."""

    protocol: int = PROTOCOL_VERSION
    kind: RequestKind
    name: str
    project: str
    point: str | None
    cap_id: str | None
    flavor: Flavor
    phase: PhaseRef
    plan_id: str | None = None
    task_id: str | None = None
    wave: int | None = None
    role: str | None = None
    step: str | None = None
    words: tuple[str, ...] | None = None
    role_context: dict[str, tuple[str, ...]] | None = None
    task: TaskWork | None = None
    verdict: VerdictAsk | None = None
    message: MessageAsk | None = None
    instructions: str | None = None

    def to_json(self) -> str:
        body = self.model_dump(mode="json", by_alias=True)
        for key in _KIND_SPECIFIC:
            alias = to_camel(key)
            if body.get(alias) is None:
                body.pop(alias, None)
        if self.kind != "compact":
            body.pop("instructions", None)
        return json.dumps(body, ensure_ascii=False, sort_keys=False)


def build_request(kind: RequestKind, name: str, ctx: DispatchContext, **extra: Any) -> Request:
    """The context's fields, then kind-specific ones (which may override the context's)."""
    where = {"plan_id": ctx.plan_id, "task_id": ctx.task_id, "wave": ctx.wave}
    return Request(
        kind=kind,
        name=name,
        project=str(ctx.project),
        point=ctx.point,
        cap_id=ctx.cap_id,
        flavor=ctx.flavor,
        phase=PhaseRef(number=ctx.phase_number, dir=str(ctx.phase_dir) if ctx.phase_dir else None),
        **(where | extra),
    )


_SEND_AS = ("custom", "user")
_DELIVERIES = ("steer", "followUp", "nextTurn")


def message_ask(text: str, *, send_as: str, delivery: str, trigger_turn: bool) -> MessageAsk:
    """A message Action's delivery, checked (an invalid combination is a caller's bug). A user
    message always starts a turn, whatever `trigger_turn` says."""
    if send_as not in _SEND_AS:
        raise ValueError(f"send_as must be one of {_SEND_AS}, got {send_as!r}")
    if delivery not in _DELIVERIES:
        raise ValueError(f"delivery must be one of {_DELIVERIES}, got {delivery!r}")
    if send_as == "user" and delivery == "nextTurn":
        raise ValueError("a user message cannot use delivery nextTurn")
    if delivery == "nextTurn" and trigger_turn:
        raise ValueError("delivery nextTurn cannot trigger a turn")
    return MessageAsk(text=text, send_as=send_as, delivery=delivery, trigger_turn=trigger_turn)


def verdict_ask(agent_verdict: Mapping[str, Any]) -> VerdictAsk | str:
    """An `agentVerdict` check as a typed ask, or one line saying why it is unusable."""
    ref, prompt = agent_verdict.get("ref"), agent_verdict.get("prompt", "")
    if not isinstance(ref, str) or not ref:
        return 'agentVerdict has no "ref" naming an agent'
    if not isinstance(prompt, str):
        return f'agentVerdict "prompt" for {ref!r} is not a string'
    return VerdictAsk(ref=ref, prompt=prompt)


def checked_words(words: Sequence[str]) -> tuple[str, ...]:
    if isinstance(words, str):
        raise TypeError("words is a sequence of words (the command split on spaces), not a str")
    words = tuple(words)
    if not words or not all(isinstance(w, str) for w in words):
        raise ValueError(f"words must be a non-empty sequence of strings, got {words!r}")
    return words
