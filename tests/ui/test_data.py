"""The read side the dashboard stands on: the read-only journal, incremental event reads, task
counts, and which log files belong to which task. No web stack needed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.journal import EventRecord, Journal, JournalError, NoJournalError, new_run_id
from looprail.ui import data, logs
from tests.support import examples


def project_with_run(root: Path) -> tuple[Path, str]:
    project = root / "p"
    (project / ".planning").mkdir(parents=True)
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["discuss"])
        journal.wave_started(run_id, 1, [("01-01/T1", "01-01"), ("01-01/T2", "01-01")])
        journal.task_started(run_id, "01-01/T1")
        journal.task_finished(run_id, "01-01/T1")
    return project, run_id


def test_open_readonly_reads_and_refuses_every_write(tmp_path):
    project, run_id = project_with_run(tmp_path)
    path = project / ".looprail" / "journal.sqlite"
    before = path.read_bytes()
    with Journal.open_readonly(project) as journal:
        assert journal.latest_run().id == run_id
        assert journal.pragma("query_only") == 1
        with pytest.raises(JournalError, match="readonly"):
            journal.finish_run(run_id, "halted", "no")
        with pytest.raises(JournalError, match="readonly"):
            journal.record(run_id, EventRecord(kind="warning", message="no"))
    assert path.read_bytes() == before


def test_open_readonly_without_a_journal_creates_nothing(tmp_path):
    with pytest.raises(NoJournalError):
        Journal.open_readonly(tmp_path)
    assert not (tmp_path / ".looprail").exists()
    (tmp_path / ".looprail").mkdir()
    (tmp_path / ".looprail" / "journal.sqlite").write_bytes(b"")
    with pytest.raises(NoJournalError):
        Journal.open_readonly(tmp_path)  # an empty file: no run was ever recorded


def test_open_readonly_refuses_a_foreign_database_untouched(tmp_path):
    (tmp_path / ".looprail").mkdir()
    path = tmp_path / ".looprail" / "journal.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(JournalError, match="not a looprail journal"):
        Journal.open_readonly(tmp_path)
    assert path.read_bytes() == before


def test_events_after_a_seq_and_task_counts(tmp_path):
    project, run_id = project_with_run(tmp_path)
    with Journal.open_readonly(project) as journal:
        every = journal.events(run_id)
        last = journal.last_seq()
        assert last == every[-1].seq
        assert journal.events(run_id, after=every[1].seq) == every[2:]
        assert journal.events(run_id, after=last) == []
        assert journal.task_counts() == {run_id: {"done": 1, "pending": 1}}


def test_a_cached_snapshot_sees_what_was_appended(tmp_path):
    project, run_id = project_with_run(tmp_path)
    cache: dict = {}
    first = data.snapshot(project, event_cache=cache)
    with Journal.open(project) as journal:
        journal.task_started(run_id, "01-01/T2")
        journal.task_finished(run_id, "01-01/T2", status="failed")
    again = data.snapshot(project, event_cache=cache)
    fresh = data.snapshot(project)
    assert again["run"] == {**fresh["run"], "waves": again["run"]["waves"]}
    assert again["run"]["waves"] == fresh["run"]["waves"]
    assert first["run"]["tasks"]["failed"] == 0 and again["run"]["tasks"]["failed"] == 1
    assert [e.seq for e in cache[run_id]] == sorted({e.seq for e in cache[run_id]})


# -- which log file is whose -------------------------------------------------------------------

plan_ids = st.builds(lambda a, b: f"{a:02d}-{b:02d}", st.integers(1, 12), st.integers(1, 40))
task_keys = st.builds(lambda p, t: f"{p}/T{t}", plan_ids, st.integers(1, 30))
layouts = st.sampled_from(
    [
        "{plan}/{task}.log",
        "{plan}_{task}.stderr",
        "{plan}-{task}.stdout.log",
        "{plan}/{task}/out.txt",
        "attempt-1/{plan}__{task}.log",
    ]
)


@settings(max_examples=examples(60), deadline=None)
@given(keys=st.lists(task_keys, min_size=1, max_size=8, unique=True), layout=layouts)
def test_each_task_gets_its_own_log_files_and_no_other(tmp_path_factory, keys, layout):
    project = tmp_path_factory.mktemp("logs")
    run = new_run_id()
    root = logs.log_dir(project, run)
    assert root is not None
    for key in keys:
        plan, task = key.split("/")
        path = root / layout.format(plan=plan, task=task)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"log of {key}\n")
    found = logs.task_logs(project, run, keys)
    for key in keys:
        (only,) = found[key]
        assert only[1].read_text() == f"log of {key}\n"
    assert logs.task_logs(project, run, ["99-99/T99"]) == {}
