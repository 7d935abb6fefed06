"""One fsync per task: a task's start commits with synchronous=NORMAL (durable with the next
FULL commit), its finish with FULL; the in-memory done set follows the journal."""

from __future__ import annotations

from looprail.journal import Journal
from looprail.journal.recorder import JournalRecorder


def test_task_start_is_held_and_finish_is_one_full_commit(tmp_path):
    """A task's start writes nothing of its own: its row and event go first into the next
    commit, here its finish (FULL), so a short task costs one fsync."""
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("1", state=["execute"])
        recorder = JournalRecorder(journal, run_id)
        recorder.done_tasks()
        statements: list[str] = []
        journal._conn.set_trace_callback(statements.append)
        recorder.task_started("01-01/T1", plan_id="01-01", wave=1)
        started = list(statements)
        statements.clear()
        recorder.task_finished("01-01/T1", status="done", duration_ms=1)
        finished = list(statements)
        journal._conn.set_trace_callback(None)
        assert journal.pragma("synchronous") == 2
        assert started == []  # held
        # The finish: one FULL commit (no pragma change) holding the start and the finish.
        assert finished.count("COMMIT") == 1 and not any("synchronous" in s for s in finished)
        assert recorder.done_tasks() == {"01-01/T1"} and recorder.done_count() == 1
        rows = {t.task_key: (t.status, t.attempt) for t in journal.tasks(run_id)}
        assert rows == {"01-01/T1": ("done", 1)}
        kinds = [e.kind for e in journal.events(run_id, kinds=["task_started", "task_finished"])]
        assert kinds == ["task_started", "task_finished"]
        journal.verify_run(run_id)


def test_done_set_is_read_once_then_kept_in_memory(tmp_path):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("1", state=["execute"])
        journal.task_started(run_id, "a", plan_id="p", wave=1)
        journal.task_finished(run_id, "a", status="done")
        recorder = JournalRecorder(journal, run_id)
        assert recorder.done_tasks() == {"a"}  # read from the journal (a resumed run)
        recorder.task_started("b", plan_id="p", wave=1)
        recorder.task_finished("b", status="done", duration_ms=1)
        recorder.task_started("c", plan_id="p", wave=1)
        recorder.task_finished("c", status="failed", duration_ms=1)
        assert recorder.done_tasks() == {"a", "b"}
        fresh = JournalRecorder(journal, run_id)
        assert fresh.done_tasks() == recorder.done_tasks()


def test_sql_headers_match_the_report_models(tmp_path):
    from looprail.journal import EventRecord, summary
    from looprail.journal.report import build_report, refusal_of

    with Journal.open(tmp_path) as journal:
        first = journal.start_run("1", state=["idle"])
        journal.wave_started(first, 1, [("01-01/T1", "01-01"), ("01-01/T2", "01-01")])
        journal.task_started(first, "01-01/T1", plan_id="01-01", wave=1)
        journal.task_finished(first, "01-01/T1", status="done", duration_ms=5)
        journal.record(
            first, EventRecord(kind="halted", point="execute:pre", cap_id="x/gate", message="no")
        )
        journal.finish_run(first, "halted", "blocked")
        second = journal.start_run("2", state=["idle"])
        journal.wave_started(second, 3, [("02-01/T1", "02-01")])
        reports = [build_report(journal, run.id) for run in journal.runs()]
        expected = [report["run"] for report in reports]
        refusals = {report["run"]["id"]: refusal_of(report) for report in reports}
    conn = summary.open_journal(tmp_path)
    try:
        assert summary.headers(conn) == expected
        assert summary.headers(conn, latest=True) == [h for h in expected if h["id"] == second]
        assert {
            r: summary.refusal(conn, r, h["status"]) for r, h in ((h["id"], h) for h in expected)
        } == refusals
        assert refusals[first] == ("execute:pre", "x/gate")
        assert summary.last_wave(conn, second) == 3
    finally:
        conn.close()


def test_wave_start_and_process_events_are_relaxed_transitions_full(tmp_path):
    """A wave's start (pending rows) and a child's pid commit without an fsync of their own;
    a state change and `wave_finished` commit FULL."""
    from looprail.journal import EventRecord

    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("1", state=["execute"])
        recorder = JournalRecorder(journal, run_id)
        statements: list[str] = []
        journal._conn.set_trace_callback(statements.append)

        def syncs(write) -> list[str]:
            statements.clear()
            write()
            assert "COMMIT" in statements
            return [s for s in statements if "synchronous" in s]

        relaxed = ["PRAGMA synchronous = NORMAL", "PRAGMA synchronous = FULL"]
        assert syncs(lambda: recorder.wave_started(1, [("01-01/T1", "01-01")])) == relaxed
        process = EventRecord(kind="process", data={"pid": 1, "start": 2})
        assert syncs(lambda: recorder.event(process)) == relaxed
        call = EventRecord(kind="agent_call", outcome="ok", data={"costUsd": 0.01})
        assert syncs(lambda: recorder.event(call)) == relaxed  # a real agent task: one fsync
        assert syncs(lambda: recorder.event(EventRecord(kind="wave_finished", wave=1))) == []
        move = EventRecord(kind="transition", data={"source": "a", "target": "b"})
        assert syncs(lambda: recorder.event(move, state=["verify"])) == []
        journal._conn.set_trace_callback(None)
        assert journal.pragma("synchronous") == 2
        journal.verify_run(run_id)
