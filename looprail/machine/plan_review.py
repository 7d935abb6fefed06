"""The plan checks (plans/plancheck.py) in a run, before any executor runs: plans the run's own
planner wrote are held to them (the planner is handed the findings once; if they still fail,
the run halts naming them), plans that were there before the run are only warned about."""

from __future__ import annotations

from typing import TYPE_CHECKING

from looprail.errors import HaltError
from looprail.plans.plancheck import check_phase_plans, findings_text, warning_lines
from looprail.runtime.base import DispatchContext, Outcome, do_phase_work

if TYPE_CHECKING:
    from looprail.machine.runner import LoopRunner

_POINT = "plan:post"  # where the findings are delivered: the plan step's role context


def warn_existing_plans(runner: LoopRunner) -> None:
    """Say what the plans already in the phase fail (never refused: the user's plans)."""
    if not runner.phase.plans:
        return
    for line in warning_lines(check_phase_plans(runner.project, runner.phase)):
        if line not in runner.warnings:
            runner.warnings.append(line)
            runner.progress.warn(line)


def review_own_plans(runner: LoopRunner, role: str, ctx: DispatchContext) -> Outcome:
    """After the planner wrote the phase's plans: check them; on findings hand them to the
    planner once and check again; still failing, halt naming them. The planner's last outcome."""
    outcome = Outcome.succeeded()
    for attempt in (1, 2):
        runner.phase = runner.phases.load()
        report = check_phase_plans(runner.project, runner.phase)
        if not report.findings:
            return outcome
        count = f"{len(report.findings)} finding(s)"
        if attempt == 2:
            said = "; ".join(f.line() for f in report.findings)
            raise HaltError(f"plan checks still fail after the planner was told ({count}): {said}")
        runner.progress.line(f"  plan checks: {count}; the {role} is handed them once")
        told = ctx.model_copy(update={"point": _POINT})
        runner.dispatcher.contribute(role, findings_text(report), told)
        texts = runner.dispatcher.role_context(role, "plan")
        outcome = do_phase_work(runner.ctx.runtime, role, "plan", ctx, texts)
        if not outcome.ok:
            return outcome
    return outcome  # pragma: no cover - the loop returns or raises
