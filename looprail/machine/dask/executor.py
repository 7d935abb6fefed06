"""Waves on a Dask cluster: each plan of a wave runs on one Dask worker.

    looprail run --phase 1 --executor dask://scheduler:8786   # a running dask.distributed
    looprail run --phase 1 --executor dask://tls://sched:8786 # the same over TLS
    looprail run --phase 1 --executor dask-local:8            # a LocalCluster of 8 processes

A LocalCluster listens on 127.0.0.1 over mutual TLS with credentials made for the run, with no
HTTP dashboard unless `dask-local:N,dashboard=HOST:PORT` asks for one. A scheduler given by
address can run any function in this process (plans' results are unpickled here): connect only
to one you control. (Parsing the value and the security: `machine.dask.cluster`.)

Every plan runs through the runner's one task protocol (`LoopRunner.run_plan` → `run_task`, a
thread here per plan); only its executor calls run on a worker (`_PlanRun.execute_task`): a
task's body, or the fix-up of a checkpoint answered with issues. The first submits the plan,
each later one is handed to the same worker run once begun here (`dask_job.step_name`); the
worker waits for another while one may follow (`_PlanRun.more`). The worker reports each start
and end on the plan's event topic; a finished call carries its outcome, logs and change (files
written or removed, and a diff). The orchestrator alone journals, merges each change (before
the next call begins), writes the SUMMARY and dispatches hooks. A call's `DispatchContext.env`
(a secret checkpoint answer, for that call only) travels with its step, and only to a cluster
reached over TLS (`DaskExecutor.secret_refusal`).

A worker's copy comes from a shared filesystem (the default: the same path on every worker,
e.g. an NFS mount) or a git remote (`source="git+URL"`: only pushed commits are seen). A worker
lost mid-task: the scheduler runs the plan again elsewhere; the rerun applies the finished
tasks' changes from the kept reports, skips them and starts again at the unfinished task,
journaled as its second attempt ("worker lost; running again elsewhere").

`dask[distributed]` is the optional extra `looprail[dask]`.
"""

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
    """Runs the plans of each wave on a Dask cluster (see the module docstring). Use as a
    context manager: it connects (or starts the LocalCluster) on enter and closes on exit."""

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
        # the dask extra (optional): dask_worker imports distributed at its top
        from looprail.machine.dask.worker import CopyPool

        if isinstance(where, LocalSpec):
            self._start_local(where)
        else:
            self._connect(where)
        # Each worker (and each worker that joins later, or is restarted) sets up its pool of
        # project copies and imports looprail and builds its models once, now.
        self._pool = f"looprail-copies-{uuid.uuid4().hex}"
        self.client.register_plugin(CopyPool(), name=self._pool)
        return self

    def _start_local(self, local: LocalSpec) -> None:
        """Start the LocalCluster (127.0.0.1, mutual TLS with this run's credentials)."""
        # the dask extra (optional): imported only when a Dask executor runs
        import dask
        from distributed import Client, LocalCluster

        # A worker here runs processes, not Python compute: its statistical profiler (a stack
        # sample every 10 ms) and 100 ms memory polls only cost CPU. On a small machine an idle
        # LocalCluster of 8 took 0.28 CPU-s per second with them, 0.08 without. (A cluster
        # given by address keeps its own configuration.)
        security = local_security()
        # The scheduler and every worker start an HTTP server whatever the dashboard setting
        # (health, metrics, `/info` pages naming every task): with no dashboard asked for, it
        # serves nothing.
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
        # the dask extra (optional): imported only when a Dask executor runs
        from distributed import Client

        check_remote_security(self.spec, address)
        try:  # security=None: Dask's own settings (loader, then distributed.comm.tls.*)
            self.client = Client(address, timeout="10s")
        except OSError as exc:
            raise LooprailError(
                f"--executor {self.spec}: cannot reach the scheduler ({exc})"
            ) from None

    def secret_refusal(self) -> str | None:
        """Why a secret checkpoint answer must not go to this cluster (None: it may). Its step
        goes to the scheduler and on to a worker: a LocalCluster is mutual TLS throughout, a
        `dask://tls://` scheduler unless a worker joined it over TCP; `dask://HOST:PORT` is TCP."""
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

    # -- the seam: LoopRunner._run_wave calls this for the wave's pending plans ----------------

    def run_wave(
        self, runner: PlanRunner, wave: int, plans: Sequence[Plan], done: set[str]
    ) -> list[Settled[None]]:
        """Run each plan through `runner.run_plan` (the one task protocol, each plan on a thread
        of its own here), its tasks' bodies on one Dask worker (`_PlanRun.execute_task`)."""
        if self.client is None:
            raise RuntimeError("DaskExecutor used outside its `with` block")
        if not plans:
            return []
        channel = f"looprail-{uuid.uuid4().hex}"
        # Each plan's chart is built, and the plans' threads started, before the wave starts
        # (as the local executor does): not by each thread while the others wait for the GIL.
        runs = [
            _PlanRun(self, runner, plan, wave, done, channel, runner.plan_chart(plan, wave))
            for plan in plans
        ]
        # Subscribe before anything is submitted (both go to the scheduler in order): no report
        # is missed.
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
        # the dask extra (optional): dask_worker imports distributed at its top
        from looprail.machine.dask.worker import run_plan_on_worker

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
    call (`execute_task`: a task's body, a checkpoint's fix-up) handed to the plan's worker and
    waited for. The first call submits the plan with it; each later one is handed over as a
    Dask `Variable` once the orchestrator has begun it (a task: resolver, read_first, task_call
    hooks), after the call before was merged."""

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
        """One executor call of the plan on its worker: a task's body, or a checkpoint's
        fix-up (`checkpoint._fixup`, no task of the plan: `work.task_id` is `T2-fix1`)."""
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
        # the dask extra (optional): imported only when a Dask executor runs
        from distributed import Variable

        name = step_name(self.channel, self.plan.id, self.step)
        Variable(name, client=self.executor.client).set(step)

    def _drop_step(self, n: int) -> None:
        """Delete the variable of step `n` on the scheduler (a rerun never reads a finished
        task's step again)."""
        # the dask extra (optional): imported only when a Dask executor runs
        from distributed import Variable

        with contextlib.suppress(Exception):
            Variable(step_name(self.channel, self.plan.id, n), client=self.executor.client).delete()

    def more(self, work: TaskWork) -> bool:
        """Whether another call of the plan may follow `work`'s (the worker then waits for its
        step): a task not done from `work`'s index on may make one (`checkpoint.may_call`).
        A fix-up has its checkpoint's index: that checkpoint, asked again, may make another."""
        plan = self.plan
        return any(
            t.index >= work.index
            and _short(t.id) != work.task_id
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
        """The plan's future completed: its report of `short` from the scheduler, if any (a
        report may arrive after the future's completion)."""
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


def _short(task_id: str) -> str:
    return task_id.rsplit("/", 1)[-1]  # what TaskWork.task_id holds
