"""A runtime for tests: outcomes come from a script keyed by a request's `(kind, name)`, and
every call is recorded in order (docs/runtime.md, "In tests: `ScriptedRuntime`")."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import Field

from looprail.runtime.base import (
    BaseRuntime,
    DispatchContext,
    Frozen,
    Liveness,
    Outcome,
    Request,
    RequestKind,
    banner_label,
    output_label,
    require_verdict,
    spawn_banner,
)

CallKey = tuple[str, str]
Responder = Outcome | Callable[[Request], Outcome]
# One responder, or a list consumed one per call (the last one repeats).
ScriptValue = Responder | Sequence[Responder]
Effect = Callable[[Request], None]

WILDCARD = "*"
_NO_BLOCK = {"block": False, "message": ""}
# What a `Call` copies of its request.
_COPIED = ("kind", "name", "point", "cap_id", "plan_id", "task_id", "wave", "role", "step", "words")


class Call(Frozen):
    """One call the runtime received, with what it answered (None while it is running)."""

    kind: RequestKind
    name: str
    point: str | None = None
    cap_id: str | None = None
    plan_id: str | None = None
    task_id: str | None = None
    wave: int | None = None
    role: str | None = None
    step: str | None = None
    words: tuple[str, ...] | None = None
    text: str | None = None  # a contribution's fragment (`context`) or a message
    role_context: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    request: Request | None = None
    outcome: Outcome | None = None

    @property
    def key(self) -> CallKey:
        return (self.kind, self.name)


class ScriptedRuntime(BaseRuntime):
    """Implements `Runtime` from a script; thread-safe (a wave's tasks may call in parallel)."""

    name = "scripted"

    def __init__(
        self,
        script: Mapping[CallKey, ScriptValue] | None = None,
        *,
        effects: Mapping[CallKey, Effect] | None = None,
        progress: Callable[[str], None] | None = None,
        output: Callable[[str, str, str], None] | None = None,
    ) -> None:
        super().__init__(progress=progress, output=output)
        self._lock = threading.Lock()
        self._script: dict[CallKey, ScriptValue] = {}
        self._effects: dict[CallKey, Effect] = dict(effects or {})
        self._served: dict[CallKey, int] = {}
        self._calls: list[Call] = []
        self._banners: list[str] = []
        for key, value in (script or {}).items():
            self.script(key, value)

    @classmethod
    def from_settings(cls, settings: Any) -> ScriptedRuntime:
        """`--agent scripted`: nothing scripted, every call succeeds (a walk of the loop)."""
        return cls(progress=settings.progress, output=getattr(settings, "output", None))

    def script(self, key: CallKey, value: ScriptValue) -> None:
        """Set (or replace) what calls matching `key` answer."""
        if isinstance(value, Sequence) and not value:
            raise ValueError(f"script for {key} is an empty list")
        with self._lock:
            self._script[key] = value
            self._served.pop(key, None)

    def effect(self, key: CallKey, fn: Effect) -> None:
        """Run `fn(request)` on every call matching `key`, before its outcome is chosen."""
        with self._lock:
            self._effects[key] = fn

    @property
    def calls(self) -> list[Call]:
        """Every call so far, in the order they were made (a snapshot)."""
        with self._lock:
            return list(self._calls)

    @property
    def banners(self) -> list[str]:
        """The liveness banners printed, in order."""
        with self._lock:
            return list(self._banners)

    def calls_of(self, kind: RequestKind) -> list[Call]:
        return [c for c in self.calls if c.kind == kind]

    def names(self, kind: RequestKind | None = None) -> list[str]:
        return [c.name for c in self.calls if kind is None or c.kind == kind]

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        self.announce(request)
        outcome = self._answer(request)
        if request.kind not in ("query", "verdict"):
            return outcome
        return require_verdict(outcome, f"scripted {request.kind} {request.name!r}")

    def announce(self, request: Request) -> Liveness:
        """A scripted call returns at once: its banner is recorded (and printed) right away."""
        label = banner_label(request)
        if label is not None:
            line = spawn_banner(label)
            with self._lock:
                self._banners.append(line)
            if self.progress is not None:
                self.progress(line)
        return Liveness(None, None, 0)

    def _answer(self, request: Request) -> Outcome:
        key: CallKey = (request.kind, request.name)
        call = Call(
            **{field: getattr(request, field) for field in _COPIED},
            text=_text(request),
            role_context=request.role_context or {},
            request=request,
        )
        with self._lock:
            index = len(self._calls)
            self._calls.append(call)  # recorded at the start: the order calls were made
            effect = self._effects.get(key) or self._effects.get((key[0], WILDCARD))
            responder = self._next_responder(key)
        # Effects and responders run unlocked: they may be slow or wait on each other.
        if effect is not None:
            effect(request)
        outcome = self._respond(responder, request)
        with self._lock:
            self._calls[index] = call.model_copy(update={"outcome": outcome})
        self._show(request, outcome)
        return outcome

    def _show(self, request: Request, outcome: Outcome) -> None:
        """`-v`: what a scripted unit "printed", line by line, as a real runtime streams it."""
        if self.output is None:
            return
        label = output_label(request)
        for stream, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
            for line in text.splitlines():
                self.output(label, stream, line)

    def _next_responder(self, key: CallKey) -> Responder | None:
        matched = key if key in self._script else (key[0], WILDCARD)
        value = self._script.get(matched)
        if value is None or isinstance(value, Outcome) or callable(value):
            return value
        served = self._served.get(matched, 0)
        self._served[matched] = served + 1
        return value[min(served, len(value) - 1)]

    @staticmethod
    def _respond(responder: Responder | None, request: Request) -> Outcome:
        if responder is None:
            if request.kind in ("query", "verdict"):
                return Outcome.succeeded(data=_NO_BLOCK)
            return Outcome.succeeded()
        outcome = responder if isinstance(responder, Outcome) else responder(request)
        if not isinstance(outcome, Outcome):
            raise TypeError(
                f"scripted responder for {(request.kind, request.name)} returned "
                f"{type(outcome).__name__}, not an Outcome"
            )
        return outcome


def _text(request: Request) -> str | None:
    if request.kind == "context" and request.role and request.role_context:
        return request.role_context[request.role][0]
    return request.message.text if request.message else None
