"""The journal's behaviour on a real SQLite file: pragmas, transactions, ordering, task attempts,
run lookup and resume."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta

import pytest

from looprail.journal import (
    EVENT_KINDS,
    EventRecord,
    Journal,
    JournalError,
    NoJournalError,
    TaskUpdate,
    journal_path,
    new_run_id,
    schema_version,
)


class StepClock:
    """Each reading is one second after the last: deterministic timestamps."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def journal(tmp_path):
    with Journal.open(tmp_path, clock=StepClock()) as opened:
        yield opened


def raw(tmp_path) -> sqlite3.Connection:
    return sqlite3.connect(journal_path(tmp_path))


def test_open_creates_schema_with_durable_pragmas(tmp_path):
    with Journal.open(tmp_path) as journal:
        assert journal.path == tmp_path / ".looprail" / "journal.sqlite"
        assert journal.pragma("journal_mode") == "wal"
        assert journal.pragma("synchronous") == 2  # FULL
        assert journal.pragma("foreign_keys") == 1
        assert journal.pragma("busy_timeout") > 0
        assert journal.pragma("user_version") == schema_version()
    conn = raw(tmp_path)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "runs", "events", "tasks"} <= tables
    assert conn.execute("SELECT value FROM meta WHERE key='application_id'").fetchone() == (
        "looprail-journal",
    )
    # WAL is a property of the file, not of the connection that set it.
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_open_without_create_refuses_a_missing_journal(tmp_path):
    with pytest.raises(NoJournalError, match="no journal yet"):
        Journal.open(tmp_path, create=False)
    assert not (tmp_path / ".looprail").exists()


def test_reopening_keeps_the_data(tmp_path):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01", state=["discuss"])
    with Journal.open(tmp_path, create=False) as journal:
        run = journal.get_run(run_id)
    assert run is not None and run.phase == "01" and run.state == ["discuss"]


def test_start_run_records_the_run_and_its_first_event(journal):
    run_id = journal.start_run(
        "02",
        state=["discuss"],
        machine_config={"flavor": "gsd", "jobs": 2, "autonomous": False, "options": {}},
        inputs_digest={"b.md": "2", "a.md": "1"},
    )
    run = journal.get_run(run_id)
    assert run is not None
    assert (run.status, run.phase, run.ended_at, run.halt_reason) == ("running", "02", None, None)
    assert run.machine_config["jobs"] == 2
    assert list(run.inputs_digest) == ["a.md", "b.md"]
    assert run.pid is not None and run.host
    [event] = journal.events(run_id)
    assert (event.kind, event.seq, event.ts) == ("run_started", 1, "2026-01-02T03:04:06.000Z")
    assert event.data["state"] == ["discuss"]


def test_run_ids_sort_by_start_time():
    early = new_run_id(datetime(2026, 1, 1, tzinfo=UTC))
    late = new_run_id(datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC))
    assert len(early) == len(late) == 26
    assert early < late


def test_record_writes_state_task_and_event_together(journal):
    run_id = journal.start_run("01", state=["plan"])
    seq = journal.record(
        run_id,
        EventRecord(kind="transition", data={"source": "plan", "target": "execute"}),
        state=["execute", "wave_running"],
        task_update=TaskUpdate(task_key="01-01:1", status="running", plan_id="01-01", wave=1),
    )
    run = journal.get_run(run_id)
    assert run is not None and run.state == ["execute", "wave_running"]
    [task] = journal.tasks(run_id)
    assert (task.status, task.attempt, task.plan_id, task.wave) == ("running", 1, "01-01", 1)
    event = journal.events(run_id)[-1]
    assert event.seq == seq
    # The event takes its task coordinates from the task update.
    assert (event.task_id, event.plan_id, event.wave) == ("01-01:1", "01-01", 1)
    assert event.data == {"source": "plan", "target": "execute", "attempt": 1}


