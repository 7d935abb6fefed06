"""Waves on a Dask cluster: each plan of a wave is one `Client.submit(..., pure=False)`.

    looprail run --phase 1 --executor dask://scheduler:8786   # a running dask.distributed
    looprail run --phase 1 --executor dask://tls://sched:8786 # the same over TLS
    looprail run --phase 1 --executor dask-local:8            # a LocalCluster of 8 processes

A LocalCluster listens on 127.0.0.1 over mutual TLS with credentials made for the run
(`local_security`), and has no HTTP dashboard unless `dask-local:N,dashboard=HOST:PORT` asks
for one. A scheduler given by address can run any function in this process (it sends the
results of plans, which are unpickled here): connect only to one you control.

A worker runs the plan's tasks with the chosen runtime (a `LocalRuntime` over its own copy of
the project, see `looprail.runtime.dask_worker`) and reports each task as it starts and ends on
the plan's event topic (`Worker.log_event`); each finished task carries its outcome, its logs
and its change (the files it wrote or removed, plus a unified diff for people). The
orchestrator alone journals, applies the changes to the project, writes the plan's SUMMARY and
dispatches hooks: the `execute:task` resolver and the `task_call` native hooks before the plan
is submitted, `task_result` hooks as results arrive. Hooks never run on workers.

All plans of a wave are submitted at once; reports are pushed to the orchestrator as they
happen (`Client.subscribe_topic`), and each plan is settled as soon as its future completes.

Where a worker's copy comes from:
- a shared filesystem (the default): the worker keeps a copy of the project folder it is given
  (the orchestrator's path must be the same path on every worker, e.g. an NFS mount) and brings
  it up to date for each plan;
- a git remote (`source="git+URL"` in `DaskExecutor`): the worker keeps a clone of it, fetched
  and reset for each plan (the plans must be committed and pushed first; uncommitted work on
  the orchestrator is not seen).

A worker lost mid-task: the scheduler runs the plan again on another worker. The scheduler
keeps the plan's reports (its topic's events), so the rerun applies what the finished tasks
changed to its copy, skips them and starts again at the unfinished task; the journal shows
that task's second attempt with the message "worker lost; running again elsewhere".

`dask[distributed]` is the optional extra `looprail[dask]`.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprail.errors import HaltError, LooprailError, UsageError
from looprail.layout import LOOPRAIL_DIR
from looprail.runtime.executors import Settled

INSTALL_HINT = "pip install 'looprail[dask]'"
# Never copied into a worker's copy, never part of a change: looprail's own state.
_SKIP = {LOOPRAIL_DIR, ".git"}
LEAN_WORKERS = {
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.tick.interval": "200ms",
}
NO_HTTP_ROUTES: dict[str, list[str]] = {
    "distributed.scheduler.http.routes": [],
    "distributed.worker.http.routes": [],
}
# A wave's plans that have not reported for this long are looked at again (a lost wake-up).
_WAKE_S = 1.0


def parse_executor(spec: str) -> tuple[str, Any]:
    """`dask://HOST:PORT` → ("address", "tcp://HOST:PORT"); `dask://tls://HOST:PORT` →
    ("address", "tls://HOST:PORT"); `dask-local:N` → ("local", LocalSpec(N)), with
    `,dashboard=ADDR` to start Dask's HTTP dashboard (off unless asked for). UsageError (exit
    2) for anything else, or when dask.distributed is not installed."""
    value: str | LocalSpec
    if spec.startswith("dask://"):
        where = spec.removeprefix("dask://")
        scheme = "tcp"
        for prefix in ("tls", "tcp"):
            if where.startswith(f"{prefix}://"):
                scheme, where = prefix, where.removeprefix(f"{prefix}://")
        if not where or ":" not in where or "/" in where:
            raise UsageError(
                f"--executor {spec}: expected dask://HOST:PORT or dask://tls://HOST:PORT"
            )
        kind, value = "address", f"{scheme}://{where}"
    elif spec.startswith("dask-local:"):
        count, *options = spec.removeprefix("dask-local:").split(",")
        if not count.isdigit() or int(count) < 1:
            raise UsageError(f"--executor {spec}: expected dask-local:N with N >= 1 workers")
        dashboard = None
        for option in options:
            key, eq, addr = option.partition("=")
            if key != "dashboard" or not eq or ":" not in addr:
                raise UsageError(
                    f"--executor {spec}: unknown option {option!r} "
                    "(known: dashboard=HOST:PORT, e.g. dashboard=127.0.0.1:8787)"
                )
            dashboard = addr
        kind, value = "local", LocalSpec(int(count), dashboard)
    else:
        raise UsageError(f"--executor {spec}: expected dask://HOST:PORT or dask-local:N")
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError(
            f"--executor {spec} needs dask.distributed; install it with {INSTALL_HINT}"
        ) from None
    return kind, value


@dataclass(frozen=True)
class LocalSpec:
    """`dask-local:N[,dashboard=ADDR]`: N worker processes; Dask's HTTP dashboard only when
    an address is given (it shows every task, and nothing guards it)."""

    workers: int
    dashboard: str | None = None


def local_security() -> Any:
    """Per-run credentials for a LocalCluster: a self-signed key and certificate made in
    memory (`Security.temporary()`), mutual TLS required on every connection. They reach
    the workers through the nanny's pipe (Dask writes them only for the moment it loads them,
    into a private 0700 temporary folder), so nobody else on the machine can connect to the
    scheduler or a worker, let alone run a function in looprail's process."""
    from distributed.security import Security

    try:
        return Security.temporary()
    except ImportError:
        raise UsageError(
            f"--executor dask-local needs `cryptography` for its TLS credentials; "
            f"install it with {INSTALL_HINT}"
        ) from None


