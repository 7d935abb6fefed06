"""Deferred, never lost task starts (`JournalRecorder`): a task's start is held and written
first in the next commit, so a short task is one FULL commit; a flusher commits a held start
within `FLUSH_AFTER`, so a long task shows as running; attempt numbers are the journal's; a
refused or failed start reaches its caller. One writer thread makes every commit; it stops at
`flush`/`close`."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.journal import EventRecord, Journal, JournalError, journal_path
from looprail.journal.recorder import JournalRecorder
from tests.support import examples, run_cli
from tests.support.journal import commits_failing

FLUSHER = "looprail-journal-writer"


def _row(project: Path, run_id: str, key: str) -> tuple[str, int] | None:
    """The task row as a second connection sees it (what another process would read)."""
    db = sqlite3.connect(journal_path(project), timeout=5)
    try:
        return db.execute(
            "SELECT status, attempt FROM tasks WHERE run_id = ? AND task_key = ?", (run_id, key)
        ).fetchone()
    finally:
        db.close()


def _flushers(run_id: str) -> list[threading.Thread]:
    """The run's recorder's writer threads that are alive."""
    name = f"{FLUSHER} {run_id}"
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


def _run(project: Path, keys=("01-01/T1",)) -> tuple[Journal, str]:
    journal = Journal.open(project)
    run_id = journal.start_run("1", state=["execute"])
    journal.wave_started(run_id, 1, [(k, k.split("/")[0]) for k in keys])
    return journal, run_id


def _traced(journal: Journal, run_id: str) -> tuple[JournalRecorder, list[str]]:
    """A recorder that has read the run's rows, and every SQL statement from now on."""
    recorder = JournalRecorder(journal, run_id)
    recorder.done_tasks()
    statements: list[str] = []
    journal._conn.set_trace_callback(statements.append)
    return recorder, statements


def test_a_short_task_is_one_full_commit_with_both_events_sealed(tmp_path):
    journal, run_id = _run(tmp_path)
    with journal:
        recorder = JournalRecorder(journal, run_id)
        recorder.done_tasks()  # the runner reads them before a wave
        statements: list[str] = []
        journal._conn.set_trace_callback(statements.append)
        assert recorder.task_started("01-01/T1", plan_id="01-01", wave=1) == 1
        assert statements == []  # held: nothing written yet
        recorder.task_finished("01-01/T1", status="done", duration_ms=7)
        journal._conn.set_trace_callback(None)
        assert statements.count("BEGIN IMMEDIATE") == 1 and statements.count("COMMIT") == 1
        assert not any("synchronous" in s for s in statements)  # FULL: the finish syncs
        # The start and the finish, each a savepoint of the one commit (a refused one fails
        # only its own caller).
        assert [s for s in statements if s.startswith("SAVEPOINT")] == ["SAVEPOINT sp1"] * 2
        assert _row(tmp_path, run_id, "01-01/T1") == ("done", 1)
        events = journal.events(run_id, kinds=["task_started", "task_finished"])
        assert [(e.kind, e.task_id, e.data["attempt"]) for e in events] == [
            ("task_started", "01-01/T1", 1),
            ("task_finished", "01-01/T1", 1),
        ]
        assert events[0].data["previous_status"] == "pending"
        assert events[1].outcome == "done" and events[1].duration_ms == 7
        assert events[0].ts <= events[1].ts
        recorder.flush()
        journal.verify_run(run_id)
    assert not _flushers(run_id)
    p = run_cli("journal", "verify", "--project", str(tmp_path))
    if "invalid choice" not in p.stderr:  # the CLI check, where this looprail has one
        assert p.returncode == 0, p.stderr