def test_an_exception_inside_a_transaction_writes_nothing(journal):
    run_id = journal.start_run("01", state=["plan"])
    before = journal.events(run_id)
    with pytest.raises(RuntimeError, match="machine refused"), journal.transaction():
        journal.record(
            run_id,
            EventRecord(kind="transition"),
            state=["execute"],
            task_update=TaskUpdate(task_key="t1", status="running"),
        )
        raise RuntimeError("machine refused the transition")
    run = journal.get_run(run_id)
    assert run is not None and run.state == ["plan"]
    assert journal.events(run_id) == before
    assert journal.tasks(run_id) == []


def test_a_failure_inside_record_rolls_back_its_earlier_writes(journal):
    run_id = journal.start_run("01", state=["plan"])
    # Not JSON: fails at the last statement of the transaction, after state and task were written.
    unserialisable = EventRecord(kind="transition", data={"value": object()})
    with pytest.raises(TypeError):
        journal.record(
            run_id,
            unserialisable,
            state=["execute"],
            task_update=TaskUpdate(task_key="t1", status="running"),
        )
    run = journal.get_run(run_id)
    assert run is not None and run.state == ["plan"]
    assert [e.kind for e in journal.events(run_id)] == ["run_started"]
    assert journal.tasks(run_id) == []
    # The connection is usable afterwards.
    journal.record(run_id, EventRecord(kind="warning", message="after"))
    assert journal.events(run_id)[-1].message == "after"


def test_a_caught_failure_in_a_nested_transaction_keeps_the_outer_writes(journal):
    run_id = journal.start_run("01")
    with journal.transaction():
        journal.record(run_id, EventRecord(kind="point", point="plan:pre"))
        with pytest.raises(RuntimeError), journal.transaction():
            journal.record(run_id, EventRecord(kind="hook", point="plan:pre", cap_id="x"))
            raise RuntimeError("hook dispatch blew up")
    assert [e.kind for e in journal.events(run_id)] == ["run_started", "point"]


def test_events_keep_their_order_and_can_be_filtered(journal):
    run_id = journal.start_run("01")
    kinds = ["point", "hook", "hook", "gate_verdict", "warning", "transition"]
    seqs = [journal.record(run_id, EventRecord(kind=kind, point="plan:pre")) for kind in kinds]
    events = journal.events(run_id)
    assert [e.kind for e in events] == ["run_started", *kinds]
    assert [e.seq for e in events][1:] == seqs == sorted(seqs)
    assert [e.ts for e in events] == sorted(e.ts for e in events)
    assert [e.kind for e in journal.events(run_id, kinds=["hook"])] == ["hook", "hook"]


def test_events_of_two_runs_do_not_mix(journal):
    first, second = journal.start_run("01"), journal.start_run("02")
    journal.record(first, EventRecord(kind="warning", message="one"))
    journal.record(second, EventRecord(kind="warning", message="two"))
    assert [e.message for e in journal.events(first, kinds=["warning"])] == ["one"]
    assert [e.message for e in journal.events(second, kinds=["warning"])] == ["two"]


def test_event_kinds_are_checked():
    assert {
        "native_hook",
        "native_selection",
        "contribution",
        "process",
        "agent_call",
        "checkpoint",
        "answer",
        "check",
    } <= set(EVENT_KINDS)
    assert len(EVENT_KINDS) == 25
    with pytest.raises(ValueError):
        EventRecord(kind="transitoin")  # type: ignore[arg-type]