def _check_remote_security(spec: str, address: str) -> None:
    """A scheduler given by address is reached with Dask's own security settings: its
    `distributed.client.security-loader`, else `distributed.comm.tls.*` (e.g.
    DASK_DISTRIBUTED__COMM__TLS__CA_FILE). A `tls://` address with neither a loader nor a CA
    and a client certificate configured is refused before connecting."""
    import dask

    if not address.startswith("tls://"):
        return
    if dask.config.get("distributed.client.security-loader", default=None):
        return
    # dask.config.get, not the dict: `ca_file` (from the environment) is also `ca-file`
    ca = dask.config.get("distributed.comm.tls.ca-file", default=None)
    cert = dask.config.get("distributed.comm.tls.client.cert", default=None)
    if not ca or not cert:
        raise UsageError(
            f"--executor {spec}: a tls:// scheduler needs Dask's TLS settings: "
            "distributed.comm.tls.ca-file and distributed.comm.tls.client.cert (and .key), "
            "e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE=ca.pem "
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=client.pem "
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=client-key.pem"
        )


def plan_topic(channel: str, plan_id: str) -> str:
    """The event topic a plan's reports go to (one per plan: the scheduler keeps a bounded
    number of events per topic, and a rerun reads its plan's)."""
    return f"{channel}-{plan_id}"


