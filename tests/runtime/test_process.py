"""`run_bounded`: every process is bounded in time, output and file descriptors, whatever its
children do with the pipes."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from looprail.runtime import pump
from looprail.runtime.process import run_bounded

PY = sys.executable


def test_output_and_exit_code() -> None:
    result = run_bounded(
        [PY, "-c", "import sys; print('out'); print('err', file=sys.stderr)"], timeout_s=60
    )
    assert (result.exit_code, result.stdout, result.stderr) == (0, "out\n", "err\n")


def test_stdin_is_delivered() -> None:
    result = run_bounded(
        [PY, "-c", "import sys; print(sys.stdin.read()[::-1])"], stdin="abc", timeout_s=60
    )
    assert result.stdout == "cba\n"


def test_a_large_stdin_to_a_child_that_reads_it_all() -> None:
    data = "x" * (1 << 20)
    result = run_bounded(
        [PY, "-c", "import sys; print(len(sys.stdin.read()))"], stdin=data, timeout_s=60
    )
    assert result.stdout == f"{len(data)}\n"


def test_a_grandchild_holding_the_pipe_does_not_hold_up_a_finished_child() -> None:
    # sh exits at once; its background sleep keeps stdout open for 60 s.
    started = time.monotonic()
    result = run_bounded(["/bin/sh", "-c", "echo done; sleep 60 &"], timeout_s=120)
    assert time.monotonic() - started < 30
    assert (result.exit_code, result.timed_out, result.stdout) == (0, False, "done\n")


def test_a_timeout_is_not_held_up_by_an_escaped_grandchild() -> None:
    # The grandchild leaves the process group (setsid), so the group kill misses it, and it
    # keeps both pipes open: the call must still end soon after its timeout.
    child = (
        "import os, subprocess, time\nsubprocess.Popen(['setsid', 'sleep', '60'])\ntime.sleep(60)\n"
    )
    started = time.monotonic()
    result = run_bounded([PY, "-c", child], timeout_s=1)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 30


def test_an_argument_with_a_nul_byte_is_a_spawn_error_not_a_crash() -> None:
    result = run_bounded(["echo", "a\0b"], timeout_s=60)
    assert result.exit_code is None and result.spawn_error
    assert "null" in result.spawn_error


def test_no_file_descriptors_or_threads_leak(tmp_path: Path) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    run_bounded(["true"], timeout_s=60)  # warm up lazily opened descriptors
    fds, threads = open_fds(), threading.active_count()
    for _ in range(10):  # any leak is one descriptor or thread per call: 10 show it
        run_bounded(["/bin/sh", "-c", "echo x; echo y >&2"], stdin="in", timeout_s=60)
        run_bounded(["/bin/sh", "-c", "echo x; sleep 60 &"], timeout_s=60)
    assert open_fds() <= fds
    assert threading.active_count() <= threads


def test_an_interrupt_kills_the_process_group(tmp_path: Path, monkeypatch) -> None:
    # Ctrl-C reaches looprail, not the child (it has its own session): the child must not be
    # left running when the interrupt unwinds run_bounded.
    pid_file = tmp_path / "pid"
    calls = {"n": 0}
    real_select = pump.selectors.DefaultSelector.select

    def interrupt_once_running(self, timeout=None):
        if pid_file.exists() and pid_file.read_text().strip():
            calls["n"] += 1
            raise KeyboardInterrupt
        return real_select(self, 0.05)

    monkeypatch.setattr(pump.selectors.DefaultSelector, "select", interrupt_once_running)
    with pytest.raises(KeyboardInterrupt):
        run_bounded(["/bin/sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], timeout_s=120)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{grandchild}/stat").read_text().split()[2] == "Z":
            break  # killed, waiting to be reaped by init
        time.sleep(0.05)
    else:
        pytest.fail("the grandchild outlived the interrupt")


def test_a_childs_pwd_is_its_working_folder(tmp_path: Path) -> None:
    """A program that asks `$PWD` before `getcwd()` (OpenCode) must find the folder it runs in,
    not the folder looprail was started from: PWD follows `cwd`, for every child."""
    here = tmp_path / "work"
    here.mkdir()
    script = "import os; print(os.environ.get('PWD')); print(os.getcwd())"
    env = {**os.environ, "PWD": str(tmp_path)}
    for served in (dict(env), None):  # an explicit env, and looprail's own environment
        done = run_bounded([sys.executable, "-c", script], timeout_s=30, cwd=here, env=served)
        assert done.exit_code == 0, done.stderr
        pwd, cwd = done.stdout.split()
        assert os.path.realpath(pwd) == cwd == os.path.realpath(here)
    alone = run_bounded([sys.executable, "-c", script], timeout_s=30, env=env)
    assert alone.stdout.split()[0] == str(tmp_path)  # no cwd: the environment is left as it is
