"""The runner: drives the compiled loop chart for one phase of one project.

Each transition attempt goes: plan-fact guards (pure, cheap: refuse before any effect) → dispatch
the points the transition crosses (hooks run, gates produce verdicts) → `send(event, results,
facts)`, where the chart's guards decide. A refusal leaves the state unchanged and the run halts
naming the gate (capId, message) or the failed fact. Inside a state the runner does the step's
work: the role agent writes the step's artifact unless it already exists; in `execute`, waves
of plans run on an executor, each plan's tasks through a `TaskChart` whose `begin_task` runs the
mandatory `execute:task` resolver and the `read_first` check before the body.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from statemachine.exceptions import TransitionNotAllowed
from statemachine.orderedset import OrderedSet

from looprail.errors import (
    CheckpointPause,
    HaltError,
    LooprailError,
    TaskContentError,
    TransitionRefused,
)
from looprail.errors import StopRequested as _Stop
from looprail.frontmatter import file_frontmatter
from looprail.fsutil import atomic_write, contained_file
from looprail.hooks.task_content import resolve_task_content
from looprail.machine import guards as G
from looprail.machine.chart import TaskChart, compile_loop, state_path
from looprail.machine.dispatch import Dispatcher
from looprail.machine.progress import Progress, fmt_duration, plural
from looprail.machine.record import EventRecord, MemoryRecorder, Recorder
from looprail.machine.resume import phase_snapshot
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec
from looprail.machine.workspace import NullWorkspace
from looprail.plans import Phase, PhaseCache, Plan, Task, WavePlan, compute_waves
from looprail.plans.planfile import unknown_key_warnings
from looprail.plans.waves import halt_blocked, unmet_blocked
from looprail.runtime.base import DispatchContext, Flavor, Outcome, TaskWork
from looprail.runtime.executors import interruptible_executor, run_all, start_threads

if TYPE_CHECKING:
    from looprail.hooks.registry import CompiledRegistry
    from looprail.machine.native import NativeBridge
    from looprail.runtime.base import Runtime

RunStatus = Literal["shipped", "halted", "paused"]
# Where a task's body runs: `Runtime.execute_task` here, or an executor's worker elsewhere.
ExecuteTask = Callable[[TaskWork, DispatchContext], Outcome]


@dataclass
class RunOptions:
    flavor: Flavor = "gsd"
    jobs: int = 1
    autonomous: bool = False
    approvals: frozenset[str] = frozenset()
    host_tool: str | None = None
    approved_earlier: frozenset[str] = frozenset()  # checkpoints approved before a resume
    # Runs a wave's plans elsewhere (`run_wave(runner, wave, plans, done) -> [Settled]`, each
    # plan through `LoopRunner.run_plan`), e.g. a Dask cluster
    # (looprail.machine.dask_executor); None: threads here, `jobs` at a time.
    executor: Any = None


@dataclass
class RunResult:
    status: RunStatus
    state: list[str]
    reason: str | None = None
    refused_by: G.HookResult | None = None
    tasks_run: int = 0
    duration_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    waves_run: int = 0
    hooks_dispatched: int = 0

    @property
    def exit_code(self) -> int:
        return {"shipped": 0, "halted": 1, "paused": 3}[self.status]


@dataclass
class _Ctx:
    """What the task callbacks need (the TaskChart's model)."""

    runner: LoopRunner
    plan: Plan
    wave: int
    tasks: list[Task]
    index: int = 0
    work: TaskWork | None = None

    # TaskChart callbacks -------------------------------------------------------------

    def more_tasks(self, **_: Any) -> bool:
        return self.index + 1 < len(self.tasks)

    def resolve_task_content(self, task: Task, **_: Any) -> None:
        self.work = self.runner._resolve(self.plan, task, self.wave)

    def check_read_first(self, task: Task, **_: Any) -> None:
        self.runner._check_read_first(self.plan, task, self.work, self.wave)

    def task_call_hooks(self, task: Task, **_: Any) -> None:
        self.runner._task_event("task_call", self.plan, task, self.wave, self.work)


class LoopRunner:
    """One run of the loop over one phase. Construct, then `run()`.

    `runtime` is any `Runtime` (LocalRuntime by default in the CLI, ScriptedRuntime in tests);
    `compiled` is the compiled capability registry; `recorder` receives every event (a journal
    makes the run durable and resumable)."""

    def __init__(
        self,
        project: Path,
        phase: str,
        *,
        runtime: Runtime,
        compiled: CompiledRegistry,
        config: dict[str, Any] | None,
        resolvers: Sequence[tuple[str, Any]] = (),
        unloadable_resolvers: Sequence[Any] = (),
        options: RunOptions | None = None,
        recorder: Recorder | None = None,
        progress: Progress | None = None,
        spec: LoopSpec = DEFAULT_LOOP,
        state: Sequence[str] | None = None,
        native: NativeBridge | None = None,
        on_transition: Callable[[list[str]], None] | None = None,
        wave: int | None = None,
        workspace: Any = None,
        phases: PhaseCache | None = None,
    ):
        self.project = Path(project).resolve()
        self.phase_token = phase
        self.runtime = runtime
        self.compiled = compiled
        self.config = config
        self.resolvers = list(resolvers)
        self.unloadable = list(unloadable_resolvers)
        self.options = options or RunOptions()
        self.recorder = recorder or MemoryRecorder()
        self.progress = progress or Progress(quiet=True)
        self.spec = spec
        self.native = native
        self.on_transition = on_transition
        self.chart_class = compile_loop(spec)
        self.machine = self.chart_class()
        if state:
            self._restore(state)
        # The phase stays in memory for the run: each look re-stats, parses only what changed.
        # (`phases`: the caller's, when it already read the phase before the run started.)
        self._phases = phases if phases is not None else PhaseCache(self.project, phase)
        self.phase: Phase = self._phases.load()
        self._waves_of: tuple[Phase, WavePlan] | None = None
        self._task_total: tuple[Phase, int] | None = None
        self._looked: G.PlanFacts | None = None  # the last facts, until anything may have run
        self.dispatcher = Dispatcher(
            compiled=compiled,
            config=config,
            runtime=runtime,
            project=self.project,
            phase_number=self.phase.number,
            phase_dir=self.phase.dir,
            flavor=self.options.flavor,
            host_tool=self.options.host_tool,
            progress=self.progress,
            recorder=self.recorder,
            native=native.point_hooks if native is not None else None,
            native_count=native.point_count if native is not None else None,
        )
        self.tasks_run = 0
        self.waves_run = 0
        self._count_lock = threading.Lock()
        self.warnings: list[str] = []
        self.wave: int | None = wave  # the wave being run (journaled with start_wave)
        # Where each plan works (machine/workspace.py): worktrees for parallel agent plans.
        self.workspace = workspace if workspace is not None else NullWorkspace()
        # Steps whose role was killed mid-work in an earlier process: done again on resume.
        self.redo_steps: frozenset[str] = frozenset()
        self._said: set[str] = set()
        self._warn_plan_keys()

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

    # ------------------------------------------------------------------ state

    def _restore(self, state: Sequence[str]) -> None:
        """Put the chart back in a journaled configuration without running enter callbacks."""
        values = [s for s in state if s]
        if not values:
            return
        unknown = [s for s in values if s not in self.chart_class.states_map]
        if unknown:  # a journal written by another loop (an older looprail, a changed spec)
            raise HaltError(
                f"journaled state {unknown[0]!r} is not a state of this loop "
                f"({', '.join(self.chart_class.states_map)}); start over with --new"
            )
        model = self.machine.model
        setattr(
            model, self.machine.state_field, values[0] if len(values) == 1 else OrderedSet(values)
        )
        self.machine = self.chart_class(model=model)

    @property
    def state(self) -> list[str]:
        return state_path(self.machine)

    def _leaf(self) -> str:
        return self.state[-1]

    # ------------------------------------------------------------------ run

    def run(self) -> RunResult:
        start = time.monotonic()
        self._looked = None
        try:
            if self.native is not None:
                self.native.start(self.dispatcher.context(None))
            while self._leaf() != "shipped":
                self._safe_point()
                self._step()
            status: RunStatus = "shipped"
            reason = None
            refused = None
        except TransitionRefused as exc:
            status, reason, refused = "halted", str(exc), exc.result
        except CheckpointPause as exc:
            status, reason, refused = "paused", str(exc), None
        except _Stop as exc:
            status, reason, refused = exc.status, str(exc), None
        except HaltError as exc:
            status, reason, refused = "halted", str(exc), None
        except TaskContentError as exc:
            status, reason, refused = "halted", f"execute:task resolver failed: {exc}", None
        except LooprailError as exc:
            status, reason, refused = "halted", str(exc), None
        except OSError as exc:  # a file of the project vanished or became unreadable mid-run
            where = f"{exc.filename}: " if exc.filename else ""
            status, reason, refused = "halted", f"{where}{exc.strerror or exc}", None
        finally:
            try:
                self.workspace.close()  # the last wave's worktrees are gone before the run ends
            finally:
                self.progress.close()
        if status != "shipped":
            self.recorder.event(
                EventRecord(
                    kind="halted",
                    point=refused.point if refused else None,
                    cap_id=refused.cap_id if refused else None,
                    outcome=status,
                    message=reason,
                ),
                state=self.state,
            )
        self._native_settled(status, reason)
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
        )

    def _status(self, doing: str | None = None) -> None:
        """The live status line (terminals only): where the loop is and how far along."""
        if not self.progress.live or self.progress.quiet:
            return
        parts = ["/".join(self.state)]
        if self.wave is not None and "execute" in self.state:
            parts.append(f"wave {self.wave}")
        if self._task_total is None or self._task_total[0] is not self.phase:
            total = sum(1 for p in self.phase.plans for t in p.tasks if not t.is_checkpoint)
            self._task_total = (self.phase, total)
        total = self._task_total[1]
        if total:
            count = getattr(self.recorder, "done_count", None)
            done = count() if count is not None else len(self.recorder.done_tasks())
            parts.append(f"{done}/{total} tasks done")
        if doing:
            parts.append(doing)
        self.progress.status(" · ".join(parts))

    def _safe_point(self) -> None:
        """Between steps and tasks: honour an `interrupt`/`shutdown` a native hook asked for."""
        if self.native is not None and self.native.stop is not None:
            status, reason = self.native.stop
            raise _Stop(status, reason)

    def _step(self) -> None:
        leaf = self._leaf()
        if leaf == "idle":
            self._attempt("begin")
        elif leaf == "discuss":
            self._phase_work("discuss", done=self.phase.has_context)
            self._attempt("finish_discuss")
        elif leaf == "plan":
            if not self.phase.plans and self.phase.stray_plans:
                # Planning again would write over work that only sits in the wrong folder.
                raise HaltError(self.phase.warnings[-1])
            self._phase_work("plan", done=bool(self.phase.plans))
            self._attempt("finish_plan")
        elif leaf == "wave_ready":
            waves = self._waves()
            pending = [w for w in waves.waves if w.pending]
            if pending:
                self.wave = pending[0].number
                self._attempt("start_wave", wave=self.wave)
            else:
                self._attempt("finish_execute")
        elif leaf == "wave_running":
            self._run_wave()
            self._attempt("finish_wave", wave=self.wave)
        elif leaf == "waves_done":
            self._attempt("finish_execute")
        elif leaf == "verify":
            # A VERIFICATION.md that did not pass is verified again (gaps may be fixed by now).
            self._phase_work("verify", done=G.verify_done(self.facts()))
            self._attempt("finish_verify")
        elif leaf == "ship":
            self._phase_work("ship", done=False)
            self._attempt("finish_ship")
        else:  # pragma: no cover - the chart has no other states
            raise HaltError(f"unexpected state {leaf!r}")

    # ------------------------------------------------------------------ transitions

    def _waves(self) -> WavePlan:
        """The waves of the phase as it is now: computed once per phase state."""
        if self._waves_of is None or self._waves_of[0] is not self.phase:
            self._waves_of = (self.phase, compute_waves(self.phase.plans, root=self.project))
        return self._waves_of[1]

    def facts(self) -> G.PlanFacts:
        self._looked = self._facts()
        return self._looked

    def _facts(self) -> G.PlanFacts:
        self.phase = self._phases.load()
        status = None
        if self.phase.verification_path is not None:
            fm = file_frontmatter(self.phase.verification_path)
            if isinstance(fm, dict) and fm.get("status") is not None:
                status = str(fm.get("status"))
        waves = self._waves() if self.phase.plans else None
        # Counts and a str, derived here: no validator to build (a run-path cost).
        return G.PlanFacts.model_construct(
            plan_count=len(self.phase.plans),
            waves_total=len(waves.waves) if waves else 0,
            waves_pending=sum(1 for w in waves.waves if w.pending) if waves else 0,
            has_context=self.phase.has_context,
            verification_status=status,
        )

    def attempt(self, event: str, *, wave: int | None = None) -> list[G.HookResult]:
        """One transition attempt, in public: returns the hook results of the attempt, raises
        `TransitionRefused` (with `.result`, the refusing hook) or `HaltError` (a fact guard)
        and then leaves the state unchanged. What a guard test drives."""
        self._looked = None  # a caller may have changed files since: look again
        return self._attempt(event, wave=wave)

    def _attempt(self, event: str, *, wave: int | None = None) -> list[G.HookResult]:
        """One transition attempt (see the module docstring for the order)."""
        source_states = set(self.state)
        candidates = [
            t for t in self.spec.transitions() if t.event == event and t.source in source_states
        ]
        if not candidates:  # pragma: no cover - the runner only sends events it can
            raise HaltError(f"no transition {event!r} from {self.state}")
        # Nothing ran since the last look (e.g. finish_wave → start_wave): no need to look again.
        facts = self._looked or self.facts()
        # A fact guard that refuses every candidate: refuse before any hook has effects.
        fact_refusals = [G.failed_fact_guard(t.guards, facts) for t in candidates]
        if all(fact_refusals):
            raise HaltError(f"{event}: {fact_refusals[0]}")
        results: list[G.HookResult] = []
        for point in candidates[0].points:
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
            reason = G.failed_fact_guard(candidates[0].guards, self.facts()) or "refused"
            raise HaltError(f"{event}: {reason}") from None
        self.recorder.event(
            EventRecord(
                kind="transition",
                wave=wave,
                message=f"{'/'.join(before)} → {'/'.join(self.state)}",
                data={"event": event, "source": before, "target": self.state},
            ),
            state=self.state,
        )
        self.progress.line(f"● {'/'.join(self.state)}")
        self._status()
        if self.on_transition is not None:
            self.on_transition(self.state)
        return results

    # ------------------------------------------------------------------ step work

    def _phase_work(self, step: str, *, done: bool) -> None:
        self._looked = None
        spec = self.spec.step(step)
        if step in self.redo_steps:  # killed mid-work before: its artifacts do not count
            self.redo_steps = self.redo_steps - {step}
            done = False
        if done:
            self.progress.line(f"  {spec.artifact} exists: no {spec.role} work needed")
            return
        self._status(f"{spec.role} at work")
        self.progress.new_stage()
        self._role_event("role_started", step, spec.role)
        outcome = self.runtime.do_phase_work(spec.role, step, self.dispatcher.context(None))
        if not outcome.ok:
            self._role_event("role_finished", step, spec.role, outcome="failed")
            raise HaltError(f"{step}: {spec.role} failed: {outcome.detail}")
        self.progress.line(
            f"  {spec.role} did the {step} work in {fmt_duration(outcome.duration_s)}"
        )
        self.phase = self._phases.load()
        self._warn_plan_keys()
        if self.on_transition is not None:
            # The role wrote artifacts (plans): journal the inputs now, so a crash before the
            # next transition does not look like someone changed them underneath the run.
            self.on_transition(self.state)
        self._role_event("role_finished", step, spec.role, outcome="ok")

    def _role_event(
        self,
        kind: Literal["role_started", "role_finished"],
        step: str,
        role: str,
        outcome: str | None = None,
    ) -> None:
        """Bracket a role's work in the journal (committed at once): a resume finds a role that
        started and never finished, does its work again and sets its partial output aside."""
        data: dict[str, Any] = {"step": step, "role": role}
        if kind == "role_started":
            data["files"] = phase_snapshot(self.phase.dir)
        self.recorder.event(
            EventRecord(kind=kind, outcome=outcome, data=data),
            state=self.state,
        )

    # ------------------------------------------------------------------ waves

    def _run_wave(self) -> None:
        self._looked = None  # plans run: files change
        waves = self._waves()
        if self.wave is None:  # resumed inside a running wave: it is the first unfinished one
            self.wave = next((w.number for w in waves.waves if w.pending), None)
        wave = waves.wave(self.wave) if self.wave is not None else None
        if wave is None:
            raise HaltError(f"wave {self.wave} no longer exists (plans changed?)")
        plans = {p.id: p for p in self.phase.plans}
        blocked = halt_blocked(self.phase.plans)
        waiting = unmet_blocked(self.phase.plans)  # a dependency of an earlier phase unfinished
        # A halted plan is never re-run and what depends on it never runs: the rest of the wave
        # runs, then the loop stops here (the reference's plan-index `runnable`).
        stopped = [
            pid for pid in wave.pending if plans[pid].halted or pid in blocked or pid in waiting
        ]
        pending = [plans[pid] for pid in wave.pending if pid not in stopped]
        jobs = self.options.jobs if wave.parallel_safe else 1
        if not wave.parallel_safe and self.options.jobs > 1:
            self.progress.line(
                f"  wave {wave.number} runs sequentially: plans share "
                + ", ".join(wave.overlap_files)
            )
        jobs = self.workspace.jobs(jobs, len(pending))
        self.workspace.prepare(wave.number, [p.id for p in pending], jobs)
        done = self.recorder.done_tasks()
        with ExitStack() as stack:
            local = None
            charts = None
            if self.options.executor is None:
                # Each plan's task chart is built before the wave starts (it has no effects:
                # its initial state has no enter action), not by the plan's thread while the
                # other plans' threads wait for the GIL to start their processes.
                charts = [self.plan_chart(p, wave.number) for p in pending]
                local = stack.enter_context(interruptible_executor(jobs))
                # Its threads are up before the wave starts: started one per plan as the
                # plans are handed over, each would wait for the one before to be scheduled.
                start_threads(local, min(jobs, len(pending)))
            self.recorder.wave_started(
                wave.number,
                [(t.id, p.id) for p in pending for t in p.tasks if not t.is_checkpoint],
            )
            self.progress.new_stage()
            self.progress.line(
                f"  wave {wave.number}: {plural(len(pending), 'plan')}, {jobs} at a time"
            )
            if local is None:
                assert self.options.executor is not None  # no local pool: the given executor
                settled = self.options.executor.run_wave(self, wave.number, pending, done)
            else:
                assert charts is not None
                settled = run_all(
                    local,
                    [
                        partial(self.run_plan, p, wave.number, done, chart)
                        for p, chart in zip(pending, charts, strict=True)
                    ],
                )
            # Still in the block: the pool's idle threads are joined once the wave is
            # journaled as finished, not before.
            errors = [s.error for s in settled if not s.ok]
            if errors:
                # Siblings were never cancelled; the first failure (in plan order) is the reason.
                pauses = [e for e in errors if isinstance(e, CheckpointPause)]
                raise (
                    next((e for e in errors if not isinstance(e, CheckpointPause)), None)
                    or pauses[0]
                )
            self.workspace.merge(wave.number)  # what finished comes back before any halt
            if stopped:
                raise HaltError(_halted_plans_reason(wave.number, stopped, plans, blocked, waiting))
            self.recorder.event(EventRecord(kind="wave_finished", wave=wave.number, outcome="done"))
            self.workspace.settle(wave.number)  # worktrees removed while the run goes on
            self.waves_run += 1
        if self.native is not None:
            self.native.wave_settled()

    def plan_chart(self, plan: Plan, wave: int) -> TaskChart:
        """A plan's task chart, in its initial state, over a fresh `_Ctx`."""
        return TaskChart(model=_Ctx(self, plan, wave, list(plan.tasks)))

    def run_plan(
        self,
        plan: Plan,
        wave: int,
        done: set[str],
        chart: TaskChart | None = None,
        execute: ExecuteTask | None = None,
    ) -> None:
        """Run a plan's tasks in order, each through `run_task`, then write its SUMMARY. Every
        executor runs a plan this way; `execute` is where a task's body runs (default: this
        runner's runtime, here), `chart` a chart built for the plan by `plan_chart`."""
        chart = chart if chart is not None else self.plan_chart(plan, wave)
        ctx: _Ctx = chart.model
        for i, task in enumerate(ctx.tasks):
            ctx.index = i
            ctx.work = None
            if task.id in done:
                chart.send("skip_task")
                continue
            self._safe_point()
            if task.is_checkpoint:
                self._checkpoint(plan, task, wave)
                chart.send("skip_task")
                continue
            self.run_task(chart, plan, task, wave, execute or self.runtime.execute_task)
        self._write_summary(plan)

    def run_task(
        self, chart: TaskChart, plan: Plan, task: Task, wave: int, execute: ExecuteTask
    ) -> None:
        """The one task protocol, whatever runs the body: the chart's `begin_task` (the
        `execute:task` resolver → `read_first` → `task_call` hooks, each journaled), then
        `task_started`, the body (`execute`), `task_finished`, the `task_result` hooks."""
        ctx: _Ctx = chart.model
        chart.send("begin_task", task=task)
        work = ctx.work or _task_work(plan, task)
        attempt = self.recorder.task_started(task.id, plan_id=plan.id, wave=wave)
        again = f" (attempt {attempt})" if attempt > 1 else ""
        self._status(f"running {task.id} {task.name or ''}".rstrip())
        dctx = self.dispatcher.context(None, plan_id=plan.id, task_id=work.task_id, wave=wave)
        dctx = self.workspace.bind(plan.id, dctx)
        self.progress.task_started(task.id, f"{task.id} {task.name or ''}{again}".rstrip())
        try:
            outcome = execute(work, dctx)
        finally:
            self.progress.task_finished(task.id)
        ms = int(outcome.duration_s * 1000)
        if not outcome.ok:
            self.recorder.task_finished(
                task.id, status="failed", duration_ms=ms, message=outcome.detail
            )
            raise HaltError(f"{plan.path.name}: task {task.id} failed: {outcome.detail}")
        self.recorder.task_finished(task.id, status="done", duration_ms=ms)
        with self._count_lock:  # plans of a wave finish tasks on several threads
            self.tasks_run += 1
        self._status()
        self.progress.line(
            f"  ✓ {task.id} {task.name or ''}{again} {fmt_duration(outcome.duration_s)}"
        )
        self._task_event("task_result", plan, task, wave, work)
        chart.send("end_task")

    def _checkpoint(self, plan: Plan, task: Task, wave: int) -> None:
        approved_by = None
        if task.id in self.options.approvals:
            approved_by = "--approve"
        elif task.id in self.options.approved_earlier:
            approved_by = "approved earlier in this run"
        elif self.options.autonomous and task.gate != "blocking-human":
            approved_by = "--autonomous"
        if approved_by is None:
            raise CheckpointPause(task, plan)
        self.progress.line(f"  ✓ checkpoint {task.id} approved ({approved_by})")
        self.recorder.event(
            EventRecord(
                kind="task_finished",
                task_id=task.id,
                plan_id=plan.id,
                wave=wave,
                outcome="approved",
                message=approved_by,
            )
        )

    def _resolve(self, plan: Plan, task: Task, wave: int) -> TaskWork:
        """The `execute:task` point: mandatory, before read_first, never a fallback."""
        work = _task_work(plan, task)
        if not task.tracker_id:
            return work

        try:
            result = resolve_task_content(
                task.tracker_id, self.resolvers, cwd=self.project, unloadable=self.unloadable
            )
        except TaskContentError as exc:
            self.recorder.event(
                EventRecord(
                    kind="resolver",
                    plan_id=plan.id,
                    task_id=task.id,
                    wave=wave,
                    outcome="failed",
                    message=str(exc),
                    data={"trackerId": task.tracker_id},
                )
            )
            self.progress.line(f"  ✗ execute:task {task.id} [{task.tracker_id}] resolver failed")
            raise
        self.recorder.event(
            EventRecord(
                kind="resolver",
                plan_id=plan.id,
                task_id=task.id,
                wave=wave,
                outcome=result.outcome,
                data={"trackerId": task.tracker_id},
            )
        )
        if result.resolved and result.content is not None:
            c = result.content
            self.progress.line(f"  ⇣ execute:task {task.id} content from {task.tracker_id}")
            return work.model_copy(
                update={
                    "action": c.action,
                    "verify": c.verify,
                    "acceptance_criteria": tuple(c.acceptanceCriteria),
                    "read_first": tuple(c.readFirst),
                    "done": c.done,
                    "resolved_by_tracker": True,
                }
            )
        return work

    def _check_read_first(
        self, plan: Plan, task: Task, work: TaskWork | None, wave: int | None = None
    ) -> None:
        paths = work.read_first if work is not None else tuple(task.read_first)
        missing = []
        for rel in paths:
            # Inside the project once symlinks are followed, and a regular file: the one rule
            # for every file whose text goes into a prompt (fsutil.contained_file).
            if contained_file(self.project, rel) is None:
                missing.append(rel)
        self.recorder.event(
            EventRecord(
                kind="read_first",
                plan_id=plan.id,
                task_id=task.id,
                wave=wave,
                outcome="missing" if missing else "ok",
                message=", ".join(missing) or None,
                data={"paths": list(paths)},
            )
        )
        if missing:
            raise HaltError(
                f"{plan.path.name}: task {task.id} read_first: missing {', '.join(missing)}"
            )

    def _task_event(
        self,
        event: Literal["task_call", "task_result"],
        plan: Plan,
        task: Task,
        wave: int,
        work: TaskWork | None,
    ) -> None:
        if self.native is None:
            return
        results = self.native.task_hooks(
            event, plan, task, wave, work, self.dispatcher.context(None)
        )
        blocked = next((r for r in results if r.status == "block"), None)
        if blocked is not None:
            raise TransitionRefused(blocked)

    def _write_summary(self, plan: Plan) -> None:
        """The durable "plan done" marker, unless the executor already wrote one."""
        target = plan.path.with_name(plan.path.name.replace("-PLAN.md", "-SUMMARY.md"))
        if target.exists():
            return
        lines = [
            "---",
            f"plan: {plan.id}",
            "status: complete",
            f"tasks: {len(plan.tasks)}",
            "---",
            "",
            f"# {plan.id} summary",
            "",
        ]
        if plan.objective_line:
            lines += [plan.objective_line, ""]
        for t in plan.tasks:
            tracker = f" [{t.tracker_id}]" if t.tracker_id else ""
            lines.append(f"- {t.id}: {t.name or t.type}{tracker}")
        try:
            atomic_write(target, "\n".join(lines) + "\n")
        except OSError as exc:  # e.g. the phase folder was removed while the plan ran
            raise HaltError(
                f"{target.name}: cannot write the plan summary ({exc.strerror or exc})"
            ) from None

    def _native_settled(self, status: str, reason: str | None) -> None:
        if self.native is not None:
            self.native.settled(status, reason, self.dispatcher.context(None))


