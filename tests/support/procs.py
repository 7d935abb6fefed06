"""Real processes for the crash, kill and signal tests: `looprail` started as its own process
(to be killed, signalled or raced), polling for a condition, and whether a pid still lives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

PY = sys.executable
# `looprail` in a process of its own, the way the console script runs main().
LOOPRAIL = [PY, "-c", "import sys; from looprail.cli import main; sys.exit(main())"]


def start_looprail(*args: str, new_session: bool = False) -> subprocess.Popen:
    """Start `looprail ARGS…` with stdout and stderr piped (text); `new_session` puts it in a
    process group of its own, for `killpg`."""
    return subprocess.Popen(
        [*LOOPRAIL, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


def start_run(
    project: Path,
    *extra: str,
    caps: Path | None = None,
    jobs: int | None = None,
    new_session: bool = False,
) -> subprocess.Popen:
    """Start `looprail run PROJECT --phase 1 [--capabilities CAPS] [--jobs N] EXTRA…`."""
    args = ["run", str(project), "--phase", "1"]
    if caps is not None:
        args += ["--capabilities", str(caps)]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    return start_looprail(*args, *extra, new_session=new_session)


def completed(proc: subprocess.Popen, timeout: float = 120) -> subprocess.CompletedProcess:
    """Wait for a started process and return it as `subprocess.run` would."""
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def killpg(proc: subprocess.Popen) -> None:
    """SIGKILL a process started with `new_session=True` and everything in its group."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def wait_for(cond: Callable[[], object], timeout: float = 30.0) -> None:
    """Poll `cond` every 20 ms until it holds; fail the test after `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie or a dead pid does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def pids_in(path: Path, *, missing_ok: bool = False) -> list[int]:
    """The pids a test's agents logged, one a line (with `missing_ok`, none when the log is not
    there yet; otherwise a missing log fails the test)."""
    if missing_ok and not path.exists():
        return []
    return [int(x) for x in path.read_text().split()]


# The prelude of an agent script that a kill test holds: `append` a line durably to a project
# file, `hold(name)` while `.hold/<name>` exists (after writing `.reached/<name>`, so the test
# knows the moment it kills at), and the agent's pid logged. Needs `os`, `time` and `root`.
HOLDING = r"""
def append(name, text):
    with open(root / name, "a") as fh:
        fh.write(text + "\n")
        fh.flush()
        os.fsync(fh.fileno())
def hold(name):
    if (root / ".hold" / name).exists():
        (root / ".reached").mkdir(exist_ok=True)
        tmp = root / ".reached" / (name + ".tmp")
        tmp.write_text(str(os.getpid()))
        tmp.rename(root / ".reached" / name)
        while (root / ".hold" / name).exists():
            time.sleep(0.02)
append("pids.log", str(os.getpid()))
"""
