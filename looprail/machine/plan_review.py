"""The plan checks (plans/plancheck.py) in a run, before any executor runs: plans the run's own
planner wrote are held to them (the planner is handed the findings once; if they still fail,
the run halts naming them), plans that were there before the run are only warned about."""

from __future__ import annotations

from typing import TYPE_CHECKING

from looprail.errors import HaltError
from looprail.plans.plancheck import check_phase_plans, findings_text, warning_lines
from looprail.runtime.base import DispatchContext, Outcome, do_phase_work

if TYPE_CHECKING:
    from looprail.machine.context import RunContext
    from looprail.machine.dispatch import Dispatcher
    from looprail.plans import Phase, PhaseCache

_POINT = "plan:post"  # where the findings are delivered: the plan step's role context


def warn_existing_plans(run: RunContext, phase: Phase, warnings: list[str]) -> None:
    """Say what the plans already in `phase` fail, once each (never refused: the user's)."""
    if not phase.plans:
        return
    for line in warning_lines(check_phase_plans(run.project, phase)):
        if line not in warnings:
            warnings.append(line)
            run.progress.warn(line)


def review_own_plans(
    run: RunContext, phases: PhaseCache, dispatcher: Dispatcher, role: str, ctx: DispatchContext
) -> Outcome:
    """Check the plans the planner wrote; hand it the findings once, then halt naming them."""
    outcome = Outcome.succeeded()
    for attempt in (1, 2):
        report = check_phase_plans(run.project, phases.load())
        if not report.findings:
            return outcome
        count = f"{len(report.findings)} finding(s)"
        if attempt == 2:
            said = "; ".join(f.line() for f in report.findings)
            raise HaltError(f"plan checks still fail after the planner was told ({count}): {said}")
        run.progress.line(f"  plan checks: {count}; the {role} is handed them once")
        told = ctx.model_copy(update={"point": _POINT})
        dispatcher.contribute(role, findings_text(report), told)
        texts = dispatcher.role_context(role, "plan")
        outcome = do_phase_work(run.runtime, role, "plan", ctx, texts)
        if not outcome.ok:
            return outcome
    return outcome  # pragma: no cover - the loop returns or raises
