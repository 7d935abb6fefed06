"""One run at a time: a real second process holds the lock, is refused to others by pid, and
its lock is taken over once it has been SIGKILLed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from looprail.errors import LooprailError
from looprail.journal import LockedError, RunLock, lock_holder, lock_path
from looprail.runtime.process import ProcessResult, run_bounded

HOLDER = """
import os, sys, threading, time
from pathlib import Path
from looprail.journal import RunLock
from looprail.runtime.process import run_bounded

project, ready, child_pid_file = sys.argv[1:4]
lock = RunLock(project, run_id="RUN-HOLDER").acquire()
if child_pid_file != "-":
    # A child of the run (a step, an agent) must not inherit the lock. Unguarded, so that it
    # outlives its parent here (a guarded child dies with it: tests/e2e/test_crash_children.py).
    os.environ["LOOPRAIL_NO_GUARD"] = "1"
    child = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    threading.Thread(
        target=run_bounded, args=([sys.executable, "-c", child, child_pid_file],),
        kwargs={"timeout_s": 90}, daemon=True,
    ).start()
    while not os.path.exists(child_pid_file) or not open(child_pid_file).read():
        time.sleep(0.05)
Path(ready).write_text(str(os.getpid()))
time.sleep(120)
"""


class Holder:
    """A separate python process holding the project's lock until killed."""

    def __init__(self, project: Path, tmp: Path, *, with_child: bool = False):
        self.ready = tmp / "ready"
        self.child_pid_file = tmp / "child.pid"
        self.result: list[ProcessResult] = []
        argv = [
            sys.executable,
            "-c",
            HOLDER,
            str(project),
            str(self.ready),
            str(self.child_pid_file) if with_child else "-",
        ]
        self.thread = threading.Thread(
            target=lambda: self.result.append(run_bounded(argv, timeout_s=150)), daemon=True
        )

    def start(self) -> int:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not (self.ready.exists() and self.ready.read_text()):
            assert self.thread.is_alive() or not self.result, self.result
            assert time.monotonic() < deadline, "the holder never took the lock"
            time.sleep(0.05)
        return int(self.ready.read_text())

    def kill(self, pid: int) -> ProcessResult:
        os.kill(pid, signal.SIGKILL)
        self.thread.join(timeout=60)
        assert self.result, "the holder did not exit after SIGKILL"
        return self.result[0]


def test_a_live_holder_is_refused_by_pid_and_a_killed_one_is_taken_over(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    holder = Holder(project, tmp_path)
    pid = holder.start()
    try:
        with pytest.raises(LockedError) as exc:
            RunLock(project).acquire()
        message = str(exc.value)
        assert f"pid {pid}" in message and "run RUN-HOLDER" in message and "started " in message
        assert "\n" not in message
        assert exc.value.holder is not None and exc.value.holder.pid == pid
        seen = lock_holder(project)
        assert seen is not None and (seen.pid, seen.run_id) == (pid, "RUN-HOLDER")
    finally:
        result = holder.kill(pid)
    assert result.exit_code == -signal.SIGKILL

    # The kernel dropped the dead process's flock: acquiring just works, stale content replaced.
    assert lock_holder(project) is None
    with RunLock(project, run_id="RUN-NEW") as lock:
        assert lock.previous is not None and lock.previous.pid == pid
        written = json.loads(lock_path(project).read_text())
        assert written["pid"] == os.getpid() and written["run_id"] == "RUN-NEW"
        assert set(written) == {"pid", "run_id", "started_at", "host"}


def test_a_child_of_the_holder_does_not_keep_the_lock_alive(tmp_path, monkeypatch):
    # Unguarded: a guard would (rightly) kill the holder's child together with the holder.
    monkeypatch.setenv("LOOPRAIL_NO_GUARD", "1")
    project = tmp_path / "project"
    project.mkdir()
    holder = Holder(project, tmp_path, with_child=True)
    pid = holder.start()
    child_pid = int(holder.child_pid_file.read_text())
    try:
        holder.kill(pid)
        os.kill(child_pid, 0)  # the child outlived its parent ...
        with RunLock(project) as lock:  # ... and the lock is free all the same
            assert lock.previous is not None and lock.previous.pid == pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child_pid, signal.SIGKILL)


def test_a_second_lock_in_the_same_process_is_refused(tmp_path):
    with RunLock(tmp_path) as first:
        first.set_run_id("RUN-1")
        with pytest.raises(LockedError, match=rf"pid {os.getpid()} on .*, run RUN-1, started "):
            RunLock(tmp_path).acquire()
        holder = lock_holder(tmp_path)
        assert holder is not None and holder.run_id == "RUN-1"
    assert lock_holder(tmp_path) is None


def test_a_clean_release_leaves_no_previous_holder(tmp_path):
    with RunLock(tmp_path, run_id="A"):
        pass
    assert lock_path(tmp_path).read_text() == ""
    with RunLock(tmp_path, run_id="B") as lock:
        assert lock.previous is None
        holder = lock_holder(tmp_path)
        assert holder is not None and holder.run_id == "B"
    assert lock_holder(tmp_path) is None


def test_no_lock_file_means_no_holder(tmp_path):
    assert lock_holder(tmp_path) is None


def test_a_symlinked_lock_file_is_refused_and_its_target_left_alone(tmp_path):
    # A cloned project can carry `.looprail/run.lock` as a symlink: taking the lock must never
    # truncate or write the file it points at.
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    project = tmp_path / "p"
    (project / ".looprail").mkdir(parents=True)
    lock_path(project).symlink_to(victim)
    with pytest.raises(LooprailError, match=r"run\.lock: .*symlink"):
        RunLock(project).acquire()
    assert victim.read_text() == "precious\n"
    assert lock_holder(project) is None
    assert victim.read_text() == "precious\n"


def test_a_lock_path_that_is_not_a_regular_file_is_a_one_line_error(tmp_path):
    project = tmp_path / "p"
    (project / ".looprail").mkdir(parents=True)
    os.mkfifo(lock_path(project))
    with pytest.raises(LooprailError, match=r"run\.lock: not a regular file"):
        RunLock(project).acquire()
    assert lock_holder(project) is None