def test_a_long_task_shows_running_within_the_flush_window(tmp_path):
    journal, run_id = _run(tmp_path)
    with journal:
        recorder = JournalRecorder(journal, run_id)
        began = time.monotonic()
        recorder.task_started("01-01/T1", plan_id="01-01", wave=1)
        while _row(tmp_path, run_id, "01-01/T1") != ("running", 1):
            assert time.monotonic() - began < 2, "the start was never committed"
            time.sleep(0.005)
        seen = time.monotonic() - began
        assert seen < 0.5  # FLUSH_AFTER is 0.05 s; the rest is slack for a loaded machine
        status = run_cli("status", "--json", str(tmp_path))
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["run"]["tasks"]["running"] == 1
        # The flusher's commit was relaxed: the connection is back to FULL for the finish.
        assert journal.pragma("synchronous") == 2
        recorder.task_finished("01-01/T1", status="done", duration_ms=1)
        assert _row(tmp_path, run_id, "01-01/T1") == ("done", 1)
        started = journal.events(run_id, kinds=["task_started"])
        assert len(started) == 1  # written once, by the flusher
        recorder.flush()
        journal.verify_run(run_id)
    assert not _flushers(run_id)


def test_a_process_event_carries_the_held_start_relaxed(tmp_path):
    """A task with a child: its start commits with the child's pid (relaxed, no fsync), its
    finish FULL: one relaxed and one FULL commit."""
    journal, run_id = _run(tmp_path)
    with journal:
        recorder, statements = _traced(journal, run_id)
        recorder.task_started("01-01/T1", plan_id="01-01", wave=1)
        recorder.event(EventRecord(kind="process", data={"pid": 1, "start": 2}))
        at_process = list(statements)
        assert _row(tmp_path, run_id, "01-01/T1") == ("running", 1)
        recorder.task_finished("01-01/T1", status="done", duration_ms=1)
        journal._conn.set_trace_callback(None)
        assert at_process[0] == "PRAGMA synchronous = NORMAL"
        assert at_process.count("COMMIT") == 1
        assert statements.count("COMMIT") == 2
        kinds = [e.kind for e in journal.events(run_id)]
        assert kinds[-3:] == ["task_started", "process", "task_finished"]
        recorder.flush()
        journal.verify_run(run_id)


def test_a_guarded_childs_process_event_is_held_with_the_start(tmp_path):
    """A child under a guard dies with looprail, so its pid record waits like the start: a
    short task with a child is still one FULL commit, and a long one has both written by the
    flusher (relaxed) while it runs."""
    journal, run_id = _run(tmp_path, keys=("01-01/T1", "01-01/T2"))
    guarded = {"pid": 1, "start": 2, "guard_pid": 3, "guard_start": 4, "argv0": "agent"}
    with journal:
        recorder, statements = _traced(journal, run_id)
        recorder.task_started("01-01/T1", plan_id="01-01", wave=1)
        recorder.event(EventRecord(kind="process", data=guarded))
        assert statements == []  # nothing written yet
        recorder.task_finished("01-01/T1", status="done", duration_ms=1)
        journal._conn.set_trace_callback(None)
        assert statements.count("COMMIT") == 1
        assert "PRAGMA synchronous = NORMAL" not in statements
        kinds = [e.kind for e in journal.events(run_id)]
        assert kinds[-3:] == ["task_started", "process", "task_finished"]

        recorder.task_started("01-01/T2", plan_id="01-01", wave=1)
        recorder.event(EventRecord(kind="process", data={**guarded, "pid": 5}))
        held_at = journal.timestamp()  # the flusher writes it at least 25 ms after this
        deadline = time.monotonic() + 5
        while _row(tmp_path, run_id, "01-01/T2") != ("running", 1):
            assert time.monotonic() < deadline, "the flusher never wrote the held start"
            time.sleep(0.01)
        processes = journal.events(run_id, kinds=["process"])
        assert [e.data["pid"] for e in processes] == [1, 5]  # with the start, by the flusher
        starts = journal.events(run_id, kinds=["task_started"])
        assert starts[1].ts <= processes[1].ts <= held_at  # when it started, not written
        recorder.task_finished("01-01/T2", status="done", duration_ms=1)
        recorder.flush()
        journal.verify_run(run_id)
    assert not _flushers(run_id)


