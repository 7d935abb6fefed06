"""The project loop end to end: `looprail run --all` ships a three-phase project (local runtime,
deterministic agent scripts that write the real artifacts), a real SIGKILL in phase 2 (held at
a marker the agent waits on, never raced) is resumed by `run --all` again without re-running
phase 1 or a finished task, and `looprail resume` goes on with the phases after the run it
resumes."""

from __future__ import annotations

import json
import shutil
import signal
import sys

import pytest

from tests.support import run_cli
from tests.support.phases import build, done_log, journal_runs, work
from tests.support.procs import alive, completed, pids_in, start_looprail, wait_for


def test_run_all_ships_a_three_phase_project(tmp_path):
    project = build(tmp_path)
    out = run_cli("run", str(project), "--all", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["status"] == "shipped"
    assert summary["shipped"] == ["1", "2", "3"]
    assert [p["phase"] for p in summary["phases"]] == ["1", "2", "3"]
    assert all(p["status"] == "shipped" for p in summary["phases"])
    assert summary["notRun"] == [] and summary["finishedBefore"] == []
    # Each phase its own journaled run, in ROADMAP order; every role and task ran once.
    runs = journal_runs(project)
    assert [(r["phase"], r["status"]) for r in runs] == [
        ("1", "shipped"),
        ("2", "shipped"),
        ("3", "shipped"),
    ]
    assert [r["id"] for r in runs] == [p["runId"] for p in summary["phases"]]
    assert done_log(project) == work(1, 2, 3)
    # The folders the ROADMAP named were created with the reference's names.
    phases = sorted(p.name for p in (project / ".planning" / "phases").iterdir())
    assert phases == ["01-setup", "02-core-work", "03-polish-ship"]
    assert (project / "out" / "03-02.txt").read_text() == "write out/03-02.txt\n"

    # Everything is finished: again, nothing runs and nothing new is journaled.
    again = run_cli("run", str(project), "--all")
    assert again.returncode == 0, again.stderr
    assert "every phase is finished; nothing to run" in again.stdout
    assert len(journal_runs(project)) == 3
    assert done_log(project) == work(1, 2, 3)


def test_run_all_human_summary_names_the_shipped_phases(tmp_path):
    project = build(tmp_path)
    out = run_cli("run", str(project), "--all", "-q")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sum("shipped in" in line for line in lines) == 3
    assert lines[-1] == "phases: 1 shipped, 2 shipped, 3 shipped"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kill test needs /proc")
def test_a_kill_in_phase_2_resumes_without_running_phase_1_again(tmp_path):
    project = build(tmp_path)
    marker = "exec-02-02-T1"  # phase 2: plan 01 done, plan 02's task in flight
    (project / ".hold").mkdir()
    (project / ".hold" / marker).write_text("")
    proc = start_looprail("run", str(project), "--all")
    try:
        wait_for(
            lambda: (project / ".reached" / marker).exists() or proc.poll() is not None,
            timeout=90,
        )
        assert proc.poll() is None, proc.communicate()
        held = int((project / ".reached" / marker).read_text())
        proc.send_signal(signal.SIGKILL)  # looprail only: its children die on their own
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_for(lambda: not alive(held), timeout=10)
    (project / ".hold" / marker).unlink()
    before = done_log(project)
    assert before == [*work(1), "discuss 2", "plan 2", "task 02-01-T1"]
    runs = journal_runs(project)
    assert [(r["phase"], r["status"]) for r in runs] == [("1", "shipped"), ("2", "running")]
    # `status` shows where the project is, as well as the interrupted run.
    status = json.loads(run_cli("status", str(project), "--json").stdout)
    assert [(p["number"], p["status"]) for p in status["phases"]] == [
        ("1", "shipped"),
        ("2", "running"),
        ("3", "not started"),
    ]

    again = completed(start_looprail("run", str(project), "--all", "--json"), timeout=120)
    assert again.returncode == 0, again.stderr
    assert "accept-changes" not in again.stderr
    summary = json.loads(again.stdout.splitlines()[-1])
    assert summary["shipped"] == ["2", "3"]
    assert summary["finishedBefore"] == ["1"]
    assert summary["phases"][0]["resumed"] is True
    assert summary["phases"][0]["runId"] == runs[1]["id"]
    # Phase 1 never ran again; in phase 2 only the task in flight at the kill ran again.
    assert done_log(project) == [*before, *work(2)[3:], *work(3)]
    runs = journal_runs(project)
    assert [(r["phase"], r["status"]) for r in runs] == [
        ("1", "shipped"),
        ("2", "shipped"),
        ("3", "shipped"),
    ]
    assert [p for p in pids_in(project / "pids.log") if alive(p)] == []


@pytest.mark.skipif(shutil.which("git") is None, reason="agent CLIs work in git worktrees")
def test_the_budget_spans_every_phase_of_the_invocation(tmp_path):
    """Each agent call costs $0.5 and a phase seven calls ($3.5): with --budget-usd 4 phase 1
    ships and phase 2 stops after its first call, at $4 for the invocation (each phase alone
    would have been within the budget)."""
    from tests.support.agents import agent_env, calls, looprail

    env = agent_env(tmp_path, FAKE_AGENT_COST="0.5")
    assert looprail("init", "demo", "--agent", "claude", cwd=tmp_path, env=env).returncode == 0
    demo = tmp_path / "demo"
    (demo / ".planning" / "ROADMAP.md").write_text(
        "# Roadmap\n\n## Phase 1: first\n\n## Phase 2: second\n\n## Phase 3: third\n"
    )
    done = looprail("run", "--all", "--budget-usd", "4", "--json", cwd=demo, env=env)
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert summary["shipped"] == ["1"] and summary["notRun"] == ["3"]
    assert summary["phases"][1]["status"] == "halted"
    assert "budget reached: $4.0000 spent of --budget-usd 4" in summary["phases"][1]["reason"]
    assert summary["spentUsd"] == 4.0 and len(calls(tmp_path)) == 8
    # Again with $3.5: phase 2's run (resumed; $0.5 of it spent before) ships at $3.5, which
    # leaves nothing for phase 3: the loop stops before it starts.
    more = looprail("run", "--all", "--budget-usd", "3.5", "--json", cwd=demo, env=env)
    summary = json.loads(more.stdout)
    assert more.returncode == 1 and summary["shipped"] == ["2"], more.stderr
    assert summary["status"] == "halted" and summary["notRun"] == ["3"]
    assert summary["reason"] == (
        "budget reached: $3.5000 spent of --budget-usd 3.5; phase 3 not started"
    )
    assert len(calls(tmp_path)) == 14
