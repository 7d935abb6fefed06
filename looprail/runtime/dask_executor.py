"""Waves on a Dask cluster: each plan of a wave is one `Client.submit(..., pure=False)`.

    looprail run --phase 1 --executor dask://scheduler:8786   # a running dask.distributed
    looprail run --phase 1 --executor dask-local:8            # a LocalCluster of 8 processes

A worker runs the plan's tasks with the chosen runtime (a `LocalRuntime` over its own copy of
the project) and reports each task as it starts and ends through a `distributed.Queue`; each
finished task carries its outcome, its logs and its change (the files it wrote or removed,
plus a unified diff for people). The orchestrator alone journals, applies the changes to the
project, writes the plan's SUMMARY and dispatches hooks: the `execute:task` resolver and the
`task_call` native hooks before the plan is submitted, `task_result` hooks as results arrive.
Hooks never run on workers.

Where a worker's copy comes from:
- a shared filesystem (the default): the worker copies the project folder it is given (the
  orchestrator's path must be the same path on every worker, e.g. an NFS mount);
- a git remote (`source="git+URL"` in `DaskExecutor`): the worker clones it (the plans must be
  committed and pushed first; uncommitted work on the orchestrator is not seen).

A worker lost mid-task: the scheduler runs the plan again on another worker. The plan's
finished tasks are kept on the scheduler (a `distributed.Variable` per plan, with their
changes), so the rerun skips them and starts again at the unfinished task; the journal shows
that task's second attempt with the message "worker lost; running again elsewhere".

`dask[distributed]` is the optional extra `looprail[dask]`.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprail.errors import HaltError, LooprailError, UsageError
from looprail.layout import AGENTS_DIR, CHECKS_DIR, COMMANDS_DIR, LOOPRAIL_DIR, SKILLS_DIR
from looprail.runtime.executors import Settled

INSTALL_HINT = "pip install 'looprail[dask]'"
# Never copied into a worker's copy, never part of a change: looprail's own state.
_SKIP = {LOOPRAIL_DIR, ".git"}
_KEEP_LOOPRAIL = (AGENTS_DIR, SKILLS_DIR, COMMANDS_DIR, CHECKS_DIR)  # executables the runtime runs


def parse_executor(spec: str) -> tuple[str, Any]:
    """`dask://HOST:PORT` → ("address", "tcp://HOST:PORT"); `dask-local:N` → ("local", N).
    UsageError (exit 2) for anything else, or when dask.distributed is not installed."""
    value: str | int
    if spec.startswith("dask://"):
        where = spec.removeprefix("dask://")
        if not where or ":" not in where:
            raise UsageError(f"--executor {spec}: expected dask://HOST:PORT")
        kind, value = "address", f"tcp://{where}"
    elif spec.startswith("dask-local:"):
        count = spec.removeprefix("dask-local:")
        if not count.isdigit() or int(count) < 1:
            raise UsageError(f"--executor {spec}: expected dask-local:N with N >= 1 workers")
        kind, value = "local", int(count)
    else:
        raise UsageError(f"--executor {spec}: expected dask://HOST:PORT or dask-local:N")
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError(
            f"--executor {spec} needs dask.distributed; install it with {INSTALL_HINT}"
        ) from None
    return kind, value


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
    _owned: list[Any] = field(default_factory=list)

    def __enter__(self) -> DaskExecutor:
        kind, value = parse_executor(self.spec)
        from distributed import Client, LocalCluster

        if kind == "local":
            self._cluster = LocalCluster(
                n_workers=value,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=40,
            )
            self.client = Client(self._cluster)
        else:
            try:
                self.client = Client(value, timeout="10s")
            except OSError as exc:
                raise LooprailError(
                    f"--executor {self.spec}: cannot reach the scheduler ({exc})"
                ) from None
        # Each worker imports looprail and builds its models once, now, not in the first wave.
        self.client.run(_warm_up)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self.client = self._cluster = None

    # -- the seam: LoopRunner._run_wave calls this for the wave's pending plans ----------------

    def run_wave(self, runner: Any, wave: int, plans: Sequence[Any], done: set[str]) -> list:
        from distributed import Queue, Variable

        if self.client is None:
            raise RuntimeError("DaskExecutor used outside its `with` block")
        channel = f"looprail-{uuid.uuid4().hex}"
        queue = Queue(channel, client=self.client)
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
            Variable(f"{channel}-{plan.id}", client=self.client).set({"done": [], "started": None})
            jobs[plan.id] = job
            futures[plan.id] = self.client.submit(
                run_plan_on_worker, job, pure=False, key=f"looprail-plan-{plan.id}-{channel}"
            )
        by_id = {p.id: p for p in plans}
        failed: dict[str, Exception] = {}
        open_plans = set(futures)
        while open_plans:
            # Everything reported so far, in order; never a blocking get (a timed-out get is
            # logged as an error by the scheduler).
            items = queue.get(batch=True) if futures else []
            for item in items:
                self._handle(runner, by_id[item["plan"]], wave, item, failed)
            if not items:
                for pid in [p for p in open_plans if futures[p].done()]:
                    open_plans.discard(pid)
                time.sleep(0.05)
        for item in queue.get(batch=True) if futures else []:
            self._handle(runner, by_id[item["plan"]], wave, item, failed)
        for pid, future in futures.items():
            error = future.exception() if future.status == "error" else None
            if error is not None:
                settled[pid] = Settled(
                    error=HaltError(
                        f"{by_id[pid].path.name}: the plan failed on the cluster: "
                        f"{type(error).__name__}: {error}"
                    )
                )
            elif pid in failed:
                settled[pid] = Settled(error=failed[pid])
            else:
                runner._write_summary(by_id[pid])
                settled[pid] = Settled(value=None)
            Variable(f"{channel}-{pid}", client=self.client).delete()
        return [settled[p.id] for p in plans if p.id in settled]

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
        )

    def _handle(self, runner: Any, plan: Any, wave: int, item: dict, failed: dict) -> None:
        from looprail.machine.progress import fmt_duration
        from looprail.machine.record import EventRecord
        from looprail.runtime.base import TaskWork

        key = item["task"]
        task = next(t for t in plan.tasks if t.id == key)
        if item["event"] == "started":
            message = "worker lost; running again elsewhere" if item.get("retry") else ""
            runner.recorder.task_started(key, plan_id=plan.id, wave=wave, message=message)
            if message:
                runner.progress.line(f"  ↻ {key}: {message}")
            return
        if item["event"] == "read_first":
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
            failed.setdefault(
                plan.id,
                HaltError(f"{plan.path.name}: task {key} read_first: missing {', '.join(missing)}"),
            )
            return
        # finished: apply the change first, then journal it as done (a crash in between runs
        # the task again, never loses its change)
        if item["ok"]:
            apply_changes(runner.project, item["changes"])
        ms = int(item["duration_s"] * 1000)
        if not item["ok"]:
            runner.recorder.task_finished(
                key, status="failed", duration_ms=ms, message=item["detail"]
            )
            failed.setdefault(
                plan.id, HaltError(f"{plan.path.name}: task {key} failed: {item['detail']}")
            )
            return
        runner.recorder.task_finished(key, status="done", duration_ms=ms)
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


# -- on the worker --------------------------------------------------------------------------


def run_plan_on_worker(job: PlanJob) -> dict[str, Any]:
    """Run the plan's unfinished tasks in a fresh copy of the project; report every start and
    end through the channel. Runs on a Dask worker."""
    from distributed import Queue, Variable, get_worker

    from looprail.runtime.base import DispatchContext, TaskWork

    worker = get_worker()
    queue = Queue(job.channel)
    state = Variable(f"{job.channel}-{job.plan_id}")
    progress = state.get(timeout=30)
    finished = {rec["task"]: rec for rec in progress["done"]}
    root = Path(tempfile.mkdtemp(prefix="looprail-worker-"))
    try:
        project = _checkout(job.source, root / "project")
        for rec in progress["done"]:  # what earlier attempts finished, in order
            apply_changes(project, rec["changes"])
        runtime = _runtime(job, project)
        for task_key, raw in job.tasks:
            if task_key in finished:
                continue
            work = TaskWork.model_validate(raw)
            retry = progress["started"] == task_key
            progress = {"done": list(finished.values()), "started": task_key}
            state.set(progress)
            queue.put({"plan": job.plan_id, "task": task_key, "event": "started", "retry": retry})
            missing = [
                rel
                for rel in work.read_first
                if not (project / rel).resolve().is_relative_to(project)
                or not (project / rel).exists()
            ]
            if missing:
                queue.put(
                    {
                        "plan": job.plan_id,
                        "task": task_key,
                        "event": "read_first",
                        "missing": missing,
                    }
                )
                return {"plan": job.plan_id, "ok": False}
            before = _snapshot(project)
            ctx = DispatchContext(
                project=project,
                phase_number=job.phase_number,
                phase_dir=project / job.phase_dir,
                flavor=job.flavor,  # type: ignore[arg-type]
                plan_id=job.plan_id,
                task_id=work.task_id,
                wave=job.wave,
            )
            started = time.monotonic()
            outcome = runtime.execute_task(work, ctx)
            changes, patch = _changes(project, before)
            record = {
                "plan": job.plan_id,
                "task": task_key,
                "event": "finished",
                "ok": outcome.ok,
                "detail": outcome.detail,
                "duration_s": outcome.duration_s or time.monotonic() - started,
                "logs": [*_tail(outcome.stdout), *_tail(outcome.stderr)],
                "changes": changes,
                "patch": patch,
                "work": raw,
                "worker": worker.address,
            }
            if outcome.ok:
                finished[task_key] = record
                state.set({"done": list(finished.values()), "started": None})
            queue.put(record)
            if not outcome.ok:
                return {"plan": job.plan_id, "ok": False}
        return {"plan": job.plan_id, "ok": True}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _warm_up() -> None:
    """Import what a plan needs and build the models' validators (runs on every worker)."""
    from looprail.runtime.base import DispatchContext, TaskWork
    from looprail.runtime.local import LocalRuntime, Timeouts

    DispatchContext.model_rebuild()
    TaskWork.model_rebuild()
    Timeouts.model_rebuild()
    assert LocalRuntime is not None