def test_a_start_of_a_done_task_is_refused_at_once(tmp_path):
    journal, run_id = _run(tmp_path)
    with journal:
        journal.task_started(run_id, "01-01/T1")
        journal.task_finished(run_id, "01-01/T1")
        recorder = JournalRecorder(journal, run_id)
        statements: list[str] = []
        journal._conn.set_trace_callback(statements.append)
        with pytest.raises(JournalError, match="already done; finished tasks are not run again"):
            recorder.task_started("01-01/T1", plan_id="01-01", wave=1)
        journal._conn.set_trace_callback(None)
        assert not any(s.startswith(("INSERT", "BEGIN")) for s in statements)
        with pytest.raises(ValueError, match="non-empty string"):
            recorder.task_started("", plan_id="01-01", wave=1)
        recorder.flush()
        journal.verify_run(run_id)


@pytest.mark.parametrize("flushed", [False, True], ids=["with-its-finish", "by-the-flusher"])
def test_a_refused_held_start_reaches_its_finish(tmp_path, flushed):
    """Another writer finished the task after this recorder read the run: the held start is
    refused when it is written, and the task's finish raises that refusal (nothing of it is
    written); the other tasks of the commit are not affected."""
    journal, run_id = _run(tmp_path, keys=("01-01/T1", "01-02/T1"))
    with journal:
        recorder = JournalRecorder(journal, run_id)
        recorder.done_tasks()
        with Journal.open(tmp_path) as other:
            other.task_started(run_id, "01-01/T1")
            other.task_finished(run_id, "01-01/T1")
        recorder.task_started("01-02/T1", plan_id="01-02", wave=1)
        assert recorder.task_started("01-01/T1", plan_id="01-01", wave=1) == 1
        if flushed:
            time.sleep(0.3)
            assert _row(tmp_path, run_id, "01-02/T1") == ("running", 1)
        with pytest.raises(JournalError, match="already done"):
            recorder.task_finished("01-01/T1", status="done", duration_ms=1)
        recorder.task_finished("01-02/T1", status="done", duration_ms=1)
        assert _row(tmp_path, run_id, "01-02/T1") == ("done", 1)
        finished = journal.events(run_id, kinds=["task_finished"])
        assert [e.task_id for e in finished] == ["01-01/T1", "01-02/T1"]  # the other's, ours
        recorder.flush()
        journal.verify_run(run_id)


def test_a_failed_flusher_commit_is_raised_by_the_next_call_and_nothing_is_lost(tmp_path):
    journal, run_id = _run(tmp_path)
    with journal:
        recorder = JournalRecorder(journal, run_id)
        with commits_failing(journal):
            recorder.task_started("01-01/T1", plan_id="01-01", wave=1)
            time.sleep(0.3)  # the flusher tried, and failed
        assert _row(tmp_path, run_id, "01-01/T1") == ("pending", 0)
        with pytest.raises(JournalError, match="disk full"):
            recorder.task_finished("01-01/T1", status="done", duration_ms=1)
        # The start was held again: the next commit writes it, then the finish can follow.
        recorder.flush()
        assert _row(tmp_path, run_id, "01-01/T1") == ("running", 1)
        recorder.task_finished("01-01/T1", status="done", duration_ms=1)
        assert _row(tmp_path, run_id, "01-01/T1") == ("done", 1)
        recorder.flush()
        journal.verify_run(run_id)
    assert not _flushers(run_id)


def test_flush_and_close_stop_the_flusher_thread(tmp_path):
    journal, run_id = _run(tmp_path, keys=("a", "b"))
    with journal:
        recorder = JournalRecorder(journal, run_id)
        recorder.task_started("a", plan_id="p", wave=1)
        assert len(_flushers(run_id)) == 1
        recorder.flush()
        assert not _flushers(run_id) and _row(tmp_path, run_id, "a") == ("running", 1)
        recorder.task_started("b", plan_id="p", wave=1)  # a later start starts it again
        assert len(_flushers(run_id)) == 1
        recorder.close()  # an abnormal end: stopped, nothing committed (as in a crash)
        assert not _flushers(run_id)
        assert _row(tmp_path, run_id, "b") == ("pending", 0)


