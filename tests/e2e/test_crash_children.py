"""Nothing a run starts outlives it: a step's background grandchild and a process that escapes on
purpose (double fork + setsid) die when the step ends; SIGKILL of looprail kills the agents it
was running; SIGTERM/SIGHUP stop a run like Ctrl-C (exit 143/129, journaled halted, resumable);
journaled children are reaped on resume only when pid and start time still match."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from looprail.journal import Journal
from looprail.runtime.process import Spawned, reap_spawned, run_bounded, start_ticks
from tests.support import run_cli
from tests.support.loop import demo_phase, plan_md, task_xml
from tests.support.procs import PY, alive, pids_in, start_run, wait_for

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the process guard is Linux-only"
)


# Writes the pid of a background child and of a double-forked, setsid'd escapee, then exits.
ESCAPE = r"""
import os, sys, time
out = sys.argv[1]
if os.fork() == 0:                      # plain background child (same process group)
    time.sleep(300); os._exit(0)
if os.fork() == 0:                      # double fork + setsid: leaves the group and session
    os.setsid()
    if os.fork() == 0:
        with open(out, "a") as fh: fh.write(f"escaped {os.getpid()}\n")
        time.sleep(300); os._exit(0)
    os._exit(0)
time.sleep(0.3)
with open(out, "a") as fh: fh.write("parent done\n")
"""


def test_background_and_escaped_grandchildren_die_when_the_step_ends(tmp_path):
    out = tmp_path / "pids"
    script = tmp_path / "escape.py"
    script.write_text(ESCAPE)
    started = time.monotonic()
    result = run_bounded([PY, str(script), str(out)], timeout_s=30)
    assert result.ok, result
    assert time.monotonic() - started < 10  # not held up by the sleepers' pipes
    escaped = int(out.read_text().split("escaped ")[1].split()[0])
    assert not alive(escaped)
    sleepers = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True)
    assert sleepers.stdout.strip() == ""


def test_the_childs_exit_status_passes_through_the_guard(tmp_path):
    assert run_bounded(["/bin/sh", "-c", "exit 7"], timeout_s=10).exit_code == 7
    assert run_bounded(["/bin/sh", "-c", "kill -TERM $$"], timeout_s=10).exit_code == -15
    missing = run_bounded([str(tmp_path / "nope")], timeout_s=10)
    assert missing.spawn_error == "No such file or directory"
    timed = run_bounded(["/bin/sh", "-c", "sleep 30 & sleep 30"], timeout_s=0.5)
    assert timed.timed_out and timed.duration_s < 5


def test_reap_kills_only_a_process_whose_start_time_matches(tmp_path):
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        start = start_ticks(proc.pid)
        assert start is not None
        wrong = Spawned(pid=proc.pid, start=start + 1, guard_pid=0, guard_start=0)
        assert reap_spawned(wrong) == []  # a reused pid is never killed
        assert proc.poll() is None
        assert reap_spawned(Spawned(pid=proc.pid, start=start, guard_pid=0, guard_start=0)) == [
            proc.pid
        ]
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- through `looprail run` -------------------------------------------------------------------


def project_with_slow_executor(root: Path) -> Path:
    project, phase = demo_phase(root)
    (phase / "01-01-PLAN.md").write_text(
        plan_md(
            "01",
            files=["out/a"],
            tasks=[task_xml("a1", files=["out/a1"]), task_xml("a2", files=["out/a2"])],
        )
    )
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    executor = agents / "executor"
    executor.write_text(
        f"#!{PY}\n"
        + r"""
import json, os, sys, time
from pathlib import Path
root = Path(os.environ["LOOPRAIL_PROJECT"])
req = json.load(sys.stdin)
key = req["task"]["taskId"]
with open(root / "pids.log", "a") as fh:
    fh.write(f"{os.getpid()}\n")
if os.fork() == 0:  # a background helper that would keep writing into the project
    with open(root / "pids.log", "a") as fh:
        fh.write(f"{os.getpid()}\n")
    time.sleep(300)
    os._exit(0)
hold = root / ".hold" / key
while hold.exists():
    (root / "reached").write_text(key)
    time.sleep(0.02)
