"""Guards: pure functions of what the hooks of a transition attempt produced (the dispatcher
runs the gate checks once per attempt) and of plan facts: plain data in, bool out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from looprail.journal.models import HookKind  # the journal records the same kinds

DETAILS_MAX_CHARS = 1000
# ok: ran / delivered. failed: a step or native hook did not succeed. pass/block: a gate's
# delivered verdict. error: a gate's check could not produce a verdict. skipped: not run
# (refused grammar, earlier refusal). report: a native :post failure (never blocks).
HookStatus = Literal["ok", "failed", "pass", "block", "error", "skipped", "report"]


class HookResult(BaseModel):
    """What one dispatched hook did during a transition attempt."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    point: str
    cap_id: str
    kind: HookKind
    status: HookStatus
    blocking: bool = False  # gates: declared blocking; native: a :pre failure (`block`)
    on_error: str | None = None  # skip | halt | fail
    message: str = ""
    label: str = ""  # what ran: `skill:gsd-x`, `query ui plan-gate`, `hooks/section/name`
    duration_s: float = 0.0
    details: dict[str, object] | None = None  # a gate verdict's extra keys (what the host printed)

    @property
    def shown(self) -> str:
        """The message with the verdict's details, as a block is shown, journaled, reported:
        a host check may say why only in its details (`{"frontend": true, "hasUiSpec": false}`)."""
        if not self.details:
            return self.message or "(no message)"
        text = json.dumps(self.details, ensure_ascii=False, separators=(", ", ": "), default=str)
        if len(text) > DETAILS_MAX_CHARS:
            text = text[: DETAILS_MAX_CHARS - 1] + "…"
        return f"{self.message} (details: {text})" if self.message else f"details: {text}"


def refuses(result: HookResult) -> bool:
    """Does this one result refuse the transition? A blocking gate's `block` (onError never
    bypasses a verdict), a gate's check error or a failed step with `onError` halt (or `fail`),
    a native hook's `block` (a `:pre` point's)."""
    halting = result.on_error in ("halt", "fail")
    if result.kind == "gate":
        if result.status == "block":
            return result.blocking
        return result.status == "error" and halting
    if result.kind == "step":
        return result.status == "failed" and halting
    if result.kind == "native":
        return result.status == "block"
    return False


def refusal(results: Sequence[HookResult]) -> HookResult | None:
    """The first result that refuses the transition, or None."""
    return next((r for r in results if refuses(r)), None)


def hooks_allow(results: Sequence[HookResult]) -> bool:
    """The guard on every transition: no hook of this attempt refuses it."""
    return refusal(results) is None


class PlanFacts(BaseModel):
    """What the guards may know about the phase's plans and artifacts (computed by the runner
    from `.planning/`, passed in as plain values)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    plan_count: int = 0
    waves_total: int = 0
    waves_pending: int = 0  # waves with at least one plan without a SUMMARY
    has_context: bool = False
    verification_status: str | None = None  # frontmatter `status` of VERIFICATION.md


def plans_ready(facts: PlanFacts) -> bool:
    """plan → execute needs at least one plan (and so is the plan step done)."""
    return facts.plan_count > 0


def wave_pending(facts: PlanFacts) -> bool:
    """A wave has plans left to run (to start one, or another after closing one)."""
    return facts.waves_pending > 0


def waves_finished(facts: PlanFacts) -> bool:
    return facts.waves_pending == 0


def discuss_done(facts: PlanFacts) -> bool:
    return facts.has_context


def verify_done(facts: PlanFacts) -> bool:
    """verify → ship needs a VERIFICATION.md whose status is `passed` (docs/contract.md)."""
    return facts.verification_status == "passed"


GUARDS = {
    "plans_ready": plans_ready,
    "wave_pending": wave_pending,
    "more_waves": wave_pending,
    "waves_finished": waves_finished,
    "discuss_done": discuss_done,
    "plan_done": plans_ready,
    "verify_done": verify_done,
}

FACT_REASONS = {
    "plans_ready": "the plan step produced no plans",
    "plan_done": "the plan step produced no plans",
    "wave_pending": "no wave has plans left to run",
    "waves_finished": "plans without a SUMMARY remain",
    "discuss_done": "the discuss step produced no CONTEXT.md",
    "verify_done": "VERIFICATION.md does not report `status: passed`",
}
