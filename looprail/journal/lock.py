"""One run at a time per project: an exclusive `flock` on `<project>/.looprail/run.lock` (the
kernel drops it when its holder dies). The file only names the holder; it is written in place,
never replaced or deleted: the lock lives on the inode."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from looprail.errors import LockedError, LooprailError
from looprail.layout import LOCK_FILE, project_path


class LockInfo(NamedTuple):
    """Who holds (or last held) a project's run lock."""

    pid: int
    run_id: str | None
    started_at: str
    host: str

    def describe(self) -> str:
        run = f"run {self.run_id}" if self.run_id else "no run id yet"
        return f"pid {self.pid} on {self.host}, {run}, started {self.started_at}"


def lock_path(project: str | Path) -> Path:
    """The project's run lock file."""
    return Path(project_path(project, LOCK_FILE))


class RunLock:
    """`with RunLock(project, run_id=...) as lock:` holds the project's run lock for the block;
    `LockedError` (naming the holder) when a live process has it. `previous`: what a holder
    that died without releasing left behind (None after a clean release)."""

    def __init__(self, project: str | Path, *, run_id: str | None = None):
        self.path = lock_path(project)
        self.previous: LockInfo | None = None
        self._run_id = run_id
        self._fd: int | None = None
        self._info: LockInfo | None = None

    def acquire(self) -> RunLock:
        if self._fd is not None:
            raise RuntimeError("this RunLock is already held")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # os.open fds are not inherited by child processes (PEP 446), so a step or agent this
        # run spawns cannot keep the lock alive after the run itself has died.
        fd = _open_lock(self.path, os.O_RDWR | os.O_CREAT)
        try:
            _flock_exclusive(fd)
        except BlockingIOError:
            holder = _read_info(fd)
            os.close(fd)
            raise LockedError(self.path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.previous = _read_info(fd)
        self._info = LockInfo(
            pid=os.getpid(),
            run_id=self._run_id,
            started_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            host=socket.gethostname(),
        )
        self._write(self._info)
        return self

    def set_run_id(self, run_id: str) -> None:
        """Name the run holding the lock (once `Journal.start_run` has created it)."""
        if self._fd is None or self._info is None:
            raise RuntimeError("set_run_id needs the lock to be held")
        self._run_id = run_id
        self._info = self._info._replace(run_id=run_id)
        self._write(self._info)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # a cleanly released lock names nobody
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            self._info = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def _write(self, info: LockInfo) -> None:
        assert self._fd is not None
        payload = (json.dumps(info._asdict()) + "\n").encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, payload, 0)
        os.fsync(self._fd)


def lock_holder(project: str | Path) -> LockInfo | None:
    """Who holds the project's run lock right now, or None. Only probes (a shared, non-blocking
    flock released at once)."""
    path = lock_path(project)
    try:
        fd = _open_lock(path, os.O_RDONLY)
    except (FileNotFoundError, LooprailError):
        return None  # none, or a symlink or special file: no looprail run can hold it
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            # Held, but the holder has not written its record yet: pid 0 says "unknown".
            return _read_info(fd) or LockInfo(pid=0, run_id=None, started_at="?", host="?")
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _open_lock(path: Path, flags: int) -> int:
    """Open the lock file itself, never a symlink's target (a cloned project's link to a user's
    file would be truncated); anything but a regular file is refused with one line."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise LooprailError(
                f"{path}: is a symlink; remove it (the run lock must be a plain file)"
            ) from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise LooprailError(f"{path}: cannot open the run lock ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LooprailError(f"{path}: not a regular file; remove it (it is the run lock)")
    return fd


def _flock_exclusive(fd: int) -> None:
    """Take the lock without waiting for a run, but ride out a `lock_holder` probe, which holds
    a shared lock for microseconds: only a lock still held after ~0.2 s means a live run."""
    for pause in (0.02, 0.05, 0.1):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(pause)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _read_info(fd: int) -> LockInfo | None:
    """The holder record, or None when empty or unreadable (a holder between lock and write)."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError, AttributeError):
        raw = os.pread(fd, 4096, 0)
        if raw.strip():
            value = json.loads(raw)
            return LockInfo(
                pid=int(value["pid"]),
                run_id=value.get("run_id"),
                started_at=str(value.get("started_at", "?")),
                host=str(value.get("host", "?")),
            )
    return None