@dataclass
class DaskExecutor:
    """Runs the plans of each wave on a Dask cluster (see the module docstring). Use as a
    context manager: it connects (or starts the LocalCluster) on enter and closes on exit."""

    spec: str
    host_tool: str | None = None
    timeouts: dict[str, float] | None = None
    source: str | None = None  # None: the shared filesystem path; "git+URL": clone that remote
    runtime_factory: Callable[..., Any] | None = None  # picklable; default: a LocalRuntime
    client: Any = None
    _cluster: Any = None
    _pool: str = ""  # the name of the worker plugin that keeps each worker's project copies
    _topics: list[str] = field(default_factory=list)  # every wave's plan topics
    _owned: list[Any] = field(default_factory=list)

    def __enter__(self) -> DaskExecutor:
        kind, value = parse_executor(self.spec)
        from distributed import Client, LocalCluster

        from looprail.runtime.dask_worker import CopyPool

        if kind == "local":
            import dask

            # A worker here runs processes, not Python compute: its statistical profiler (a
            # stack sample every 10 ms) and 100 ms memory polls only cost CPU. On a small
            # machine an idle LocalCluster of 8 took 0.28 CPU-s per second with them, 0.08
            # without. (A cluster given by address keeps its own configuration.)
            security = local_security()
            # The scheduler and every worker start an HTTP server whatever the dashboard
            # setting (health, metrics, `/info` pages naming every task): with no dashboard
            # asked for, it serves nothing.
            quiet = {} if value.dashboard else NO_HTTP_ROUTES
            with dask.config.set({**LEAN_WORKERS, **quiet}):
                self._cluster = LocalCluster(
                    n_workers=value.workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    protocol="tls://",
                    security=security,
                    dashboard_address=value.dashboard,
                    silence_logs=40,
                )
            self.client = Client(self._cluster, security=security)
        else:
            _check_remote_security(self.spec, value)
            try:  # security=None: Dask's own settings (loader, then distributed.comm.tls.*)
                self.client = Client(value, timeout="10s")
            except OSError as exc:
                raise LooprailError(
                    f"--executor {self.spec}: cannot reach the scheduler ({exc})"
                ) from None
        # Each worker (and each worker that joins later, or is restarted) sets up its pool of
        # project copies and imports looprail and builds its models once, now.
        self._pool = f"looprail-copies-{uuid.uuid4().hex}"
        self.client.register_plugin(CopyPool(), name=self._pool)
        return self

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

    def run_wave(self, runner: Any, wave: int, plans: Sequence[Any], done: set[str]) -> list:
        from looprail.runtime.dask_worker import run_plan_on_worker

        if self.client is None:
            raise RuntimeError("DaskExecutor used outside its `with` block")
        channel = f"looprail-{uuid.uuid4().hex}"
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        jobs: dict[str, PlanJob] = {}
        futures: dict[str, Any] = {}  # plan id -> distributed.Future
        settled: dict[str, Settled[None]] = {}
        for plan in plans:
            try:
                job = self._job(runner, plan, wave, done, channel)
            except Exception as exc:  # a resolver failure or a checkpoint: this plan only
                settled[plan.id] = Settled(error=exc)
                continue
            if not job.tasks:
                runner._write_summary(plan)
                settled[plan.id] = Settled(value=None)
                continue
            jobs[plan.id] = job
        # Subscribe before submitting (both go to the scheduler in order): no report is missed.
        for pid in jobs:
            self.client.subscribe_topic(
                plan_topic(channel, pid), lambda event: inbox.put(("event", event[1]))
            )
        for pid, job in jobs.items():
            future = self.client.submit(
                run_plan_on_worker, job, pure=False, key=f"looprail-plan-{pid}-{channel}"
            )
            future.add_done_callback(lambda _f, pid=pid: inbox.put(("done", pid)))
            futures[pid] = future
        by_id = {p.id: p for p in plans}
        failed: dict[str, Exception] = {}
        handled: dict[str, set[str]] = {pid: set() for pid in futures}  # tasks journaled done
        wave_state = _WaveState(runner, wave, by_id, failed, handled)
        try:
            open_plans = set(futures)
            while open_plans:
                try:
                    kind, payload = inbox.get(timeout=_WAKE_S)
                except queue.Empty:
                    kind, payload = "done", None
                if kind == "event":
                    wave_state.handle(payload)
                    continue
                # A plan's future completed (or a look around): what it reported first.
                while True:
                    try:
                        more = inbox.get_nowait()
                    except queue.Empty:
                        break
                    if more[0] == "event":
                        wave_state.handle(more[1])
                for pid in [p for p in open_plans if futures[p].done()]:
                    open_plans.discard(pid)
                    settled[pid] = self._settle(wave_state, jobs[pid], futures[pid], channel)
        finally:
            self._forget(channel, list(futures))
        return [settled[p.id] for p in plans if p.id in settled]

    def _settle(self, state: _WaveState, job: PlanJob, future: Any, channel: str) -> Settled:
        """How a plan ended, once its future completed; its SUMMARY when it succeeded."""
        plan = state.by_id[job.plan_id]
        if future.status == "error" or future.cancelled():
            error = future.exception() if future.status == "error" else "cancelled"
            return Settled(
                error=HaltError(
                    f"{plan.path.name}: the plan failed on the cluster: "
                    f"{type(error).__name__}: {error}"
                )
            )
        if job.plan_id in state.failed:
            return Settled(error=state.failed[job.plan_id])
        missing = [key for key, _ in job.tasks if key not in state.handled[job.plan_id]]
        if missing:  # a report not seen yet: read the plan's reports from the scheduler
            for _ts, msg in self.client.get_events(plan_topic(channel, job.plan_id)):
                if msg.get("task") in missing:
                    state.handle(msg)
            missing = [key for key, _ in job.tasks if key not in state.handled[job.plan_id]]
        if job.plan_id in state.failed:
            return Settled(error=state.failed[job.plan_id])
        if missing:
            return Settled(
                error=HaltError(
                    f"{plan.path.name}: the plan ended on the cluster without reporting "
                    f"task {missing[0]}"
                )
            )
        state.runner._write_summary(plan)
        return Settled(value=None)

    def _forget(self, channel: str, plan_ids: list[str]) -> None:
        """Drop the wave's subscriptions and the reports the scheduler keeps for it."""
        topics = [plan_topic(channel, pid) for pid in plan_ids]
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

    def _job(self, runner: Any, plan: Any, wave: int, done: set[str], channel: str) -> PlanJob:
        """What a worker needs for `plan`: the tasks still to run, resolved on the orchestrator
        (the `execute:task` resolver and `task_call` hooks run here, never on a worker)."""
        tasks = []
        for task in plan.tasks:
            if task.id in done:
                continue
            if task.is_checkpoint:
                runner._checkpoint(plan, task, wave)  # raises CheckpointPause unless approved
                continue
            work = runner._resolve(plan, task, wave)
            runner._task_event("task_call", plan, task, wave, work)
            tasks.append((task.id, work.model_dump(mode="json")))
        project = runner.project
        return PlanJob(
            channel=channel,
            source=self.source or str(project),
            phase_number=runner.phase.number,
            phase_dir=runner.phase.dir.relative_to(project).as_posix(),
            flavor=runner.options.flavor,
            plan_id=plan.id,
            wave=wave,
            tasks=tasks,
            host_tool=self.host_tool,
            timeouts=self.timeouts,
            runtime_factory=self.runtime_factory,
            pool=self._pool,
        )