def _runtime(job: PlanJob, project: Path) -> Any:
    if job.runtime_factory is not None:
        return job.runtime_factory(project)
    from looprail.runtime.local import LocalRuntime, Timeouts

    timeouts = Timeouts.model_validate(job.timeouts) if job.timeouts else None
    return LocalRuntime(
        project, host_tool=job.host_tool, timeouts=timeouts, progress=lambda _: None
    )


def _checkout(source: str, target: Path) -> Path:
    if source.startswith("git+"):
        subprocess.run(
            ["git", "clone", "--quiet", "--depth", "1", source.removeprefix("git+"), str(target)],
            check=True,
            capture_output=True,
        )
        return target.resolve()

    def ignore(folder: str, names: list[str]) -> set[str]:
        if Path(folder).resolve() == Path(source).resolve():
            return {n for n in names if n == ".git"}
        if (
            Path(folder).name == LOOPRAIL_DIR
            and Path(folder).parent.resolve() == Path(source).resolve()
        ):
            return {n for n in names if n not in _KEEP_LOOPRAIL}
        return set()

    shutil.copytree(source, target, symlinks=True, ignore=ignore)
    return target.resolve()


def _files(project: Path) -> dict[str, Path]:
    out = {}
    for folder, dirs, names in os.walk(project):
        rel_folder = Path(folder).relative_to(project)
        if rel_folder == Path("."):
            dirs[:] = [d for d in dirs if d not in _SKIP]
        for name in names:
            path = Path(folder) / name
            out[(rel_folder / name).as_posix()] = path
    return out


def _snapshot(project: Path) -> dict[str, str]:
    return {rel: _digest(path) for rel, path in _files(project).items()}


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _changes(project: Path, before: dict[str, str]) -> tuple[dict[str, bytes | None], str]:
    """The files a task wrote (new content) or removed (None), and a unified diff of them."""
    after = _files(project)
    changes: dict[str, bytes | None] = {}
    for rel, path in after.items():
        if before.get(rel) != _digest(path):
            changes[rel] = path.read_bytes()
    for rel in before.keys() - after.keys():
        changes[rel] = None
    patch: list[str] = []
    for rel, data in sorted(changes.items()):
        new = _text(data)
        patch += difflib.unified_diff([], new, f"a/{rel}", f"b/{rel}") if data else []
    return changes, "".join(patch)


def _text(data: bytes | None) -> list[str]:
    try:
        return (data or b"").decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return ["(binary)\n"]


def _tail(text: str, lines: int = 5) -> list[str]:
    return [line for line in (text or "").splitlines()[-lines:] if line.strip()]


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