def test_events_are_append_only(tmp_path):
    with Journal.open(tmp_path) as journal:
        journal.start_run("01")
    conn = raw(tmp_path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET kind = 'warning'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM events")


def test_recording_for_an_unknown_run_is_a_clear_error(journal):
    with pytest.raises(JournalError, match="no run 'nope'"):
        journal.record("nope", EventRecord(kind="warning"))


def test_a_task_started_again_while_running_is_a_new_attempt(journal):
    run_id = journal.start_run("01")
    journal.wave_started(run_id, 1, [("01-01:1", "01-01"), ("01-01:2", "01-01")])
    assert journal.task_started(run_id, "01-01:1") == 1
    # The process died here; the resumed run dispatches the in-flight task again.
    assert journal.task_started(run_id, "01-01:1") == 2
    row = journal.task_finished(run_id, "01-01:1")
    assert (row.status, row.attempt) == ("done", 2)
    started = journal.events(run_id, kinds=["task_started"])
    assert [e.data["attempt"] for e in started] == [1, 2]
    assert started[1].data["previous_status"] == "running"
    [finished] = journal.events(run_id, kinds=["task_finished"])
    assert (finished.outcome, finished.data["attempt"], finished.plan_id) == ("done", 2, "01-01")
    assert finished.duration_ms == 1000  # from the attempt's start, one clock step earlier


def test_a_failed_task_can_be_retried_but_a_done_task_is_never_rerun(journal):
    run_id = journal.start_run("01")
    journal.task_started(run_id, "t1", plan_id="p", wave=1)
    journal.task_finished(run_id, "t1", status="failed", message="exit 1")
    assert journal.task_started(run_id, "t1") == 2
    journal.task_finished(run_id, "t1")
    with pytest.raises(JournalError, match="already done"):
        journal.task_started(run_id, "t1")
    [task] = journal.tasks(run_id)
    assert (task.status, task.attempt, task.plan_id, task.wave) == ("done", 2, "p", 1)


def test_wave_start_registers_pending_tasks_idempotently(journal):
    run_id = journal.start_run("01")
    journal.wave_started(run_id, 1, [("a:1", "a"), ("b:1", "b")])
    journal.task_started(run_id, "a:1")
    journal.task_finished(run_id, "a:1")
    # Re-entering the wave after a resume must not reset finished work.
    journal.wave_started(run_id, 1, [("a:1", "a"), ("b:1", "b")])
    journal.wave_started(run_id, 2, [("c:1", "c")])
    assert [(t.task_key, t.wave, t.status) for t in journal.tasks(run_id)] == [
        ("a:1", 1, "done"),
        ("b:1", 1, "pending"),
        ("c:1", 2, "pending"),
    ]
    first = journal.events(run_id, kinds=["wave_started"])[0]
    assert first.data == {"plans": ["a", "b"], "tasks": ["a:1", "b:1"]}


def test_unfinished_run_is_the_latest_resumable_one(journal):
    assert journal.unfinished_run() is None
    shipped = journal.start_run("01")
    journal.finish_run(shipped, "shipped")
    assert journal.unfinished_run("01") is None
    crashed = journal.start_run("01")  # never finished: its process died
    other_phase = journal.start_run("02")
    found = journal.unfinished_run("01")
    assert found is not None and found.id == crashed
    latest = journal.unfinished_run()
    assert latest is not None and latest.id == other_phase
    journal.finish_run(other_phase, "halted", "gate cap-x blocked")
    halted = journal.unfinished_run("02")
    assert halted is not None and halted.halt_reason == "gate cap-x blocked"
    journal.finish_run(crashed, "failed", "resolver failed")
    assert journal.unfinished_run("01") is None


def test_finish_run_sets_status_end_and_reason(journal):
    run_id = journal.start_run("01")
    journal.finish_run(run_id, "halted", "gate blocked")
    run = journal.get_run(run_id)
    assert run is not None
    assert (run.status, run.halt_reason, run.ended_at) == (
        "halted",
        "gate blocked",
        "2026-01-02T03:04:07.000Z",
    )
    last = journal.events(run_id)[-1]
    assert (last.kind, last.outcome, last.message) == ("run_finished", "halted", "gate blocked")


def test_resume_takes_over_and_records_in_flight_tasks_and_input_changes(journal):
    run_id = journal.start_run("01", inputs_digest={"PLAN.md": "aaa", "old.md": "ccc"})
    journal.task_started(run_id, "t1")
    journal.task_started(run_id, "t2")
    journal.task_finished(run_id, "t2")
    journal.finish_run(run_id, "paused", "interrupted")
    run = journal.resume_run(run_id, inputs_digest={"PLAN.md": "bbb", "new.md": "ddd"})
    assert (run.status, run.ended_at, run.halt_reason) == ("running", None, None)
    assert run.inputs_digest == {"PLAN.md": "bbb", "new.md": "ddd"}
    resumed = journal.events(run_id)[-1]
    assert resumed.kind == "run_resumed"
    assert resumed.data["in_flight"] == ["t1"]
    assert resumed.data["previous_status"] == "paused"
    assert resumed.data["inputs_changed"] == [
        "changed: PLAN.md",
        "added: new.md",
        "removed: old.md",
    ]
    journal.finish_run(run_id, "shipped")
    with pytest.raises(JournalError, match="already shipped"):
        journal.resume_run(run_id)


def test_find_run_accepts_a_unique_prefix(journal):
    first = journal.start_run("01", run_id="01AAAA0000")
    journal.start_run("01", run_id="01AAAB0000")
    found = journal.find_run("01aaaa")
    assert found.id == first
    with pytest.raises(JournalError, match="matches 2 runs"):
        journal.find_run("01AAA")
    with pytest.raises(JournalError, match="no run 'ZZ'"):
        journal.find_run("ZZ")
    with pytest.raises(JournalError, match="no run '%'"):
        journal.find_run("%")


def test_runs_and_latest_run_are_in_start_order(journal):
    ids = [journal.start_run(phase) for phase in ("01", "02", "03")]
    assert [run.id for run in journal.runs()] == ids
    latest = journal.latest_run()
    assert latest is not None and latest.id == ids[-1]


def test_threads_can_record_concurrently(journal):
    run_id = journal.start_run("01")

    def work(plan: str) -> None:
        for n in range(20):
            key = f"{plan}:{n}"
            journal.task_started(run_id, key, plan_id=plan, wave=1)
            journal.task_finished(run_id, key)

    threads = [threading.Thread(target=work, args=(f"p{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    tasks = journal.tasks(run_id)
    assert len(tasks) == 80 and {t.status for t in tasks} == {"done"}
    assert len(journal.events(run_id, kinds=["task_finished"])) == 80


def test_a_second_connection_reads_while_a_writer_is_open(tmp_path):
    with Journal.open(tmp_path) as writer:
        run_id = writer.start_run("01")
        with Journal.open(tmp_path, create=False) as reader:
            writer.record(run_id, EventRecord(kind="warning", message="seen"))
            assert reader.events(run_id)[-1].message == "seen"


class _Signal(BaseException):
    """What a SIGTERM handler raises (`machine.signals.Terminated`): at any call's return."""


class _SignalAfter:
    """The journal's connection, with a signal landing right after the `n`-th statement."""

    def __init__(self, conn: sqlite3.Connection, n: int) -> None:
        self.conn, self.left = conn, n

    def execute(self, *args):
        cursor = self.conn.execute(*args)
        self.left -= 1
        if self.left == 0:
            raise _Signal
        return cursor

    def __getattr__(self, name):
        return getattr(self.conn, name)


def test_a_signal_after_any_statement_of_a_write_loses_nothing_else(tmp_path):
    """A signal may land after any statement of a transaction (BEGIN, a write, the seal, the
    COMMIT): the write is then whole or absent, the run's seal still holds, and the next write
    (the halt a terminated run records) goes through."""
    n = 1
    while True:
        project = tmp_path / str(n)
        with Journal.open(project, clock=StepClock()) as journal:
            run_id = journal.start_run("01", state=["plan"])
            conn, journal._conn = journal._conn, _SignalAfter(journal._conn, n)
            try:
                journal.record(run_id, EventRecord(kind="point", point="plan:pre"), state=["x"])
                interrupted = False
            except _Signal:
                interrupted = True
            journal._conn = conn
            journal.record(run_id, EventRecord(kind="warning", message="halted"))
            kinds = [e.kind for e in journal.events(run_id)]
            assert kinds in (["run_started", "warning"], ["run_started", "point", "warning"])
            run = journal.get_run(run_id)
            assert run is not None and run.state == (["x"] if "point" in kinds else ["plan"])
            journal.verify_run(run_id)
        if not interrupted:
            break
        n += 1
    assert n > 3  # the write's statements were each cut short once