@dataclass
class _WaveState:
    """The orchestrator's side of one wave: handles each report as it arrives."""

    runner: Any
    wave: int
    by_id: dict[str, Any]
    failed: dict[str, Exception]
    handled: dict[str, set[str]]  # plan id -> its tasks journaled as done
    started: set[tuple[str, str]] = field(default_factory=set)

    def handle(self, item: dict) -> None:
        from looprail.machine.progress import fmt_duration
        from looprail.machine.record import EventRecord
        from looprail.runtime.base import TaskWork

        runner, wave = self.runner, self.wave
        plan = self.by_id.get(item.get("plan", ""))
        event = item.get("event")
        if plan is None or event == "attempt" or item.get("task") in self.handled[plan.id]:
            return  # a task already journaled done is never reported twice
        key = item["task"]
        task = next(t for t in plan.tasks if t.id == key)
        if event == "started":
            message = "worker lost; running again elsewhere" if item.get("retry") else ""
            runner.recorder.task_started(key, plan_id=plan.id, wave=wave, message=message)
            self.started.add((plan.id, key))
            if message:
                runner.progress.line(f"  ↻ {key}: {message}")
            return
        if event == "read_first":
            missing = item["missing"]
            runner.recorder.event(
                EventRecord(
                    kind="read_first",
                    plan_id=plan.id,
                    task_id=key,
                    wave=wave,
                    outcome="missing",
                    message=", ".join(missing),
                )
            )
            self.failed.setdefault(
                plan.id,
                HaltError(f"{plan.path.name}: task {key} read_first: missing {', '.join(missing)}"),
            )
            return
        if (plan.id, key) not in self.started:  # its start was never seen: journal it first
            runner.recorder.task_started(key, plan_id=plan.id, wave=wave)
            self.started.add((plan.id, key))
        # finished: apply the change first, then journal it as done (a crash in between runs
        # the task again, never loses its change)
        if item["ok"]:
            apply_changes(runner.project, item["changes"])
        ms = int(item["duration_s"] * 1000)
        if not item["ok"]:
            runner.recorder.task_finished(
                key, status="failed", duration_ms=ms, message=item["detail"]
            )
            self.failed.setdefault(
                plan.id, HaltError(f"{plan.path.name}: task {key} failed: {item['detail']}")
            )
            return
        runner.recorder.task_finished(key, status="done", duration_ms=ms)
        self.handled[plan.id].add(key)
        with runner._count_lock:
            runner.tasks_run += 1
        for line in item.get("logs", ()):
            runner.progress.line(f"    {line}")
        runner.progress.line(
            f"  ✓ {key} {task.name or ''} {fmt_duration(item['duration_s'])} on {item['worker']}"
        )
        work = TaskWork.model_validate(item["work"])
        runner._task_event("task_result", plan, task, wave, work)


@dataclass(frozen=True)
class PlanJob:
    """One plan for a worker (pickled to it)."""

    channel: str
    source: str
    phase_number: str
    phase_dir: str
    flavor: str
    plan_id: str
    wave: int
    tasks: list[tuple[str, dict[str, Any]]]
    host_tool: str | None = None
    timeouts: dict[str, float] | None = None
    runtime_factory: Callable[..., Any] | None = None
    pool: str = ""  # the worker plugin keeping project copies ("" or absent: a copy per plan)


_apply_lock = threading.Lock()


def apply_changes(project: Path, changes: dict[str, bytes | None]) -> None:
    """Write a task's change into `project` (the orchestrator's merge). Paths are checked to
    stay inside the project."""
    from looprail.fsutil import atomic_write

    root = Path(project).resolve()
    with _apply_lock:
        for rel, data in changes.items():
            target = (root / rel).resolve()
            if not target.is_relative_to(root) or rel.split("/")[0] in _SKIP:
                raise HaltError(f"{rel}: a worker's change points outside the project")
            if data is None:
                target.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, data)
