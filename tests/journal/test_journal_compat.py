"""A journal written by the looprail before the one-writer recorder (branch `onesource2`) still
reads, verifies and resumes: the schema, the rows and the seal format are unchanged.

The fixture is a real halted run of that looprail (`looprail run --jobs 1` on a 4-plan phase
whose executor failed on its third call: two tasks done, one failed), with the test key it was
sealed with (a key made for this fixture, nobody's secret)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from looprail.journal import Journal
from tests.support import run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "journal_onesource2"


def _old_project(tmp_path: Path, monkeypatch) -> Path:
    project = tmp_path / "project"
    shutil.copytree(FIXTURE / "project", project, symlinks=True)
    home = tmp_path / "looprail-home"
    home.mkdir(mode=0o700)
    key = home / "journal.key"
    key.write_bytes((FIXTURE / "journal.key").read_bytes())
    key.chmod(0o600)
    monkeypatch.setenv("LOOPRAIL_HOME", str(home))
    (tmp_path / "executor-calls").write_text("3\n")  # past its failing call: it works now
    return project


def test_a_journal_of_the_previous_looprail_verifies_and_resumes(tmp_path, monkeypatch):
    project = _old_project(tmp_path, monkeypatch)
    with Journal.open(project) as journal:
        (run,) = journal.runs()
        assert run.status == "halted"
        journal.verify_run(run.id)  # the old seal checks with this looprail
        before = {t.task_key: (t.status, t.attempt) for t in journal.tasks(run.id)}
    assert before["01-001/T1"] == ("done", 1) and before["01-002/T1"] == ("failed", 1)

    p = run_cli("run", "--phase", "1", "-q", "--jobs", "1", "--project", str(project))
    assert p.returncode == 0, p.stderr
    # Only what was not done ran: the failed task again and the four of wave 2.
    assert (tmp_path / "executor-calls").read_text().strip() == "9"
    report = json.loads(run_cli("report", "--json", "--project", str(project)).stdout)
    assert report["run"]["id"] == run.id and report["run"]["status"] == "shipped"
    assert len(report["resumes"]) == 1
    tasks = {t["key"]: t for w in report["waves"] for p in w["plans"] for t in p["tasks"]}
    assert len(tasks) == 8 and {t["status"] for t in tasks.values()} == {"done"}
    assert tasks["01-001/T1"]["attempts"] == 1 and tasks["01-002/T1"]["attempts"] == 2
    with Journal.open(project) as journal:
        journal.verify_run(run.id)  # old rows and new rows under one seal
        starts = journal.events(run.id, kinds=["task_started"])
        for task in journal.tasks(run.id):
            mine = [e.data["attempt"] for e in starts if e.task_id == task.task_key]
            assert mine == list(range(1, task.attempt + 1)), task.task_key
