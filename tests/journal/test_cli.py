"""`looprail status`, `history` and `report`, run as a user runs them (a separate process)."""

from __future__ import annotations

import json
import sys

import pytest

from looprail.journal import EventRecord, Journal, RunLock, journal_path
from looprail.runtime.process import run_bounded

ENTRY = "from looprail.cli import main; raise SystemExit(main())"


def looprail(*args: str):
    result = run_bounded([sys.executable, "-c", ENTRY, *args], timeout_s=60)
    assert not result.timed_out, result
    return result


@pytest.fixture
def project(tmp_path):
    """Two runs: a shipped one, then a halted one in wave 2."""
    with Journal.open(tmp_path) as journal:
        first = journal.start_run("01", run_id="01AAAA", state=["discuss"])
        journal.finish_run(first, "shipped")
        second = journal.start_run("02", run_id="01BBBB", state=["discuss"])
        journal.record(
            second,
            EventRecord(kind="transition", data={"source": "plan", "target": "execute"}),
            state=["execute", "wave_running"],
        )
        journal.wave_started(second, 1, [("a:1", "a")])
        journal.task_started(second, "a:1")
        journal.task_finished(second, "a:1")
        journal.wave_started(second, 2, [("b:1", "b"), ("b:2", "b"), ("c:1", "c")])
        journal.task_started(second, "b:1")
        lint = EventRecord(
            kind="hook", point="execute:pre", cap_id="lint", hook_kind="step", outcome="ok"
        )
        journal.record(second, lint)
        journal.finish_run(second, "halted", "gate coverage blocked")
    return tmp_path


def test_without_a_journal_status_and_history_say_no_runs_yet(tmp_path):
    for command in ("status", "history"):
        result = looprail(command, "--project", str(tmp_path))
        assert (result.exit_code, result.stdout, result.stderr) == (0, "no runs yet\n", "")
    status = json.loads(looprail("status", "--project", str(tmp_path), "--json").stdout)
    assert status == {
        "run": None,
        "wave": None,
        "live": False,
        "interrupted": False,
        "refusedAt": None,
        "lockHolder": None,
        "log": None,
        "phases": [],
    }
    history = json.loads(looprail("history", "--project", str(tmp_path), "--json").stdout)
    assert history == {"runs": []}
    assert not journal_path(tmp_path).exists()  # reading never creates a journal


def test_without_a_journal_report_is_a_one_line_error(tmp_path):
    result = looprail("report", "--project", str(tmp_path))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        f"looprail: error: {journal_path(tmp_path)}: no journal yet (no run has been recorded)\n"
    )


def test_status_shows_the_last_run(project):
    result = looprail("status", "--project", str(project))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "run 01BBBB · phase 02 · halted"
    assert lines[1:4] == [
        "state: execute/wave_running",
        "wave: 2",
        "tasks: 1 done, 1 running, 2 pending, 0 failed",
    ]
    assert lines[-1] == "halt reason: gate coverage blocked"


def test_status_json(project):
    result = looprail("status", "--json", "--project", str(project))
    status = json.loads(result.stdout)
    assert list(status) == [
        "run",
        "wave",
        "live",
        "interrupted",
        "refusedAt",
        "lockHolder",
        "log",
        "phases",
    ]
    assert status["run"]["id"] == "01BBBB" and status["run"]["status"] == "halted"
    assert status["run"]["tasks"] == {"pending": 2, "running": 1, "done": 1, "failed": 0}
    assert (status["wave"], status["live"], status["interrupted"]) == (2, False, False)


def test_status_tells_a_live_run_from_an_interrupted_one(tmp_path):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01", state=["plan"])
    # Nobody holds the lock: the run's process is gone.
    interrupted = looprail("status", "--project", str(tmp_path))
    assert "running (interrupted: pid" in interrupted.stdout
    assert "`looprail resume` continues it" in interrupted.stdout
    with RunLock(tmp_path, run_id=run_id):
        live = json.loads(looprail("status", "--json", "--project", str(tmp_path)).stdout)
    assert (live["live"], live["interrupted"]) == (True, False)
    assert live["lockHolder"]["runId"] == run_id


def test_history_lists_runs_oldest_first(project):
    result = looprail("history", "--project", str(project))
    assert result.exit_code == 0, result.stderr
    header, first, second = result.stdout.splitlines()
    assert header.split() == ["RUN", "PHASE", "STATUS", "STARTED", "TOOK", "TASKS", "REASON"]
    assert first.split()[:3] == ["01AAAA", "01", "shipped"]
    assert second.split()[:3] == ["01BBBB", "02", "halted"]
    assert second.endswith("1/4 done  gate coverage blocked")
    runs = json.loads(looprail("history", "--json", "--project", str(project)).stdout)["runs"]
    assert [(r["id"], r["status"]) for r in runs] == [("01AAAA", "shipped"), ("01BBBB", "halted")]


def test_report_defaults_to_the_latest_run(project):
    result = looprail("report", "--project", str(project))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Run 01BBBB · phase 02 · halted\n")
    assert "  execute:pre  (0 dispatches)\n" in result.stdout
    assert "lint" in result.stdout


def test_report_by_prefix_as_json(project):
    result = looprail("report", "01a", "--json", "--project", str(project))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("\n") == 1
    report = json.loads(result.stdout)
    assert report["reportVersion"] == 1
    assert (report["run"]["id"], report["run"]["status"]) == ("01AAAA", "shipped")


def test_report_of_an_unknown_or_ambiguous_run_is_a_one_line_error(project):
    unknown = looprail("report", "zz", "--project", str(project))
    assert unknown.exit_code == 1 and unknown.stdout == ""
    assert unknown.stderr == (
        f"looprail: error: {journal_path(project)}: no run 'zz' (`looprail history` lists them)\n"
    )
    ambiguous = looprail("report", "01", "--project", str(project))
    assert ambiguous.exit_code == 1
    assert "run prefix '01' matches 2 runs (01AAAA, 01BBBB); give more characters" in (
        ambiguous.stderr
    )
    assert ambiguous.stderr.count("\n") == 1
