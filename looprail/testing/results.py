"""What the harness answers: `TransitionResult` (one transition attempt) and `HarnessRun` (a
whole loop run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from looprail.machine.guards import HookResult
from looprail.runtime.scripted import Call

if TYPE_CHECKING:
    from looprail.journal.models import EventRecord
    from looprail.machine.runner import RunResult


@dataclass
class TransitionResult:
    """One transition attempt. Truthy when allowed."""

    event: str
    state_before: list[str]
    state_after: list[str]
    allowed: bool
    refused_by: str | None = None  # capId of the hook that refused
    refusal: HookResult | None = None
    message: str = ""  # the refusing hook's message, or why a plan-fact guard refused
    reason: str | None = None  # the runner's one-line halt reason
    guard: str | None = None  # the plan-fact guard that refused (e.g. plans_ready)
    results: list[HookResult] = field(default_factory=list)  # every hook dispatched, in order
    calls: list[Call] = field(default_factory=list, repr=False)  # runtime calls of this attempt

    def __bool__(self) -> bool:
        return self.allowed

    @property
    def blocked(self) -> bool:
        """Refused by a verdict: a blocking gate answered `block`, or a native :pre hook
        blocked. This is what a refusal test means; `errored` is the wrong reason to refuse."""
        r = self.refusal
        return r is not None and r.status == "block"

    @property
    def errored(self) -> bool:
        """Refused because something broke, not by a verdict: a gate's check errored (a typo
        in a query, a predicate whose artifact path is invalid…) with onError halt, or a step
        failed with onError halt."""
        r = self.refusal
        return r is not None and r.status in ("error", "failed")

    @property
    def errors(self) -> list[HookResult]:
        """Every dispatched hook whose check errored or whose step failed, refusing or not
        (an advisory or onError skip gate whose check errored does not refuse, but is here)."""
        return [r for r in self.results if r.status in ("error", "failed")]

    def result_of(self, cap_id: str, kind: str | None = None) -> HookResult:
        """The dispatched result of `cap_id`'s hook (of `kind`), or KeyError."""
        for r in self.results:
            if r.cap_id == cap_id and (kind is None or r.kind == kind):
                return r
        raise KeyError(f"no {kind or 'hook'} of {cap_id!r} was dispatched ({self._seen()})")

    def _seen(self) -> str:
        return ", ".join(f"{r.kind} {r.cap_id}" for r in self.results) or "none"


@dataclass
class HarnessRun:
    """A whole loop run: the runner's result, the events it recorded, the runtime calls, and
    `log`, one line per event and call in the order they happened."""

    result: RunResult
    events: list[EventRecord]
    calls: list[Call]
    log: list[str]

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def shipped(self) -> bool:
        return self.result.status == "shipped"

    @property
    def reason(self) -> str | None:
        return self.result.reason

    @property
    def refused_by(self) -> str | None:
        r = self.result.refused_by
        return r.cap_id if r is not None else None

    def calls_of(self, kind: str) -> list[Call]:
        return [c for c in self.calls if c.kind == kind]

    def index(self, prefix: str) -> int:
        """Where the first log line starting with `prefix` is (ValueError if none)."""
        for i, line in enumerate(self.log):
            if line.startswith(prefix):
                return i
        raise ValueError(f"nothing in the log starts with {prefix!r}; log:\n" + "\n".join(self.log))

    def before(self, first: str, then: str) -> bool:
        """Did the first log line starting with `first` come before the first with `then`?"""
        return self.index(first) < self.index(then)
