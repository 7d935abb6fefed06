"""The worker side of the Dask executor, kept cheap per plan (docs/scale.md, "Waves on a Dask
cluster"): pooled project copies synced by stat, changes found by stat, reports on the plan's
topic, which a rerun of the plan (its worker was lost) reads back to skip the finished tasks."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from distributed import Variable, Worker, get_client, get_worker
from distributed.diagnostics.plugin import WorkerPlugin

from looprail.fsutil import RACY_NS
from looprail.layout import AGENTS_DIR, CHECKS_DIR, COMMANDS_DIR, LOOPRAIL_DIR, SKILLS_DIR
from looprail.machine.dask.job import (
    SKIP,
    PlanDone,
    PlanJob,
    Report,
    Step,
    apply_changes,
    plan_topic,
    step_name,
)
from looprail.runtime.base import DispatchContext, Outcome, Runtime, TaskWork, execute_task
from looprail.runtime.git import git
from looprail.runtime.local import LocalRuntime, Timeouts

_KEEP_LOOPRAIL = (AGENTS_DIR, SKILLS_DIR, COMMANDS_DIR, CHECKS_DIR)  # executables the runtime runs

# A file's identity for "did it change": type and permissions, size, mtime, ctime, inode. ctime
# cannot be set back by a task, so a rewrite to the same size and mtime is still seen.
StatKey = tuple[int, int, int, int, int]
# What a snapshot holds for a file: its stat, or with a digest of its content (racy).
Seen = StatKey | tuple[StatKey, str]

# A pooled copy's manifest: per file, its source's and its copy's stat after the last copy.
Manifest = dict[str, tuple[StatKey, StatKey]]


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


_POOL_PREFIX = "looprail-worker-"
_OWNER_LOCK = ".owner.lock"


class CopyPool(WorkerPlugin):
    """Per worker: project copies to reuse from plan to plan (free ones keyed by source), under
    one temporary folder removed at teardown. A worker killed outright never tears down: each
    holds an exclusive `flock` in its folder while it lives, and every worker that starts or
    closes removes the folders whose lock it can take."""

    root: Path | None = None

    def setup(self, worker: Worker) -> None:
        # State is made here, on the worker (the instance is pickled to every worker).
        self._free: dict[str, list[tuple[Path, Manifest]]] = {}
        self._lock = threading.Lock()
        self._count = 0
        self.root, self._owner_fd = _claim_folder()
        remove_orphaned_folders()
        # the models' validators a plan needs, built once per worker
        DispatchContext.model_rebuild()
        TaskWork.model_rebuild()
        Timeouts.model_rebuild()

    def teardown(self, worker: Worker) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            os.close(self._owner_fd)
            self.root = None
        remove_orphaned_folders()

    def acquire(self, source: str) -> tuple[Path, Manifest]:
        with self._lock:
            free = self._free.get(source)
            if free:
                return free.pop()
            self._count += 1
            assert self.root is not None, "CopyPool used before setup"
            return self.root / f"copy-{self._count}", {}

    def release(self, source: str, path: Path, manifest: Manifest) -> None:
        with self._lock:
            self._free.setdefault(source, []).append((path, manifest))


def _claim_folder() -> tuple[Path, int]:
    """A new pool folder, already locked when it appears under its final name (a sweeper never
    sees it unlocked): made under another prefix, locked, then renamed."""
    staging = Path(tempfile.mkdtemp(prefix="looprail-starting-"))
    fd = os.open(staging / _OWNER_LOCK, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    root = staging.with_name(_POOL_PREFIX + staging.name.removeprefix("looprail-starting-"))
    os.rename(staging, root)
    return root, fd


def remove_orphaned_folders(where: Path | None = None) -> list[Path]:
    """Remove the pool folders (in `where`, else the temp dir) whose owner lock nobody holds."""
    removed = []
    for folder in Path(where or tempfile.gettempdir()).glob(_POOL_PREFIX + "*"):
        try:
            fd = os.open(folder / _OWNER_LOCK, os.O_RDWR | os.O_CLOEXEC)
        except OSError:  # no lock file (not ours, or being removed): leave it
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its worker is alive
            os.close(fd)
            continue
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)
        removed.append(folder)
    return removed


def refresh(source: str, target: Path, manifest: Manifest) -> Manifest:
    """Bring `target` to what a fresh copy (or clone) of `source` would be; the new manifest."""
    if source.startswith("git+"):
        url = source.removeprefix("git+")
        if (target / ".git").is_dir():
            for argv in (
                ["fetch", "--quiet", "--depth", "1", "origin", "HEAD"],
                ["reset", "--quiet", "--hard", "FETCH_HEAD"],
                ["clean", "-ffdxq"],
            ):
                _git_or_raise(argv, target)
        else:
            shutil.rmtree(target, ignore_errors=True)
            _git_or_raise(["clone", "--quiet", "--depth", "1", url, str(target)], target.parent)
        return {}
    return sync_tree(Path(source), target, manifest)


def _git_or_raise(args: list[str], cwd: Path) -> None:
    """git on the confined PATH, hooks off (`runtime.git`); a failure raises, naming it."""
    done = git(args, cwd, timeout_s=_GIT_TIMEOUT_S)
    if done.exit_code != 0:
        why = done.describe_failure()
        last = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(f"git {args[0]} failed ({why}): {last[-1] if last else 'no output'}")


_GIT_TIMEOUT_S = 600.0  # a clone of a big project over a slow link


def _wanted(rel_dir: str, name: str) -> bool:
    """Whether `rel_dir/name` of the project belongs in a worker's copy (no `.git`, and of
    `.looprail/` only the executables' folders)."""
    if rel_dir == "":
        return name != ".git"
    if rel_dir == LOOPRAIL_DIR:
        return name in _KEEP_LOOPRAIL
    return True