def _halted_plans_reason(
    wave: int,
    stopped: list[str],
    plans: dict[str, Plan],
    blocked: dict[str, list[str]],
    waiting: dict[str, list[str]] | None = None,
) -> str:
    parts = []
    for pid in stopped:
        if waiting and pid in waiting and not plans[pid].halted and pid not in blocked:
            parts.append(f"plan {pid} waits: depends_on {'; '.join(waiting[pid])}")
            continue
        if plans[pid].halted:
            summary = plans[pid].summary_path
            where = summary.name if summary else "its SUMMARY"
            parts.append(f"plan {pid} halted ({where} says status: halted)")
        else:
            parts.append(f"plan {pid} is blocked by halted plan {', '.join(blocked[pid])}")
    return f"wave {wave}: " + "; ".join(parts) + " (resolve the halt, then run again)"


def _task_work(plan: Plan, task: Task) -> TaskWork:
    criteria = tuple(
        line.strip().removeprefix("- ").strip()
        for line in (task.acceptance_criteria or "").splitlines()
        if line.strip()
    )
    return TaskWork(
        plan_id=plan.id,
        task_id=task.id.rsplit("/", 1)[-1],  # the plan id is its own field
        index=task.index,
        name=task.name or "",
        type=task.type,
        files=tuple(task.files),
        read_first=tuple(task.read_first),
        action=task.action or "",
        verify=task.verify or "",
        acceptance_criteria=criteria,
        done=task.done or "",
        tracker_id=task.tracker_id,
        plan_sections=_plan_sections(plan),
    )


# The plan sections an executor is handed beside its task (TaskWork.plan_sections).
_EXECUTOR_SECTIONS = ("interfaces", "threat_model")


def _plan_sections(plan: Plan) -> dict[str, str]:
    texts = {"objective": plan.objective or ""}
    texts |= {key: plan.sections.get(key) or "" for key in _EXECUTOR_SECTIONS}
    return {key: text.strip() for key, text in texts.items() if text.strip()}


OnProgress = Callable[[str], None]
