"""Waves on a Dask cluster (`--executor dask://HOST:PORT`, `dask://tls://…`, `dask-local:N`):
each plan runs through the runner's one task protocol on a thread here, only its executor
calls on one Dask worker (docs/scale.md, "Waves on a Dask cluster"; docs/security.md, "The
Dask executor"). `dask[distributed]` is the optional extra `looprail[dask]`."""

from __future__ import annotations

import contextlib
import queue
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from looprail.errors import HaltError, LooprailError
from looprail.machine.checkpoint import may_call
from looprail.machine.dask.cluster import (
    LEAN_WORKERS,
    NO_HTTP_ROUTES,
    LocalSpec,
    check_remote_security,
    local_security,
    parse_executor,
)
from looprail.machine.dask.job import PlanJob, Report, Step, apply_changes, plan_topic, step_name
from looprail.runtime.base import TASK_ROLE, DispatchContext, Outcome, Runtime, TaskWork
from looprail.runtime.executors import Settled, make_executor, run_all, start_threads

if TYPE_CHECKING:
    from pathlib import Path

    from looprail.machine.chart import TaskChart
    from looprail.machine.context import PlanRunner
    from looprail.plans import Plan

# A plan that has not reported for this long is looked at again (a lost wake-up).
_WAKE_S = 1.0
# How long a plan's end waits for its worker to put its project copy back.
_END_WAIT_S = 60.0