def _scan(root: Path, *, wanted: bool = True) -> tuple[dict[str, os.stat_result], list[str]]:
    """Every file, symlink and directory under `root` (with `wanted`: only a copy's)."""
    entries: dict[str, os.stat_result] = {}
    dirs: list[str] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            it = os.scandir(root / rel_dir if rel_dir else root)
        except FileNotFoundError:
            continue
        with it:
            for entry in it:
                if wanted and not _wanted(rel_dir, entry.name):
                    continue
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # gone since listed (e.g. an atomic write's temp)
                    continue
                if stat.S_ISDIR(st.st_mode):
                    dirs.append(rel)
                    stack.append(rel)
                else:
                    entries[rel] = st
    return entries, dirs


def sync_tree(source: Path, target: Path, manifest: Manifest) -> Manifest:
    """Make `target` hold what `shutil.copytree(source, target, symlinks=True)` would (with the
    copy's exclusions), copying a file again unless its source's and its copy's stat are what
    they were right after it was last copied."""
    target.mkdir(parents=True, exist_ok=True)
    # Git's "racy clean" rule: a file changed this close to the sync is not trusted next time.
    racy_after = time.time_ns() - RACY_NS
    src_files, src_dirs = _scan(source)
    dst_files, dst_dirs = _scan(target, wanted=False)
    src_dir_set = set(src_dirs)
    # Remove what the project no longer has (or has as another kind of entry).
    for rel in dst_files:
        if rel not in src_files:
            (target / rel).unlink(missing_ok=True)
    for rel in sorted(dst_dirs, key=len):
        if rel not in src_dir_set and (target / rel).exists():
            shutil.rmtree(target / rel, ignore_errors=True)
    for rel in sorted(src_dirs, key=len):
        where = target / rel
        if where.is_symlink() or (where.exists() and not where.is_dir()):
            where.unlink()
        where.mkdir(exist_ok=True)
    new: Manifest = {}
    for rel, st in src_files.items():
        src_key = stat_key(st)
        have = dst_files.get(rel)
        if have is not None and manifest.get(rel) == (src_key, stat_key(have)):
            new[rel] = manifest[rel]
            continue
        dst = target / rel
        if have is not None and stat.S_ISDIR(have.st_mode):
            shutil.rmtree(dst)
        elif have is not None or dst.is_symlink():
            dst.unlink()
        try:
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(source / rel), dst)
            else:
                shutil.copy2(source / rel, dst, follow_symlinks=False)
        except FileNotFoundError:  # gone since listed (an atomic write's temporary file)
            continue
        if max(st.st_mtime_ns, st.st_ctime_ns) < racy_after:
            new[rel] = (src_key, stat_key(os.lstat(dst)))
    return new