out = root / "out" / key
out.parent.mkdir(exist_ok=True)
out.write_text("ok\n")
"""
    )
    executor.chmod(0o755)
    for role, body in (
        (
            "verifier",
            'printf -- "---\\nstatus: passed\\n---\\n" > "$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md"\n',
        ),
        ("orchestrator", "exit 0\n"),
    ):
        (agents / role).write_text("#!/bin/sh\n" + body)
        (agents / role).chmod(0o755)
    (project / ".hold").mkdir()
    (project / ".hold" / "T2").write_text("")
    return project


def start(project: Path) -> subprocess.Popen:
    return start_run(project)


def pids(project: Path) -> list[int]:
    return pids_in(project / "pids.log")


@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_stop_the_run_like_ctrl_c(tmp_path, signum, code):
    project = project_with_slow_executor(tmp_path)
    proc = start(project)
    wait_for(lambda: (project / "reached").exists(), timeout=20)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "interrupted" in err
    assert not any(alive(p) for p in pids(project))
    with Journal.open(project, create=False) as jr:
        run = jr.latest_run()
        assert run is not None and run.status == "halted"
        assert run.halt_reason == f"interrupted ({signal.Signals(signum).name})"
    (project / ".hold" / "T2").unlink()
    again = run_cli("run", str(project), "--phase", "1")
    assert again.returncode == 0, again.stderr
    assert "resuming run" in again.stdout + again.stderr
    assert not any(alive(p) for p in pids(project))


def test_sigkill_of_looprail_kills_its_agents_and_their_children(tmp_path):
    project = project_with_slow_executor(tmp_path)
    proc = start(project)
    wait_for(lambda: (project / "reached").exists(), timeout=20)
    running = pids(project)
    assert any(alive(p) for p in running)
    proc.kill()
    proc.wait(timeout=30)
    wait_for(lambda: not any(alive(p) for p in running), timeout=10)
    # Nothing keeps writing: the held task never finishes behind the dead run's back.
    time.sleep(0.3)
    assert not (project / "out" / "T2").exists()
    (project / ".hold" / "T2").unlink()
    again = run_cli("run", str(project), "--phase", "1")
    assert again.returncode == 0, again.stderr
    assert (project / "out" / "T2").exists()
    assert not any(alive(p) for p in pids(project))


def test_a_resume_reaps_a_journaled_child_that_is_still_running(tmp_path):
    """The backstop behind PDEATHSIG: a journaled child that somehow survived is killed on
    resume, but only when pid and start time match."""
    project = project_with_slow_executor(tmp_path)
    proc = start(project)
    wait_for(lambda: (project / "reached").exists(), timeout=20)
    proc.kill()
    proc.wait(timeout=30)
    survivor = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        # Journal the survivor as a child of the dead run (as the run would have), and the
        # stranger with a wrong start time (a pid reused by an unrelated process).
        with Journal.open(project, create=False) as jr:
            run_id = jr.latest_run().id
            from looprail.journal import EventRecord

            for p, ticks in (
                (survivor.pid, start_ticks(survivor.pid)),
                (stranger.pid, (start_ticks(stranger.pid) or 0) - 1),
            ):
                data = Spawned(pid=p, start=ticks, guard_pid=0, guard_start=0).as_data()
                jr.record(run_id, EventRecord(kind="process", data=data))
        (project / ".hold" / "T2").unlink()
        again = run_cli("run", str(project), "--phase", "1")
        assert again.returncode == 0, again.stderr
        said = next(
            line
            for line in (again.stdout + again.stderr).splitlines()
            if "left running by the interrupted run" in line
        )
        # (On a loaded machine a guard of the killed run may still be cleaning up: it is
        # stopped too. The stranger never is.)
        listed = said.split(": ", 1)[1].split(", ")
        assert str(survivor.pid) in listed and str(stranger.pid) not in listed
        assert survivor.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None
    finally:
        for p in (survivor, stranger):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_looprail_no_guard_runs_children_directly(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPRAIL_NO_GUARD", "1")
    res = run_bounded([PY, "-c", "import os; print(os.getppid())"], timeout_s=10)
    assert res.ok and int(res.stdout) == os.getpid()
