"""Ctrl-C or SIGTERM at any moment around a spawn stops every child (issue 12's open race).

A child being started when the stop lands is killed as surely as one already running: a signal
raised inside `Popen` (after the fork), a Ctrl-C while the guard has not yet reported the
child's pid, a `kill_running` from the main thread while a worker thread is mid-spawn, and a
worker that goes on to its next step after the stop. Real processes and real signals throughout:
targeted cases that put the stop exactly in each gap, then seeded loops that send SIGINT/SIGTERM
at random moments to a process that does nothing but spawn, then `looprail run` itself."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from looprail.runtime import process
from looprail.runtime.process import kill_running, run_bounded, stopping_children
from tests.support import REPO

EXAMPLE = REPO / "examples" / "hello-loop"
CAPS = REPO / "examples" / "capabilities"
ROUNDS = int(os.environ.get("LOOPRAIL_RACE_ROUNDS", "8"))

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to tell which children survived"
)


def _record(pids) -> list[str]:
    """A child that writes `pid starttime` (field 22 of /proc/PID/stat), then sleeps 30 s."""
    return [
        "/bin/sh",
        "-c",
        f"echo $$ $(cut -d' ' -f22 /proc/$$/stat) >> '{pids}'; exec sleep 30",
    ]


def _survivors(pids, wait_s: float = 0.0) -> list[int]:
    """The recorded children still alive (same pid and start time, not a zombie). With
    `wait_s`, first give a child that was started but not yet recorded time to record."""
    time.sleep(wait_s)
    alive = []
    text = pids.read_text() if pids.exists() else ""
    for line in text.splitlines():
        pid, start = (int(x) for x in line.split())
        if process.start_ticks(pid, live_only=True) == start:
            alive.append(pid)
    return alive


def _kill(pids) -> None:
    for pid in _survivors(pids):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def main_thread_sigint():
    """SIGINT raises KeyboardInterrupt in this (main) thread during the test."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be set from the main thread")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _patch_start(monkeypatch, after_start) -> None:
    """Run `after_start()` right after the child (its guard) was started, before run_bounded
    has it."""
    real = subprocess.Popen

    def popen(*args, **kwargs):
        proc = real(*args, **kwargs)
        after_start()
        return proc

    monkeypatch.setattr(process.subprocess, "Popen", popen)


# --------------------------------------------------------------------------- each gap, exactly


def test_a_signal_inside_popen_after_the_fork_still_kills_the_child(
    tmp_path, monkeypatch, main_thread_sigint
):
    pids = tmp_path / "pids"
    # lands before Popen has returned to run_bounded
    _patch_start(monkeypatch, lambda: signal.raise_signal(signal.SIGINT))
    try:
        with pytest.raises(KeyboardInterrupt):
            run_bounded(_record(pids), timeout_s=20)
        monkeypatch.undo()
        # Before the fix the child was nobody's: it recorded itself and slept on.
        assert _survivors(pids, wait_s=1.5) == []
    finally:
        _kill(pids)


def test_ctrl_c_before_the_guard_reported_the_child_kills_the_child(
    tmp_path, monkeypatch, main_thread_sigint
):
    if not process.guard_available():
        pytest.skip("no process guard here")
    pids = tmp_path / "pids"

    def wait_for_the_child() -> None:
        deadline = time.monotonic() + 20
        while not pids.exists():  # the guard has started the child, not yet reported it
            assert time.monotonic() < deadline
            time.sleep(0.005)

    def child_started_then_ctrl_c(proc, fd, argv0):
        wait_for_the_child()
        os.close(fd)
        raise KeyboardInterrupt

    monkeypatch.setattr(process, "_read_guard_status", child_started_then_ctrl_c)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_bounded(_record(pids), timeout_s=20)
        # Before the fix the guard's own group was SIGKILLed and its child, in a group of its
        # own, was orphaned alive.
        assert _survivors(pids) == []
        assert time.monotonic() - started < 10
    finally:
        monkeypatch.undo()
        _kill(pids)


