"""The runner: drives the compiled loop chart (`machine/chart.py`) for one phase of one project.
At each step it does the work of the state the loop is in, then attempts the event the chart
names: the plan-fact guards first, then the points' hooks, then `send`, where the chart's guards
decide; a refusal leaves the state unchanged and halts the run naming the gate or the guard.
Each task goes through a `TaskChart`, whose `begin_task` runs the mandatory `execute:task`
resolver and the `read_first` check before the body (`run_task`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Literal

from statemachine.exceptions import TransitionNotAllowed

from looprail.errors import (
    CheckpointPause,
    GuardRefused,
    HaltError,
    LooprailError,
    TransitionRefused,
)
from looprail.errors import StopRequested as _Stop
from looprail.journal.recorder import EventRecord, Recorder
from looprail.layout import summary_file
from looprail.machine import guards as G
from looprail.machine.chart import WAVE_RUNNING, TaskChart, compile_loop, restored, state_path
from looprail.machine.checkpoint import (
    blocked_checkpoint,
    blocked_pending,
    drop_plan_secret,
    pass_blocked,
    pass_checkpoint,
    secret_env,
    summary_lines,
    with_answers,
)
from looprail.machine.context import (
    CheckpointState,
    ExecuteTask,
    RunContext,
    RunOptions,
    RunResult,
    RunStatus,
    run_ending,
)
from looprail.machine.dispatch import Dispatcher
from looprail.machine.plan_review import review_own_plans, warn_existing_plans
from looprail.machine.progress import Progress, fmt_duration
from looprail.machine.session.resume import phase_snapshot
from looprail.machine.tasks import PlanRun, halted_plans_reason, task_work, write_summary
from looprail.machine.tracking import track_phase, track_plan
from looprail.machine.verify import (
    HUMAN_NEEDED,
    After,
    CheckRun,
    Checks,
    VerifiedCall,
    blocked_reason,
    closing_words,
    human_verify_task,
    mark_human_verified,
    must_have_runs,
)
from looprail.plans import Phase, PhaseCache, Plan, Task, Wave, WavePlan, compute_waves
from looprail.plans.frontmatter import file_frontmatter
from looprail.plans.musthaves import MustHaves, promised_files, read_must_haves
from looprail.plans.planfile import unknown_key_warnings
from looprail.plans.taskchecks import checks_of, unchecked_tasks
from looprail.plans.waves import halt_blocked, unmet_blocked
from looprail.runtime.base import (
    TASK_ROLE,
    DispatchContext,
    Outcome,
    TaskWork,
    do_phase_work,
    execute_task,
)
from looprail.runtime.executors import Settled, interruptible_executor, run_all, start_threads
from looprail.runtime.settings import looprail_settings
from looprail.textsafe import plural

__all__ = ["LoopRunner", "RunContext", "RunOptions", "RunResult", "RunStatus"]


class LoopRunner:
    """One run of the loop over one phase: `LoopRunner(ctx).run()`, `ctx` a `RunContext`
    (`runtime` any `Runtime`: LocalRuntime by default in the CLI, ScriptedRuntime in tests)."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.chart_class = compile_loop(ctx.spec)
        self.machine = restored(self.chart_class, ctx.state or ())
        # The phase stays in memory for the run: each look re-stats, parses only what changed.
        self.phases = ctx.phases if ctx.phases is not None else PhaseCache(ctx.project, ctx.phase)
        self.phase: Phase = self.phases.load()
        self._waves_of: tuple[Phase, WavePlan] | None = None
        self._task_total: tuple[Phase, int] | None = None
        self._looked: G.PlanFacts | None = None  # the last facts, until anything may have run
        native = ctx.native
        self.dispatcher = Dispatcher(
            compiled=ctx.compiled,
            config=ctx.config,
            runtime=ctx.runtime,
            project=ctx.project,
            phase_number=self.phase.number,
            phase_dir=self.phase.dir,
            flavor=ctx.options.flavor,
            host_tool=ctx.options.host_tool,
            progress=ctx.progress,
            recorder=ctx.recorder,
            native=native.point_hooks if native is not None else None,
            native_count=native.point_count if native is not None else None,
        )
        self.tasks_run = 0
        self.waves_run = 0
        # Plans that ran to their SUMMARY in this run: one is never run again (issue 40).
        self.finished_plans: set[str] = set()
        self._count_lock = threading.Lock()
        self.warnings: list[str] = []
        self.wave: int | None = ctx.wave  # the wave being run (journaled with start_wave)
        # Steps whose role was killed mid-work in an earlier process: done again on resume.
        self.redo_steps: frozenset[str] = ctx.redo_steps
        self._said: set[str] = set()
        self.checkpoints = CheckpointState()
        self.checks = Checks(ctx.project, ctx.recorder, looprail_settings(ctx.config).verify)
        self._warn_plan_keys()
        warn_existing_plans(self.ctx, self.phase, self.warnings)

    # What the run was given: read-only, from the frozen context.

    @property
    def project(self) -> Path:
        return self.ctx.project

    @property
    def config(self) -> Mapping[str, object] | None:
        return self.ctx.config

    @property
    def options(self) -> RunOptions:
        return self.ctx.options

    @property
    def recorder(self) -> Recorder:
        return self.ctx.recorder

    @property
    def progress(self) -> Progress:
        return self.ctx.progress

    def _warn_plan_keys(self) -> None:
        """Say once per run what a plan's frontmatter has that looprail ignores (`depend_on:`
        would put the plan in the wrong wave without a word)."""
        for plan in self.phase.plans:
            try:
                where = plan.path.relative_to(self.project).as_posix()
            except ValueError:
                where = str(plan.path)
            for w in unknown_key_warnings(plan, where):
                if w not in self._said:
                    self._said.add(w)
                    self.progress.warn(w)

    @property
    def state(self) -> list[str]:
        return state_path(self.machine)

    def run(self) -> RunResult:
        start = time.monotonic()
        self._looked = None
        status: RunStatus = "shipped"
        reason: str | None = None
        refused: G.HookResult | None = None
        try:
            if self.ctx.native is not None:
                self.ctx.native.start(self.dispatcher.context(None))
            while self.machine.next_events():  # none: the chart is in its final state
                self._safe_point()
                self._step()
            track_phase(self.ctx, self.phase, self.dispatcher.context(None))
        except (LooprailError, CheckpointPause, _Stop, OSError) as exc:
            status, reason, refused = run_ending(exc)
        finally:
            try:
                self.ctx.workspace.close()  # the last wave's worktrees are gone before the run ends
            finally:
                self.progress.close()
        if status != "shipped":
            point, cap_id = (refused.point, refused.cap_id) if refused else (None, None)
            record = EventRecord(
                kind="halted", point=point, cap_id=cap_id, outcome=status, message=reason
            )
            self.recorder.event(record, state=self.state)
        if self.ctx.native is not None:
            self.ctx.native.settled(status, reason, self.dispatcher.context(None))
        return RunResult(
            status=status,
            state=self.state,
            reason=reason,
            refused_by=refused,
            tasks_run=self.tasks_run,
            waves_run=self.waves_run,
            hooks_dispatched=self.dispatcher.dispatched,
            duration_s=time.monotonic() - start,
            warnings=self.warnings,
            unverified=self.checks.unverified(),
        )

    def _status(self, doing: str | None = None) -> None:
        """The live status line (terminals only): where the loop is and how far along."""
        if not self.progress.live or self.progress.quiet:
            return
        parts = ["/".join(self.state)]
        if self.wave is not None and self.ctx.spec.looped in self.state:
            parts.append(f"wave {self.wave}")
        if self._task_total is None or self._task_total[0] is not self.phase:
            total = sum(1 for p in self.phase.plans for t in p.tasks if not t.is_checkpoint)
            self._task_total = (self.phase, total)
        total = self._task_total[1]
        if total:
            parts.append(f"{self.recorder.done_count()}/{total} tasks done")
        if doing:
            parts.append(doing)
        self.progress.status(" · ".join(parts))

    def _safe_point(self) -> None:
        """Between steps and tasks: honour an `interrupt`/`shutdown` a native hook asked for."""
        if self.ctx.native is not None and self.ctx.native.stop is not None:
            status, reason = self.ctx.native.stop
            raise _Stop(status, reason)

    def _step(self) -> None:
        """Do the work of the state the loop is in, then attempt the event the chart names."""
        self._work(self.state[-1])
        event = self.machine.next_event(self._looked or self.facts())
        self._attempt(event, wave=self._wave_of(event))

    def _work(self, state: str) -> None:
        """The work of `state`: a step's role writes its artifact unless its `done` guard says
        it is there; `wave_running` runs the current wave."""
        if state == WAVE_RUNNING:
            self._looked = None  # plans run: files change
            self._run_wave()
            return
        step = next((s for s in self.ctx.spec.steps if s.name == state), None)
        if step is None or step.name == self.ctx.spec.looped:
            return
        facts = self.facts()
        if step.artifact == "PLAN.md" and not self.phase.plans and self.phase.stray_plans:
            # Planning again would write over work that only sits in the wrong folder.
            raise HaltError(self.phase.warnings[-1])
        # A VERIFICATION.md that did not pass is verified again (gaps may be fixed by now).
        guard = step.done_guard
        if step.name != "verify" or facts.verification_status != HUMAN_NEEDED:
            done = guard is not None and self.machine.verdict(guard, facts)
            self._phase_work(step.name, done=done)
        if step.name == "verify":
            self._human_needed()

    def _human_needed(self) -> None:
        """The verifier answered `human_needed`: a human-verify checkpoint, answered like any."""
        facts = self.facts()
        path = self.phase.verification_path
        if facts.verification_status != HUMAN_NEEDED or path is None:
            return
        plan, task = human_verify_task(self.phase.number, path, file_frontmatter(path))
        pass_checkpoint(self, plan, task, self.wave or 0, self.execute_here)
        mark_human_verified(path, "a person approved the human_verification items")
        self._looked = None

    def _wave_of(self, event: str) -> int | None:
        """The wave an attempt is about (opening one: the first with plans left), or None."""
        points = self.machine.crossing(event)[0].points
        if self.ctx.spec.wave_pre in points:
            self.wave = next((w.number for w in self.waves().waves if w.pending), None)
        spec = self.ctx.spec
        return self.wave if {spec.wave_pre, spec.wave_post} & set(points) else None

    def waves(self) -> WavePlan:
        if self._waves_of is None or self._waves_of[0] is not self.phase:
            self._waves_of = (self.phase, compute_waves(self.phase.plans, root=self.project))
        return self._waves_of[1]

    def facts(self) -> G.PlanFacts:
        """Look at the phase again: what the chart's plan-fact guards are given."""
        self.phase = self.phases.load()
        status = None
        if self.phase.verification_path is not None:
            fm = file_frontmatter(self.phase.verification_path)
            if isinstance(fm, dict) and fm.get("status") is not None:
                status = str(fm.get("status"))
        waves = self.waves() if self.phase.plans else None
        # Counts and a str, derived here: no validator to build (a run-path cost).
        self._looked = G.PlanFacts.model_construct(
            plan_count=len(self.phase.plans),
            waves_total=len(waves.waves) if waves else 0,
            waves_pending=sum(1 for w in waves.waves if w.pending) if waves else 0,
            has_context=self.phase.has_context,
            verification_status=status,
        )
        return self._looked

    def attempt(self, event: str, *, wave: int | None = None) -> list[G.HookResult]:
        """One transition attempt (what a guard test drives): its hook results, or
        `TransitionRefused` / `GuardRefused` with the state unchanged."""
        self._looked = None  # a caller may have changed files since: look again
        return self._attempt(event, wave=wave)

    def _attempt(self, event: str, *, wave: int | None = None) -> list[G.HookResult]:
        crossing = self.machine.crossing(event)
        if not crossing:  # pragma: no cover - the runner only sends events the chart names
            raise HaltError(f"no transition {event!r} from {self.state}")
        # Nothing ran since the last look (e.g. finish_wave → start_wave): no need to look again.
        facts = self._looked or self.facts()
        if not self.machine.allows(event, facts):  # refused before any hook has effects
            raise self._refused(event)
        results: list[G.HookResult] = []
        for point in crossing[0].points:
            results += self.dispatcher.dispatch(point, wave=wave)
            if not G.hooks_allow(results):
                break
        before = self.state
        if results:  # hooks may have written plans or artifacts: look again
            facts = self.facts()
        try:
            self.machine.send(event, results=results, facts=facts)
        except TransitionNotAllowed:
            refused = G.refusal(results)
            if refused is not None:
                raise TransitionRefused(refused) from None
            raise self._refused(event) from None
        message = f"{'/'.join(before)} → {'/'.join(self.state)}"
        data = {"event": event, "source": before, "target": self.state}
        record = EventRecord(kind="transition", wave=wave, message=message, data=data)
        self.recorder.event(record, state=self.state)
        self.progress.line(f"● {'/'.join(self.state)}")
        self._status()
        if self.ctx.on_transition is not None:
            self.ctx.on_transition(self.state)
        return results

    def _refused(self, event: str) -> GuardRefused:
        guard = self.machine.refused_guard(event)
        reason = G.FACT_REASONS.get(guard, guard) if guard else "refused"
        return GuardRefused(event, guard, reason)

    def _phase_work(self, step: str, *, done: bool) -> None:
        spec = self.ctx.spec.step(step)
        if step in self.redo_steps:  # killed mid-work before: its artifacts do not count
            self.redo_steps = self.redo_steps - {step}
            done = False
        if done:  # nothing ran: the facts just looked at still hold for the attempt
            self.progress.line(f"  {spec.artifact} exists: no {spec.role} work needed")
            return
        self._looked = None
        self._status(f"{spec.role} at work")
        self.progress.new_stage()
        self._role_event("role_started", step, spec.role)
        ctx = self.dispatcher.context(None)
        if step == "discuss" and self.options.interactive:
            # a conversation on the user's terminal: the live status area would draw over it
            self.progress.close()
            ctx = ctx.model_copy(update={"terminal": True})
        texts = self.dispatcher.role_context(spec.role, step)
        if step == "verify":  # evidence, not a task list: what looprail's checks found
            texts = (*texts, "\n".join(self.checks.evidence()).strip())
        outcome = do_phase_work(self.ctx.runtime, spec.role, step, ctx, texts)
        if outcome.ok and spec.artifact == "PLAN.md":  # its plans meet the plan checks
            outcome = review_own_plans(self.ctx, self.phases, self.dispatcher, spec.role, ctx)
        if not outcome.ok:
            self._role_event("role_finished", step, spec.role, outcome="failed")
            raise HaltError(f"{step}: {spec.role} failed: {outcome.detail}")
        self.progress.line(
            f"  {spec.role} did the {step} work in {fmt_duration(outcome.duration_s)}"
        )
        self.phase = self.phases.load()
        self._warn_plan_keys()
        if self.ctx.on_transition is not None:
            # The role wrote artifacts (plans): journal the inputs now, so a crash before the
            # next transition does not look like someone changed them underneath the run.
            self.ctx.on_transition(self.state)
        self._role_event("role_finished", step, spec.role, outcome="ok")

    def _role_event(
        self,
        kind: Literal["role_started", "role_finished"],
        step: str,
        role: str,
        outcome: str | None = None,
    ) -> None:
        """Bracket a role's work in the journal: a resume does a role's unfinished work again."""
        data: dict[str, object] = {"step": step, "role": role}
        if kind == "role_started":
            data["files"] = phase_snapshot(self.phase.dir)
        self.recorder.event(EventRecord(kind=kind, outcome=outcome, data=data), state=self.state)

    def _run_wave(self) -> None:
        """Run the current wave's plans (on the run's executor, or here on `jobs` threads), merge
        what they did back, journal the wave finished; halt after it if a plan was stopped."""
        wave, pending, halt = self._wave_plans()
        jobs = self.options.jobs if wave.parallel_safe else 1
        if not wave.parallel_safe and self.options.jobs > 1:
            self.progress.line(
                f"  wave {wave.number} runs sequentially: plans share "
                + ", ".join(wave.overlap_files)
            )
        jobs = self.ctx.workspace.jobs(jobs, len(pending))
        self.ctx.workspace.prepare(wave.number, [p.id for p in pending], jobs)
        done = self.recorder.done_tasks()
        with ExitStack() as stack:
            run_plans = self._plan_runs(stack, wave.number, pending, done, jobs)
            self.recorder.wave_started(
                wave.number, [(t.id, p.id) for p in pending for t in p.tasks if not t.is_checkpoint]
            )
            self.progress.new_stage()
            self.progress.line(
                f"  wave {wave.number}: {plural(len(pending), 'plan')}, {jobs} at a time"
            )
            errors = [s.error for s in run_plans() if s.error is not None]
            # In the block: the pool's threads are joined once the wave is journaled finished.
            if errors:  # the first failure in plan order (siblings ran on), before any pause
                raise next((e for e in errors if not isinstance(e, CheckpointPause)), errors[0])
            self.ctx.workspace.merge(wave.number)  # what finished comes back before any halt
            self.finished_plans.update(p.id for p in pending)
            if halt is not None:
                raise HaltError(halt)
            if wave.number == self.waves().waves[-1].number:  # the phase's work, merged
                self._recheck_merged()
            self.recorder.event(EventRecord(kind="wave_finished", wave=wave.number, outcome="done"))
            self.ctx.workspace.settle(wave.number)  # worktrees removed while the run goes on
            self.waves_run += 1
        if self.ctx.native is not None:
            self.ctx.native.wave_settled()

    def _wave_plans(self) -> tuple[Wave, list[Plan], str | None]:
        """The current wave, its plans to run, and why the loop stops after it (a halted plan
        and what depends on it never run: the reference's plan-index `runnable`)."""
        waves = self.waves()
        if self.wave is None:  # resumed inside a running wave: it is the first unfinished one
            self.wave = next((w.number for w in waves.waves if w.pending), None)
        wave = waves.wave(self.wave) if self.wave is not None else None
        if wave is None:
            raise HaltError(f"wave {self.wave} no longer exists (plans changed?)")
        plans = {p.id: p for p in self.phase.plans}
        blocked = halt_blocked(self.phase.plans)
        waiting = unmet_blocked(self.phase.plans)  # a dependency of an earlier phase unfinished
        stopped = [
            pid for pid in wave.pending if plans[pid].halted or pid in blocked or pid in waiting
        ]
        pending = [plans[pid] for pid in wave.pending if pid not in stopped]
        again = [p for p in pending if p.id in self.finished_plans]
        if again:  # no progress: the wave would run nothing and start again, forever
            raise HaltError(
                f"wave {wave.number}: plan {again[0].id} finished in this run, but the phase scan "
                f"does not see it done (no regular {summary_file(again[0].path.name)} beside "
                f"{again[0].path.name}); the wave is not started again"
            )
        why = halted_plans_reason(wave.number, stopped, plans, blocked, waiting)
        return wave, pending, why if stopped else None

    def _plan_runs(
        self, stack: ExitStack, wave: int, pending: list[Plan], done: set[str], jobs: int
    ) -> Callable[[], Sequence[Settled[None]]]:
        """How the wave's plans will run: on the given executor, or here on `jobs` threads."""
        executor = self.options.executor
        if executor is not None:
            return partial(executor.run_wave, self, wave, pending, done)
        # Charts built and threads up before the wave starts, not by each plan's thread while
        # the others wait for the GIL.
        charts = [self.plan_chart(p, wave) for p in pending]
        local = stack.enter_context(interruptible_executor(jobs))
        start_threads(local, min(jobs, len(pending)))
        calls = [
            partial(self.run_plan, p, wave, done, chart)
            for p, chart in zip(pending, charts, strict=True)
        ]
        return partial(run_all, local, calls)

    def plan_chart(self, plan: Plan, wave: int) -> TaskChart:
        """A plan's task chart, in its initial state, over a fresh `PlanRun`."""
        return TaskChart(model=PlanRun(self.ctx, self.task_hooks, plan, wave))

    def run_plan(
        self,
        plan: Plan,
        wave: int,
        done: set[str],
        chart: TaskChart | None = None,
        execute: ExecuteTask | None = None,
    ) -> None:
        """Run a plan's tasks in order, each through `run_task`, then write its SUMMARY (every
        executor runs a plan so); `execute`: where a task's body runs (default: here)."""
        chart = chart if chart is not None else self.plan_chart(plan, wave)
        model: PlanRun = chart.model
        if self.checks.settings.unchecked == "fail":  # for CI: before any executor runs
            bad = [c for c in unchecked_tasks(plan) if c.task_id not in done]
            if bad:
                raise HaltError(
                    f"{plan.path.name}: task {bad[0].task_id} has no automated check "
                    f"({bad[0].reason}) and looprail.verify.unchecked is fail"
                )
        for i, task in enumerate(plan.tasks):
            model.index = i
            model.work = None
            if task.id in done:
                chart.send("skip_task")
                continue
            self._safe_point()
            if task.is_checkpoint:
                pass_checkpoint(self, plan, task, wave, execute or self.execute_here)
                chart.send("skip_task")
                continue
            self.run_task(chart, plan, task, wave, execute or self.execute_here)
        self._verified_must_haves(plan, wave, execute or self.execute_here)
        answered = summary_lines(self, plan)  # the plan's checkpoint answers, in its SUMMARY too
        write_summary(plan, answered, self.checks.summary_lines(plan))
        drop_plan_secret(self, plan)  # a secret never outlives its plan
        track_plan(self.ctx, self.phase, self.dispatcher.context(None))
        self.ctx.workspace.finished(plan.id)  # its worktree's changes committed while others run

    def execute_here(self, work: TaskWork, ctx: DispatchContext) -> Outcome:
        """A task's body on this run's runtime, with the executor's role context."""
        texts = self.dispatcher.role_context(TASK_ROLE, "execute")
        return execute_task(self.ctx.runtime, work, ctx, texts)

    def run_task(
        self, chart: TaskChart, plan: Plan, task: Task, wave: int, execute: ExecuteTask
    ) -> None:
        """The one task protocol: the chart's `begin_task` (resolver → `read_first` →
        `task_call` hooks), the body as an `executor_call`, the `task_result` hooks."""
        model: PlanRun = chart.model
        chart.send("begin_task", task=task)
        work = model.work or task_work(plan, task, self.project)
        work = with_answers(self, plan, work)  # the answers so far, a secret for this call only
        label = f"{task.id} {task.name or ''}".rstrip()
        self._verified_task(plan, task, work, wave, execute, label)
        with self._count_lock:  # plans of a wave finish tasks on several threads
            self.tasks_run += 1
        self._status()
        self.task_hooks("task_result", plan, task, wave, work)
        chart.send("end_task")

    def _verified_task(
        self, plan: Plan, task: Task, work: TaskWork, wave: int, execute: ExecuteTask, label: str
    ) -> None:
        """The task's body, then its checks (docs/loop.md, "Verification")."""
        checks = checks_of(task)
        commands = checks.commands
        if not commands:
            reason = checks.reason or "no <verify>"
            # said before the task is journaled finished, so its commit carries it
            unchecked = partial(self.checks.unchecked, plan.id, task.id, wave, reason)
            outcome = self.executor_call(plan, work, task.id, wave, execute, label, unchecked)
            self.checks.said(plan.id, task.id, outcome)
            if not outcome.ok:
                raise HaltError(f"{plan.path.name}: task {task.id} failed: {outcome.detail}")
            self.progress.line(f"    ! {task.id} is unverified: {reason}")
            return
        before = self.checks.rounds_before(task.id)
        call = VerifiedCall(
            where=f"{plan.path.name}: task {task.id}",
            retries=self.checks.settings.retries,
            rounds_before=before,
            check=partial(self._task_checks, plan, task.id, wave, commands),
            call=lambda w, after: self.checks.said(
                plan.id, task.id, self.executor_call(plan, w, task.id, wave, execute, label, after)
            ),
        )
        try:
            call.run(work, check_first=before > 0)  # resumed after a failed check: look first
        finally:
            self.checks.keep(plan.id, task.id, call.evidence)

    def _recheck_merged(self) -> None:
        """Every plan's checks again on the merged tree (two plans that pass alone can clash)."""
        self.phase = self.phases.load()
        plans = [p for p in self.phase.plans if any(checks_of(t).commands for t in p.tasks)]
        if not plans:
            return
        self.progress.line("  checks again on the merged tree")
        for plan in plans:
            for task in plan.tasks:
                commands = checks_of(task).commands
                if not commands:
                    continue
                dctx = self.dispatcher.context(None, plan_id=plan.id, task_id=task.id)
                runs = self._task_checks(plan, task.id, self.wave or 0, commands, dctx, 0)
                failed = next((r for r in runs if not r.passed), None)
                if failed is not None:
                    log = f"; log: {failed.log}" if failed.log else ""
                    raise HaltError(
                        f"merged tree: plan {plan.id} task {task.id}: check `{failed.command}` "
                        f"failed ({failed.reason}){log}"
                    )

    def _verified_must_haves(self, plan: Plan, wave: int, execute: ExecuteTask) -> None:
        """The plan's must_haves once its tasks are done; a failure re-calls its last task."""
        must = read_must_haves(plan)
        if not must.artifacts and not must.key_links:
            return
        key = f"{plan.id}/must-haves"
        last = next((t for t in reversed(plan.tasks) if not t.is_checkpoint), None)
        call = VerifiedCall(
            where=f"{plan.path.name}: must_haves",
            retries=self.checks.settings.retries if last is not None else 0,
            rounds_before=self.checks.rounds_before(key),
            check=partial(self._must_have_checks, plan, must, key, wave),
            call=lambda w, after: self.executor_call(plan, w, key, wave, execute, key, after),
        )
        work = task_work(plan, last) if last is not None else None
        try:
            call.run(work or task_work(plan, plan.tasks[0]), check_first=True)
        finally:
            self.checks.keep(plan.id, key, call.evidence)

    def _must_have_checks(
        self, plan: Plan, must: MustHaves, key: str, wave: int, dctx: DispatchContext | None,
        attempt: int,
    ) -> list[CheckRun]:  # fmt: skip
        dctx = dctx if dctx is not None else self._task_context(plan, key, wave)
        root = dctx.workdir or self.project
        runs = must_have_runs(must, root, promised_files(plan, self.phase.plans), attempt)
        return self._shown(runs, plan, key, wave, "")

    def _task_checks(
        self,
        plan: Plan,
        key: str,
        wave: int,
        commands: Sequence[str],
        dctx: DispatchContext | None,
        attempt: int,
    ) -> list[CheckRun]:
        dctx = dctx if dctx is not None else self._task_context(plan, key, wave)
        return self._shown(self.checks.run(commands, dctx, key, attempt), plan, key, wave, "check ")

    def _task_context(self, plan: Plan, key: str, wave: int) -> DispatchContext:
        dctx = self.dispatcher.context(None, plan_id=plan.id, task_id=key, wave=wave)
        return self.ctx.workspace.bind(plan.id, dctx)

    def _shown(
        self, runs: list[CheckRun], plan: Plan, key: str, wave: int, label: str
    ) -> list[CheckRun]:
        for run in runs:
            self.checks.journal(run, plan.id, key, wave)
            mark = "✓" if run.passed else "✗"
            self.progress.line(f"    {mark} {label}{run.command} ({run.reason})")
        return runs

    def executor_call(
        self,
        plan: Plan,
        work: TaskWork,
        key: str,
        wave: int,
        execute: ExecuteTask,
        label: str,
        after: After | None = None,
    ) -> Outcome:
        """One executor call of `plan` (a task's body, a checkpoint's fix-up), journaled as
        task `key`; `after(outcome, ctx)` (its checks) runs before it is journaled finished.
        The caller halts on a failed outcome."""
        dctx = self.dispatcher.context(None, plan_id=plan.id, task_id=work.task_id, wave=wave)
        dctx = self.ctx.workspace.bind(plan.id, dctx)
        if plan.has_checkpoints:  # before it is journaled started: a refusal counts no attempt
            dctx = secret_env(self, plan, dctx)
        outcome, again = self._answered_call(plan, work, key, wave, execute, label, dctx)
        if after is not None:  # its checks: a failed one fails the call
            outcome = after(outcome, dctx)
        ms = int(outcome.duration_s * 1000)
        if not outcome.ok:
            self.recorder.task_finished(
                key, status="failed", duration_ms=ms, message=outcome.detail
            )
            return outcome
        self.recorder.task_finished(key, status="done", duration_ms=ms)
        self.progress.line(f"  ✓ {label}{again} {fmt_duration(outcome.duration_s)}")
        return outcome

    def _answered_call(
        self, plan: Plan, work: TaskWork, key: str, wave: int, execute: ExecuteTask, label: str,
        dctx: DispatchContext,
    ) -> tuple[Outcome, str]:  # fmt: skip
        """`execute(work, dctx)`, and again with the user's answer each time the executor ends
        on `BLOCKED: <reason>` (a human-action checkpoint); a call that is no task of the plan
        (a fix-up, the must_haves) fails on BLOCKED instead."""
        task = next((t for t in plan.tasks if t.id == key), None)
        waiting = blocked_pending(self, task) if task is not None else None
        if task is not None and waiting is not None:
            pass_blocked(self, plan, task, waiting, wave)
            work = with_answers(self, plan, work)
        while True:
            attempt = self.recorder.task_started(key, plan_id=plan.id, wave=wave)
            again = f" (attempt {attempt})" if attempt > 1 else ""
            self._status(f"running {label}")
            self.progress.task_started(key, f"{label}{again}")
            try:
                outcome = execute(work, dctx)
            finally:
                self.progress.task_finished(key)
            reason = blocked_reason(outcome.stdout) if outcome.ok else None
            if reason is None:
                return outcome, again
            ms = int(outcome.duration_s * 1000)
            # the attempt ends here; the task is run again once answered
            self.recorder.task_finished(
                key, status="failed", duration_ms=ms, message=f"BLOCKED: {reason}"
            )
            if task is None:
                detail = f"the executor is blocked: {reason}"
                return Outcome(ok=False, stdout=outcome.stdout, detail=detail), again
            cp = blocked_checkpoint(plan, task, reason, closing_words(outcome.stdout))
            self.progress.line(f"  ⏸ {task.id}: the executor is blocked: {reason}")
            pass_blocked(self, plan, task, cp, wave)
            work = with_answers(self, plan, work)

    def task_hooks(
        self,
        event: Literal["task_call", "task_result"],
        plan: Plan,
        task: Task,
        wave: int,
        work: TaskWork | None,
    ) -> None:
        if self.ctx.native is None:
            return
        results = self.ctx.native.task_hooks(
            event, plan, task, wave, work, self.dispatcher.context(None)
        )
        blocked = next((r for r in results if r.status == "block"), None)
        if blocked is not None:
            raise TransitionRefused(blocked)