def snapshot(project: Path) -> dict[str, Seen]:
    """What each file a change may name (not `.git/`, not `.looprail/`) is now: its stat, and
    for a racy one (changed within the last moments) a digest of its content."""
    racy_after = time.time_ns() - RACY_NS
    out: dict[str, Seen] = {}
    for folder, dirs, names in os.walk(project):
        rel_folder = os.path.relpath(folder, project)
        if rel_folder == ".":
            dirs[:] = [d for d in dirs if d not in SKIP]
            rel_folder = ""
        for name in names:
            rel = f"{rel_folder}/{name}" if rel_folder else name
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            key = stat_key(st)
            racy = max(st.st_mtime_ns, st.st_ctime_ns) >= racy_after and stat.S_ISREG(st.st_mode)
            out[rel] = (key, _digest(path)) if racy else key
    return out


def _digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _changed(before: Seen | None, now: Seen, path: str) -> bool:
    if before is None:
        return True
    if len(before) == 2:  # (stat, digest): its stat cannot tell, its content does
        return before[1] != _digest(path)
    return before != (now[0] if len(now) == 2 else now)


def changes_since(
    project: Path, before: dict[str, Seen]
) -> tuple[dict[str, bytes | None], dict[str, Seen]]:
    """The files a task wrote (new content) or removed (None), and the snapshot after (the next
    task's "before")."""
    after = snapshot(project)
    changes: dict[str, bytes | None] = {}
    for rel, key in after.items():
        if not _changed(before.get(rel), key, str(project / rel)):
            continue
        try:
            changes[rel] = (project / rel).read_bytes()
        except OSError:  # e.g. a dangling symlink: nothing to carry
            continue
    for rel in before.keys() - after.keys():
        changes[rel] = None
    return changes, after


def _tail(text: str, lines: int = 5) -> list[str]:
    return [line for line in (text or "").splitlines()[-lines:] if line.strip()]


def earlier_attempts(
    events: Iterable[tuple[float, Report]],
) -> tuple[dict[str, Report], str | None, int]:
    """From a plan's events on the scheduler: the tasks earlier attempts finished (their
    records, in order), the task one started and never finished, and how many attempts ran."""
    msgs = [msg for _ts, msg in events]
    if msgs and msgs[0].get("event") != "attempt":
        # The oldest events are gone (a bounded number per topic): better stop than run twice.
        raise RuntimeError("the plan's reports on the scheduler were truncated; cannot resume it")
    finished: dict[str, Report] = {}
    started: str | None = None
    for msg in msgs:
        if msg.get("event") == "started":
            started = msg["task"]
        elif msg.get("event") == "finished" and msg.get("ok"):
            finished[msg["task"]] = msg
            started = None
    return finished, started, sum(1 for m in msgs if m.get("event") == "attempt")