def test_kill_running_while_a_worker_is_inside_popen_kills_that_child(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    # the main thread's Ctrl-C path, before this child is known
    _patch_start(monkeypatch, kill_running)
    out: list = []
    worker = threading.Thread(target=lambda: out.append(run_bounded(_record(pids), timeout_s=20)))
    started = time.monotonic()
    worker.start()
    worker.join(timeout=30)
    took = time.monotonic() - started
    monkeypatch.undo()
    try:
        assert not worker.is_alive() and out and not out[0].ok
        assert took < 10, f"the child ran on until its own timeout ({took:.1f}s)"
        assert _survivors(pids, wait_s=0.5) == []
    finally:
        _kill(pids)


def test_no_child_starts_while_children_are_being_stopped(tmp_path):
    pids = tmp_path / "pids"
    with stopping_children():
        result = run_bounded(_record(pids), timeout_s=20)
    assert result.spawn_error and "stopping" in result.spawn_error
    assert not pids.exists()
    assert run_bounded(["true"], timeout_s=20).ok  # and they start again afterwards


# --------------------------------------------------------------------------- random moments

# A process that does nothing but spawn (each child killed at a 50 ms timeout), from the main
# thread or from two worker threads of `interruptible_executor` (what a wave runs on), with
# SIGTERM handled as `looprail run` handles it; it exits 128 + the signal.
DRIVER = """
import sys
from looprail.machine.session.phase import stop_signals
from looprail.runtime.executors import interruptible_executor, run_all
from looprail.runtime.process import run_bounded

mode, pids = sys.argv[1], sys.argv[2]
child = ["/bin/sh", "-c", f"echo $$ $(cut -d' ' -f22 /proc/$$/stat) >> '{pids}'; exec sleep 30"]

def spawn_until_stopped():
    while run_bounded(child, timeout_s=0.05).timed_out:
        pass

try:
    with stop_signals():
        print("ready", flush=True)
        if mode == "main":
            spawn_until_stopped()
        else:
            with interruptible_executor(2) as executor:
                run_all(executor, [spawn_until_stopped, spawn_until_stopped])
except KeyboardInterrupt as exc:
    sys.exit(128 + getattr(exc, "signum", 2))
"""


@pytest.mark.parametrize("mode", ["main", "threads"])
def test_a_stop_signal_at_a_random_moment_of_constant_spawning(tmp_path, mode):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    rng = random.Random(f"spawn-race-{mode}")
    failures = []
    for n in range(ROUNDS):
        pids = tmp_path / f"pids{n}"
        signum = rng.choice([signal.SIGINT, signal.SIGTERM])
        delay = rng.uniform(0.05, 0.6)
        proc = subprocess.Popen(
            [sys.executable, str(driver), mode, str(pids)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            time.sleep(delay)
            os.kill(proc.pid, signum)
            sent = time.monotonic()
            try:
                _, err = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                err = "still running 15 s after the signal"
            took = time.monotonic() - sent
            survivors = _survivors(pids)
            expected = 128 + signum
            if proc.returncode != expected or survivors or took > 8:
                failures.append(
                    f"round {n} {signum.name} at +{delay:.3f}s: exit {proc.returncode} "
                    f"(want {expected}) after {took:.1f}s, survivors {survivors}: {err[-300:]!r}"
                )
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            _kill(pids)
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------- looprail run


def _round(tmp_path, n: int, rng: random.Random) -> str:
    """`looprail run` with two plans in parallel whose executors record themselves and a
    background grandchild; the stop lands at a random moment after the first one started,
    often while the other plan's executor is being started."""
    project = tmp_path / f"hello{n}"
    shutil.copytree(EXAMPLE, project)
    pids = project / "pids"
    record = f"echo $1 $(cut -d' ' -f22 /proc/$1/stat) >> '{pids}'"
    (project / ".looprail" / "agents" / "executor").write_text(
        f"#!/bin/sh\nrecord() {{ {record}; }}\nrecord $$\nsleep 30 &\nrecord $!\nwait\n"
    )
    signum = rng.choice([signal.SIGINT, signal.SIGTERM])
    delay = rng.uniform(0, 0.3)
    argv = ["run", str(project), "--phase", "1", "--capabilities", str(CAPS), "--jobs", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from looprail.cli import main; sys.exit(main())", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not pids.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "no executor ever ran"
            time.sleep(0.01)
        time.sleep(delay)
        os.kill(proc.pid, signum)
        sent = time.monotonic()
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            err = "still running 20 s after the signal"
        took = time.monotonic() - sent
        survivors = _survivors(pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        _kill(pids)
    expected = 128 + signum
    if proc.returncode != expected or survivors or took > 10:
        return (
            f"round {n} {signum.name} at +{delay:.3f}s: exit {proc.returncode} (want "
            f"{expected}) after {took:.1f}s, survivors {survivors}: {err[-300:]!r}"
        )
    return ""


def test_looprail_run_stopped_around_a_parallel_spawn_leaves_nothing_alive(tmp_path):
    rng = random.Random("spawn-race-cli")
    failures = [f for n in range(max(2, ROUNDS // 3)) if (f := _round(tmp_path, n, rng))]
    assert not failures, "\n".join(failures)