@dataclass
class DaskExecutor:
    """Runs the plans of each wave on a Dask cluster; a context manager (connects on enter)."""

    spec: str
    host_tool: str | None = None
    timeouts: dict[str, float] | None = None
    source: str | None = None  # None: the shared filesystem path; "git+URL": clone that remote
    runtime_factory: Callable[[Path], Runtime] | None = None  # picklable; default: LocalRuntime
    client: Any = None
    _cluster: Any = None
    _pool: str = ""  # the name of the worker plugin that keeps each worker's project copies
    _topics: list[str] = field(default_factory=list)  # every wave's plan topics

    def __enter__(self) -> DaskExecutor:
        where = parse_executor(self.spec)
        from looprail.machine.dask.worker import CopyPool  # the dask extra

        if isinstance(where, LocalSpec):
            self._start_local(where)
        else:
            self._connect(where)
        # Every worker, now or joining later, sets up its pool of project copies once.
        self._pool = f"looprail-copies-{uuid.uuid4().hex}"
        self.client.register_plugin(CopyPool(), name=self._pool)
        return self

    def _start_local(self, local: LocalSpec) -> None:
        """Start the LocalCluster (127.0.0.1, mutual TLS with this run's credentials)."""
        import dask  # the dask extra
        from distributed import Client, LocalCluster

        # Workers run processes, not Python compute: no profiler, slower polls (LEAN_WORKERS);
        # with no dashboard asked for, the HTTP server every part starts serves nothing.
        security = local_security()
        quiet = {} if local.dashboard else NO_HTTP_ROUTES
        with dask.config.set({**LEAN_WORKERS, **quiet}):
            self._cluster = LocalCluster(
                n_workers=local.workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                protocol="tls://",
                security=security,
                dashboard_address=local.dashboard,
                silence_logs=40,
            )
        self.client = Client(self._cluster, security=security)

    def _connect(self, address: str) -> None:
        """Connect to the scheduler at `address` with Dask's own security settings."""
        from distributed import Client  # the dask extra

        check_remote_security(self.spec, address)
        try:  # security=None: Dask's own settings (loader, then distributed.comm.tls.*)
            self.client = Client(address, timeout="10s")
        except OSError as exc:
            raise LooprailError(
                f"--executor {self.spec}: cannot reach the scheduler ({exc})"
            ) from None

    def secret_refusal(self) -> str | None:
        """Why a secret answer must not go to this cluster: a scheduler or worker not on TLS."""
        info = self.client.scheduler_info()
        addresses = [self.client.scheduler.address, *info.get("workers", {})]
        plain = next((a for a in addresses if not str(a).startswith("tls://")), None)
        if plain is None:
            return None
        return (
            f"a secret would cross an unencrypted connection ({plain} is plain TCP); "
            "run on a TLS scheduler (dask://tls://HOST:PORT) or dask-local:N, then resume"
        )

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self._drop(self._topics)  # by now every unsubscription has arrived
            self._topics = []
            if self._cluster is None:  # someone else's cluster: leave no copies behind
                with contextlib.suppress(Exception):
                    self.client.unregister_worker_plugin(self._pool)
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self.client = self._cluster = None

    def run_wave(
        self, runner: PlanRunner, wave: int, plans: Sequence[Plan], done: set[str]
    ) -> list[Settled[None]]:
        """Run each plan through `runner.run_plan` here, its executor calls on one Dask worker."""
        if self.client is None:
            raise RuntimeError("DaskExecutor used outside its `with` block")
        if not plans:
            return []
        channel = f"looprail-{uuid.uuid4().hex}"
        # Charts built and threads started before the wave starts, as the local executor does.
        runs = [
            _PlanRun(self, runner, plan, wave, done, channel, runner.plan_chart(plan, wave))
            for plan in plans
        ]
        # Subscribed before anything is submitted (both reach the scheduler in order).
        for run in runs:
            self.client.subscribe_topic(run.topic, run.on_event)
        pool = make_executor(len(runs))
        start_threads(pool, len(runs))
        try:
            return run_all(pool, [run.run for run in runs])
        except BaseException:  # interrupted: no plan thread waits on for its worker
            for run in runs:
                run.abandoned.set()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            self._forget([run.topic for run in runs])

    def submit(self, run: _PlanRun, first: Step) -> Any:
        """Submit the plan's worker side, `first` its first step."""
        from looprail.machine.dask.worker import run_plan_on_worker  # the dask extra

        runner = run.runner
        project = runner.project
        job = PlanJob(
            channel=run.channel,
            source=self.source or str(project),
            phase_number=runner.phase.number,
            phase_dir=runner.phase.dir.relative_to(project).as_posix(),
            flavor=runner.options.flavor,
            plan_id=run.plan.id,
            wave=run.wave,
            first=first,
            host_tool=self.host_tool,
            timeouts=self.timeouts,
            runtime_factory=self.runtime_factory,
            pool=self._pool,
        )
        return self.client.submit(
            run_plan_on_worker, job, pure=False, key=f"looprail-plan-{run.topic}"
        )

    def _forget(self, topics: list[str]) -> None:
        """Drop the wave's subscriptions and the reports the scheduler keeps for it."""
        with contextlib.suppress(Exception):
            for topic in topics:
                self.client.unsubscribe_topic(topic)
        self._topics += topics
        self._drop(topics)

    def _drop(self, topics: list[str]) -> None:
        """On the scheduler: drop each topic's events, and the topic itself once nobody is
        subscribed (an unsubscription still in flight would only make it again, empty)."""
        if not topics:
            return

        # Defined here, not at module level: cloudpickle sends it by value, so a scheduler
        # without looprail installed can run it. There is no public call for this.
        def drop(topics: list[str], dask_scheduler: Any = None) -> None:
            kept = getattr(getattr(dask_scheduler, "_broker", None), "_topics", None)
            if not isinstance(kept, dict):
                return
            for name in topics:
                topic = kept.get(name)
                if topic is None:
                    continue
                topic.events.clear()
                if not topic.subscribers:
                    del kept[name]

        with contextlib.suppress(Exception):
            self.client.run_on_scheduler(drop, topics)


