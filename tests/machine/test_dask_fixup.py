"""A human-verify checkpoint answered with issues on the Dask executor: the fix-up call runs on
the plan's worker (a later step of the same worker run, or the first one when the checkpoint is
where the run resumes), gets the issues verbatim, is journaled as task `01-01/T2-fix1`, and the
checkpoint is asked again; a secret answered before it reaches the fix-up call as it would on
the local executor.

The plan and its executor are the checkpoint end-to-end tests' (`tests/e2e/test_checkpoints.py`):
the executor logs each request it gets into the project."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.e2e.test_checkpoints import (
    SECRET,
    VERIFY,
    answers,
    assert_nowhere,
    auto,
    project_with,
    requests,
)
from tests.machine.test_dask_executor import journal_tasks
from tests.machine.test_dask_secret import calls, digest, run_on
from tests.support import run_cli

distributed = pytest.importorskip("distributed")
pytest.importorskip("cryptography")

KINDS = ("checkpoint", "answer", "task_started", "task_finished")


def journaled(project: Path) -> list[tuple[str, str | None, str | None]]:
    """(kind, task, outcome) of the checkpoint and task events, in journal order."""
    with sqlite3.connect(project / ".looprail" / "journal.sqlite") as conn:
        return conn.execute(
            f"SELECT kind, task_id, outcome FROM events WHERE kind IN {KINDS} ORDER BY seq"
        ).fetchall()


ISSUES = 'The sidebar still shows at 375px; the "Save" button is grey, make it blue'


def test_issues_go_to_a_fix_up_call_on_the_worker_then_the_checkpoint_is_asked_again(tmp_path):
    """T2 is the plan's last task: the worker that ran T1 still waits for the fix-up; once T2 is
    approved the plan ends and the run ships. The journal is the local executor's, event for
    event."""
    flags = ("--answer", f"01-01/T2={ISSUES}", "--approve", "01-01/T2")
    local = project_with(tmp_path / "local", VERIFY, after=0)
    here = run_cli("run", str(local), "--phase", "1", *flags, subprocess=True)
    assert here.returncode == 0, here.stderr
    project = project_with(tmp_path / "dask", VERIFY, after=0)
    done = run_on(project, "dask-local:1", *flags)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "fix-up round 1 for the issues described" in done.stderr
    assert "01-01/T2-fix1 ran on tls://" in done.stderr  # on the cluster's worker
    assert [r["task"] for r in requests(project)] == ["01-01/T1", "01-01/T2-fix1"]
    fix = requests(project)[1]
    assert ISSUES in fix["action"]  # verbatim
    assert journal_tasks(project)["01-01/T2-fix1"] == ("done", 1)
    assert [(a.outcome, a.message) for a in answers(project)] == [
        ("issues", ISSUES),
        ("approved", "approved"),
    ]
    assert (project / "SHIPPED").exists()
    assert journaled(project) == journaled(local)
    assert ("task_finished", "01-01/T2-fix1", "done") in journaled(project)
    assert requests(project) == requests(local)


def test_a_fix_up_is_the_workers_first_call_when_the_run_resumes_at_the_checkpoint(tmp_path):
    """Paused at T2 (no terminal), answered with issues by `looprail answer`: the resumed run's
    first call is the fix-up (submitted with the plan), then T2 is asked again (a pause), and
    approved the next resume runs T3 and ships."""
    project = project_with(tmp_path, VERIFY)
    assert run_on(project, "dask-local:1").returncode == 3
    given = run_cli("answer", str(project), "01-01/T2", ISSUES, subprocess=True)
    assert given.returncode == 0, given.stderr
    again = run_on(project, "dask-local:1")
    assert again.returncode == 3, again.stderr  # asked again, no terminal: paused
    assert "Traceback" not in again.stderr
    assert [r["task"] for r in requests(project)] == ["01-01/T1", "01-01/T2-fix1"]
    assert run_cli("answer", str(project), "01-01/T2", "approved").returncode == 0
    last = run_on(project, "dask-local:1")
    assert last.returncode == 0, last.stderr
    assert [r["task"] for r in requests(project)] == ["01-01/T1", "01-01/T2-fix1", "01-01/T3"]
    assert journal_tasks(project)["01-01/T2-fix1"] == ("done", 1)  # not run again
    assert (project / "SHIPPED").exists()


def test_a_secret_answered_just_before_reaches_the_fix_up_call_on_the_worker(tmp_path):
    """T2 is a secret, T3 a human-verify answered with issues: the next executor call after the
    secret is T3's fix-up, which gets it (as on the local executor); T4 does not."""
    project = project_with(tmp_path, SECRET, after=0)
    plan = project / ".planning/phases/01-demo/01-01-PLAN.md"
    text = plan.read_text()
    tail = "\n</tasks>\n"
    plan.write_text(text.removesuffix(tail) + f"\n\n{VERIFY}\n\n{auto('later')}{tail}")
    secret = "sk-dask-FIXUPv4lue-0123456789"
    done = run_on(
        project,
        "dask-local:1",
        "--answer",
        f"01-01/T2={secret}",
        "--answer",
        f"01-01/T3={ISSUES}",
        "--approve",
        "01-01/T3",
    )
    assert done.returncode == 0, done.stderr
    assert calls(project) == {
        "01-01/T1": None,
        "01-01/T3-fix1": digest(secret),  # the next executor call, on the worker
        "01-01/T4": None,
    }
    assert_nowhere(project, secret)
    assert secret not in done.stdout