# -- attempt numbers: the recorder's equal the journal's -------------------------------------

KEYS = ("a", "b", "c")
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.sampled_from(KEYS)),
        st.tuples(st.just("finish"), st.sampled_from(KEYS), st.sampled_from(["done", "failed"])),
        st.tuples(st.just("process")),
        st.tuples(st.just("flush")),
        st.tuples(st.just("crash")),
    ),
    max_size=25,
)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=OPS)
def test_attempts_returned_are_the_journals(tmp_path_factory, ops):
    """Over any sequence of starts, finishes, process events, flushes and crashes (a recorder
    dropped without a flush: its held starts are lost, as in a kill), every attempt the
    recorder returns is the one the journal writes for that start, a start of a done task is
    refused at once, and every task row's attempt is the number of its journaled starts."""
    project = tmp_path_factory.mktemp("attempts")
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["execute"])
        recorder = JournalRecorder(journal, run_id)
        returned: dict[str, int] = {}  # the latest start's attempt, per task
        for op in ops:
            kind = op[0]
            if kind == "start":
                key = op[1]
                row = _row(project, run_id, key)
                if row is not None and row[0] == "done":
                    with pytest.raises(JournalError, match="already done"):
                        recorder.task_started(key, plan_id="p", wave=1)
                    continue
                returned[key] = recorder.task_started(key, plan_id="p", wave=1)
            elif kind == "finish":
                key, status = op[1], op[2]
                if key not in returned:
                    continue
                recorder.task_finished(key, status=status, duration_ms=1)
                assert _row(project, run_id, key) == (status, returned.pop(key))
            elif kind == "process":
                recorder.event(EventRecord(kind="process", data={"pid": 1, "start": 1}))
            elif kind == "flush":
                recorder.flush()
            else:
                recorder.close()
                recorder = JournalRecorder(journal, run_id)
                returned.clear()
        recorder.flush()
        journal.verify_run(run_id)
        events = journal.events(run_id, kinds=["task_started"])
        for task in journal.tasks(run_id):
            starts = [e.data["attempt"] for e in events if e.task_id == task.task_key]
            assert starts == list(range(1, task.attempt + 1)), task
        for key, attempt in returned.items():  # still running: committed by the flush
            assert _row(project, run_id, key) == ("running", attempt)
    assert not _flushers(run_id)


def test_many_threads_with_the_flusher_keep_every_task_once_and_in_order(tmp_path):
    """Plans on eight threads start and finish tasks, some quick, some longer than the flush
    window, with hook events held between: every task is journaled started then finished
    exactly once, with attempt 1, and the run's seal holds."""
    import random

    plans = [f"01-{p:02d}" for p in range(8)]
    keys = [f"{p}/T{t}" for p in plans for t in range(12)]
    journal, run_id = _run(tmp_path, keys=keys)
    with journal:
        recorder = JournalRecorder(journal, run_id)
        errors: list[BaseException] = []

        def plan(pid: str, seed: int) -> None:
            rnd = random.Random(seed)
            try:
                for t in range(12):
                    key = f"{pid}/T{t}"
                    assert recorder.task_started(key, plan_id=pid, wave=1) == 1
                    recorder.event(EventRecord(kind="hook", task_id=key, cap_id="x"))
                    time.sleep(rnd.choice([0, 0, 0.001, 0.03, 0.08]))
                    recorder.task_finished(key, status="done", duration_ms=1)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=plan, args=(p, i)) for i, p in enumerate(plans)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        recorder.flush()
        journal.verify_run(run_id)
        rows = {t.task_key: (t.status, t.attempt) for t in journal.tasks(run_id)}
        assert rows == dict.fromkeys(keys, ("done", 1))
        events = journal.events(run_id, kinds=["task_started", "hook", "task_finished"])
        for key in keys:
            mine = [e.kind for e in events if e.task_id == key]
            assert mine == ["task_started", "hook", "task_finished"], (key, mine)
    assert not _flushers(run_id)
