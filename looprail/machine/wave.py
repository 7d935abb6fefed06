"""The looped step's work in `wave_running`: one wave of the phase's plans.

Which plans run (a halted plan, and what depends on it, never does), where (the run's
executor, e.g. Dask, or here on `jobs` threads), each through `LoopRunner.run_plan` (the one
task protocol); then what they did comes back (the workspace merges) and the wave is journaled
finished.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from functools import partial
from typing import TYPE_CHECKING

from looprail.errors import CheckpointPause, HaltError
from looprail.journal.recorder import EventRecord
from looprail.machine.tasks import halted_plans_reason
from looprail.plans import Plan, Wave
from looprail.plans.waves import halt_blocked, unmet_blocked
from looprail.runtime.executors import Settled, interruptible_executor, run_all, start_threads
from looprail.textsafe import plural

if TYPE_CHECKING:
    from looprail.machine.runner import LoopRunner


def run_wave(runner: LoopRunner) -> None:
    """Run the current wave's plans (on the run's executor, or here on `jobs` threads), merge
    what they did back, journal the wave finished; halt after it if a plan was stopped."""
    wave, pending, halt = _wave_plans(runner)
    jobs = runner.options.jobs if wave.parallel_safe else 1
    if not wave.parallel_safe and runner.options.jobs > 1:
        runner.progress.line(
            f"  wave {wave.number} runs sequentially: plans share " + ", ".join(wave.overlap_files)
        )
    jobs = runner.ctx.workspace.jobs(jobs, len(pending))
    runner.ctx.workspace.prepare(wave.number, [p.id for p in pending], jobs)
    done = runner.recorder.done_tasks()
    with ExitStack() as stack:
        run_plans = _plan_runs(runner, stack, wave.number, pending, done, jobs)
        runner.recorder.wave_started(
            wave.number,
            [(t.id, p.id) for p in pending for t in p.tasks if not t.is_checkpoint],
        )
        runner.progress.new_stage()
        runner.progress.line(
            f"  wave {wave.number}: {plural(len(pending), 'plan')}, {jobs} at a time"
        )
        errors = [s.error for s in run_plans() if not s.ok]
        # Still in the block: the pool's idle threads are joined once the wave is
        # journaled as finished, not before.
        if errors:
            # Siblings were never cancelled; the first failure (in plan order) is the reason.
            pauses = [e for e in errors if isinstance(e, CheckpointPause)]
            raise (
                next((e for e in errors if not isinstance(e, CheckpointPause)), None) or pauses[0]
            )
        runner.ctx.workspace.merge(wave.number)  # what finished comes back before any halt
        if halt is not None:
            raise HaltError(halt)
        runner.recorder.event(EventRecord(kind="wave_finished", wave=wave.number, outcome="done"))
        runner.ctx.workspace.settle(wave.number)  # worktrees removed while the run goes on
        runner.waves_run += 1
    if runner.ctx.native is not None:
        runner.ctx.native.wave_settled()


def _wave_plans(runner: LoopRunner) -> tuple[Wave, list[Plan], str | None]:
    """The current wave, its plans to run, and why the loop stops after it (a halted plan
    is never re-run and what depends on it never runs: the rest of the wave runs, then the
    loop stops there, as the reference's plan-index `runnable` says)."""
    waves = runner.waves()
    if runner.wave is None:  # resumed inside a running wave: it is the first unfinished one
        runner.wave = next((w.number for w in waves.waves if w.pending), None)
    wave = waves.wave(runner.wave) if runner.wave is not None else None
    if wave is None:
        raise HaltError(f"wave {runner.wave} no longer exists (plans changed?)")
    plans = {p.id: p for p in runner.phase.plans}
    blocked = halt_blocked(runner.phase.plans)
    waiting = unmet_blocked(runner.phase.plans)  # a dependency of an earlier phase unfinished
    stopped = [pid for pid in wave.pending if plans[pid].halted or pid in blocked or pid in waiting]
    pending = [plans[pid] for pid in wave.pending if pid not in stopped]
    why = halted_plans_reason(wave.number, stopped, plans, blocked, waiting)
    return wave, pending, why if stopped else None


def _plan_runs(
    runner: LoopRunner, stack: ExitStack, wave: int, pending: list[Plan], done: set[str], jobs: int
) -> Callable[[], Sequence[Settled[None]]]:
    """How the wave's plans will run: on the given executor, or here on `jobs` threads."""
    executor = runner.options.executor
    if executor is not None:
        return partial(executor.run_wave, runner, wave, pending, done)
    # Each plan's task chart is built before the wave starts (it has no effects: its
    # initial state has no enter action), not by the plan's thread while the other plans'
    # threads wait for the GIL to start their processes.
    charts = [runner.plan_chart(p, wave) for p in pending]
    local = stack.enter_context(interruptible_executor(jobs))
    # Its threads are up before the wave starts: started one per plan as the plans are
    # handed over, each would wait for the one before to be scheduled.
    start_threads(local, min(jobs, len(pending)))
    calls = [
        partial(runner.run_plan, p, wave, done, chart)
        for p, chart in zip(pending, charts, strict=True)
    ]
    return partial(run_all, local, calls)