@dataclass
class _PlanRun:
    """The orchestrator's side of one plan: `runner.run_plan` on a thread here, each executor
    call handed to the plan's worker (the first submits the plan, later ones go as a Dask
    `Variable`) and waited for."""

    executor: DaskExecutor
    runner: PlanRunner
    plan: Plan
    wave: int
    done: set[str]
    channel: str
    chart: TaskChart
    inbox: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    abandoned: threading.Event = field(default_factory=threading.Event)
    future: Any = None
    step: int = 0  # the next step to hand over
    waiting: bool = False  # the worker waits for a step (the last one handed over said `more`)

    @property
    def topic(self) -> str:
        return plan_topic(self.channel, self.plan.id)

    def on_event(self, event: tuple[float, Report]) -> None:
        self.inbox.put(event[1])  # on the client's event loop: only hand it over

    def run(self) -> None:
        try:
            self.runner.run_plan(
                self.plan, self.wave, self.done, self.chart, execute=self.execute_task
            )
        except Exception:  # the plan failed: its worker is done or about to be
            self._close(wait=True)
            raise
        except BaseException:  # interrupted: never wait for a worker mid-task
            self._close(wait=False)
            raise
        self._close(wait=True)

    def execute_task(self, work: TaskWork, ctx: DispatchContext) -> Outcome:
        """One executor call of the plan on its worker (a task's body, or a fix-up `T2-fix1`)."""
        more = self.more(work)
        step: Step = {"task": work.task_id, "work": work.model_dump(mode="json"), "more": more}
        step["context"] = list(self.runner.dispatcher.role_context(TASK_ROLE, "execute"))
        if ctx.env:  # a secret checkpoint answer, for this call only (`checkpoint.secret_env`)
            step["env"] = dict(ctx.env)
        handed = self.step
        if self.future is None:
            self.future = self.executor.submit(self, step)
            self.future.add_done_callback(lambda _f: self.inbox.put({"event": "done"}))
        else:
            self._hand_over(step)
        self.step += 1
        self.waiting = more
        outcome = self._outcome(work)
        if handed and "env" in step:  # its variable on the scheduler goes once the call ended
            self._drop_step(handed)
        return outcome

    def _hand_over(self, step: Step) -> None:
        from distributed import Variable  # the dask extra

        name = step_name(self.channel, self.plan.id, self.step)
        Variable(name, client=self.executor.client).set(step)

    def _drop_step(self, n: int) -> None:
        """Delete step `n`'s variable on the scheduler (no rerun reads a finished step)."""
        from distributed import Variable  # the dask extra

        with contextlib.suppress(Exception):
            Variable(step_name(self.channel, self.plan.id, n), client=self.executor.client).delete()

    def more(self, work: TaskWork) -> bool:
        """Whether another call of the plan may follow `work`'s (the worker then waits for it):
        a task not done from `work`'s index on may make one (a fix-up has its checkpoint's)."""
        plan = self.plan
        return any(
            t.index >= work.index
            and t.id.rsplit("/", 1)[-1] != work.task_id
            and t.id not in self.done
            and may_call(plan, t)
            for t in plan.tasks
        )

    def _outcome(self, work: TaskWork) -> Outcome:
        """Wait for the worker's report that `work`'s call finished; merge its change first."""
        short, key = work.task_id, work.key
        while True:
            try:
                msg = self.inbox.get(timeout=_WAKE_S)
            except queue.Empty:
                if self.abandoned.is_set():
                    raise HaltError(f"{self.plan.path.name}: the wave was interrupted") from None
                if self.future is None or not self.future.done():
                    continue
                msg = {"event": "done"}  # a lost wake-up
            if msg.get("event") == "done":
                msg = self._reported(short) or self._failed()
            if msg.get("task") != short:
                continue
            if msg.get("event") == "started" and msg.get("retry"):
                message = "worker lost; running again elsewhere"
                self.runner.recorder.task_started(
                    key, plan_id=self.plan.id, wave=self.wave, message=message
                )
                self.runner.progress.line(f"  ↻ {key}: {message}")
            if msg.get("event") != "finished":
                continue
            outcome = Outcome.model_validate(msg["outcome"])
            if outcome.ok:  # merged before it is journaled done: a crash runs it again
                apply_changes(self.runner.project, msg["changes"])
            for line in msg.get("logs", ()):
                self.runner.progress.line(f"    {line}")
            self.runner.progress.line(f"    {key} ran on {msg['worker']}")
            return outcome

    def _reported(self, short: str) -> Report | None:
        """The plan's future completed: its report of `short`, if any (it may come after)."""
        while True:  # what arrived already comes first
            try:
                msg = self.inbox.get_nowait()
            except queue.Empty:
                break
            if msg.get("task") == short and msg.get("event") == "finished":
                return msg
        for _ts, msg in self.executor.client.get_events(self.topic):
            if msg.get("task") == short and msg.get("event") == "finished":
                return msg
        return None

    def _failed(self) -> NoReturn:
        future, name = self.future, self.plan.path.name
        if future.status == "error" or future.cancelled():
            error = future.exception() if future.status == "error" else "cancelled"
            raise HaltError(
                f"{name}: the plan failed on the cluster: {type(error).__name__}: {error}"
            )
        raise HaltError(f"{name}: the plan ended on the cluster without reporting its task")

    def _close(self, *, wait: bool) -> None:
        """Tell a waiting worker the plan has no more steps; wait for it to put its copy back
        (unless interrupted); drop the plan's variables."""
        if self.future is None:
            return
        with contextlib.suppress(Exception):
            if self.waiting:
                self._hand_over({"end": True})
                self.step += 1
            if wait and not self.abandoned.is_set():
                self.future.result(timeout=_END_WAIT_S)
        for n in range(1, self.step):
            self._drop_step(n)