def run_plan_on_worker(job: PlanJob) -> PlanDone:
    """On a Dask worker: run the plan's calls in a pooled copy of the project as the
    orchestrator hands them over, reporting every start and end on the plan's topic."""
    worker = get_worker()
    topic = plan_topic(job.channel, job.plan_id)
    # What earlier attempts of this plan did, asked while the copy syncs.
    asked = asyncio.run_coroutine_threadsafe(
        worker.scheduler.events(topic=topic),
        worker.loop.asyncio_loop,  # type: ignore[attr-defined]  # tornado's AsyncIOLoop
    )
    pool = worker.plugins.get(job.pool) if job.pool else None
    own_pool = None
    if not isinstance(pool, CopyPool):  # submitted without the executor's plugin
        own_pool = pool = CopyPool()
        pool.setup(worker)
    project, manifest = pool.acquire(job.source)
    try:
        manifest = refresh(job.source, project, manifest)
        project = project.resolve()
        finished, started, attempts = earlier_attempts(asked.result(timeout=60))

        def report(msg: Report) -> None:
            worker.log_event(topic, {"plan": job.plan_id, **msg})

        report({"event": "attempt", "n": attempts + 1})
        for rec in finished.values():  # what earlier attempts finished, in order
            apply_changes(project, rec["changes"])
        done = list(finished)
        ok = _run_steps(worker, job, project, done, started, report)
        return {"plan": job.plan_id, "ok": ok, "done": done}
    finally:
        if own_pool is not None:
            own_pool.teardown(worker)
        else:
            pool.release(job.source, project, manifest)


def _run_steps(
    worker: Worker,
    job: PlanJob,
    project: Path,
    done: list[str],
    started: str | None,
    report: Callable[[Report], None],
) -> bool:
    """Run each call the orchestrator hands over until the plan has no more (`done` gets each
    task that finished); False: one failed. `started`: the task an earlier attempt never
    finished (its start is reported as a retry)."""
    runtime = _runtime(job, project)
    before = snapshot(project)
    n = len(done)  # one step per call (a task or a fix-up); one that failed ended the plan
    while True:
        step = job.first if n == 0 else _next_step(worker, job, n)
        if step.get("end"):
            return True
        task_key = step["task"]
        report({"task": task_key, "event": "started", "retry": started == task_key})
        outcome = _execute(runtime, job, project, step)
        changes, before = changes_since(project, before)
        report(
            {
                "task": task_key,
                "event": "finished",
                "ok": outcome.ok,
                # stdout/stderr stay here: their last lines travel as `logs`
                "outcome": outcome.model_dump(mode="json", exclude={"stdout", "stderr"}),
                "logs": [*_tail(outcome.stdout), *_tail(outcome.stderr)],
                "changes": changes,
                "worker": worker.address,
            }
        )
        if not outcome.ok:
            return False
        done.append(task_key)
        if not step.get("more"):
            return True
        n += 1


def _execute(runtime: Runtime, job: PlanJob, project: Path, step: Step) -> Outcome:
    work = TaskWork.model_validate(step["work"])
    ctx = DispatchContext(
        project=project,
        phase_number=job.phase_number,
        phase_dir=project / job.phase_dir,
        flavor=job.flavor,
        plan_id=job.plan_id,
        task_id=work.task_id,
        wave=job.wave,
        env=step.get("env", {}),
    )
    began = time.monotonic()
    outcome = execute_task(runtime, work, ctx, step.get("context", ()))
    if not outcome.duration_s:
        outcome = outcome.model_copy(update={"duration_s": time.monotonic() - began})
    return outcome


_STEP_POLL_S = 2.0


def _next_step(worker: Worker, job: PlanJob, n: int) -> Step:
    """Wait for the orchestrator to hand over step `n`, looking every few seconds whether the
    plan is still wanted."""
    variable = Variable(step_name(job.channel, job.plan_id, n), client=get_client())
    key = worker.get_current_task()
    while True:
        try:
            step: Step = variable.get(timeout=_STEP_POLL_S)
            return step
        except TimeoutError:
            task = worker.state.tasks.get(key)
            if task is None or task.state != "executing":
                raise RuntimeError("the orchestrator no longer waits for this plan") from None


def _runtime(job: PlanJob, project: Path) -> Runtime:
    if job.runtime_factory is not None:
        return job.runtime_factory(project)
    timeouts = Timeouts.model_validate(job.timeouts) if job.timeouts else None
    return LocalRuntime(
        project, host_tool=job.host_tool, timeouts=timeouts, progress=lambda _: None
    )
