"""The process guard (looprail/runtime/guard.py): every child runs under a guard of its own,
a child of this process that is gone with the child. Real processes, real kills (Linux only)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from looprail.runtime.process import run_bounded
from tests.support import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl guard")
PY = sys.executable


def ppid(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_bytes()
    return int(text[text.rindex(b")") + 2 :].split()[1])


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


GUARD_PARENT = (
    "import os; g = os.getppid(); t = open(f'/proc/{g}/stat', 'rb').read(); "
    "print(g, int(t[t.rindex(b')') + 2 :].split()[1]))"
)


def test_a_child_runs_under_a_guard_of_its_own_that_goes_with_it(tmp_path):
    res = run_bounded([PY, "-c", GUARD_PARENT], timeout_s=30, cwd=tmp_path)
    assert res.ok, res
    guard, parent = (int(x) for x in res.stdout.split())
    assert guard != os.getpid() and parent == os.getpid()
    deadline = time.monotonic() + 10
    while alive(guard) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(guard)
    again = run_bounded([PY, "-c", GUARD_PARENT], timeout_s=30)
    assert int(again.stdout.split()[0]) not in (0, guard)  # a new guard for the next child


def test_exit_codes_signals_stdin_cwd_and_env_come_through(tmp_path):
    res = run_bounded(
        [
            PY,
            "-c",
            "import os,sys; print(sys.stdin.read(), os.getcwd(), os.environ['X']); sys.exit(3)",
        ],
        timeout_s=30,
        stdin="hello",
        cwd=tmp_path,
        env={**os.environ, "X": "from-env"},
    )
    assert res.exit_code == 3
    assert res.stdout.split() == ["hello", str(tmp_path.resolve()), "from-env"]
    killed = run_bounded(["sh", "-c", "kill -TERM $$"], timeout_s=30)
    assert killed.exit_code == -signal.SIGTERM
    missing = run_bounded(["no-such-program-here"], timeout_s=30)
    assert missing.exit_code is None and "No such file" in (missing.spawn_error or "")
    nowhere = run_bounded(["true"], timeout_s=30, cwd=tmp_path / "absent")
    assert nowhere.exit_code is None and nowhere.spawn_error


def test_a_timeout_kills_the_whole_tree(tmp_path):
    script = "sleep 60 & echo $! > bg; sleep 60"
    res = run_bounded(["sh", "-c", script], timeout_s=1, cwd=tmp_path)
    assert res.timed_out
    bg = int((tmp_path / "bg").read_text())
    deadline = time.monotonic() + 10
    while alive(bg) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(bg)


def test_the_console_script_runs_each_task_under_a_guard_and_leaves_none_behind(tmp_path):
    """`looprail run` starts each task's child under a guard of its own (its parent is the
    guard, the guard's is looprail); once the run has ended with its fast exit, no guard of
    it is left."""
    import subprocess

    sys.path.insert(0, str(REPO))
    from benchmarks.wave_efficiency import sleep_project

    project = sleep_project(tmp_path, 2, 0)
    record = tmp_path / "guards"
    executor = project / ".looprail" / "agents" / "executor"
    # The task records its guard, the guard's parent and the guard's command line.
    executor.write_text(
        "#!/bin/sh\n"
        "parent=$(awk '{print $4}' \"/proc/$PPID/stat\")\n"
        f"echo \"$PPID $parent $(tr '\\0' ' ' < /proc/$PPID/cmdline)\" >> {record}\n"
    )
    script = Path(sys.executable).with_name("looprail")
    cmd = (
        [str(script)]
        if script.exists()
        else [PY, "-c", "from looprail.cli import console; console()"]
    )
    proc = subprocess.Popen(
        [*cmd, "run", "--phase", "1", "--jobs", "2"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "shipped" in err
    mark = f"guard.py {proc.pid} "
    lines = record.read_text().splitlines()
    assert len(lines) == 2 and all(mark in line for line in lines), lines  # guards of that run
    assert {int(line.split()[1]) for line in lines} == {proc.pid}
    guards = {int(line.split()[0]) for line in lines}
    assert len(guards) == 2  # one guard per child

    def left() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if mark in cmdline(int(entry)) + " " and alive(int(entry)):
                        found.append(int(entry))
                except OSError:
                    continue
        return found

    deadline = time.monotonic() + 10
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left() == []


def test_a_huge_environment_comes_through_the_guard(tmp_path):
    """The guard hands its child the environment it was given, however big."""
    big = {f"BIG{i}": str(i) * 100_000 for i in range(3)}  # one string may be 128 KiB at most
    res = run_bounded(
        ["sh", "-c", 'printf %s "$BIG0$BIG1$BIG2" | wc -c'],
        timeout_s=30,
        env={**os.environ, **big},
        cwd=tmp_path,
    )
    assert res.ok, res
    assert int(res.stdout) == 300_000
