"""Each event kind declares its durability once (`looprail.journal.recorder.DURABILITY`), and the
recorder's one writer does what the declaration says: HELD and SOON writes return before
anything is written, RELAXED ones return committed without an fsync of their own, FULL ones
return committed and synced."""

from __future__ import annotations

import pytest

from looprail.journal import EventRecord, Journal
from looprail.journal.models import EVENT_KINDS
from looprail.journal.recorder import DURABILITY, Durability, JournalRecorder, durability


def test_every_event_kind_declares_its_durability():
    assert set(DURABILITY) == set(EVENT_KINDS)


def test_a_state_change_is_full_and_an_unguarded_child_is_relaxed():
    assert durability(EventRecord(kind="hook"), state=["verify"]) is Durability.FULL
    assert durability(EventRecord(kind="process", data={"pid": 1})) is Durability.RELAXED
    guarded = EventRecord(kind="process", data={"pid": 1, "guard_pid": 2})
    assert durability(guarded) is Durability.SOON


# Written through `event` (the task and wave kinds have their own methods, tested elsewhere).
KINDS = sorted(set(EVENT_KINDS) - {"task_started", "task_finished", "wave_started"})


@pytest.mark.parametrize("kind", KINDS)
def test_the_writer_commits_each_kind_as_declared(tmp_path, kind):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("1", state=["execute"])
        recorder = JournalRecorder(journal, run_id)
        before = len(journal.events(run_id, kinds=[kind]))  # start_run wrote a run_started
        recorder.FLUSH_AFTER = 60.0  # a SOON write is not committed by the clock meanwhile
        statements: list[str] = []
        journal._conn.set_trace_callback(statements.append)
        record = EventRecord(kind=kind, data={"pid": 1, "guard_pid": 2})  # type: ignore[arg-type]
        recorder.event(record)
        written = list(statements)
        level = durability(record)
        assert level is DURABILITY[kind]
        if level in (Durability.HELD, Durability.SOON):
            assert written == []
            assert len(journal.events(run_id, kinds=[kind])) == before
        else:
            assert written.count("COMMIT") == 1
            relaxed = "PRAGMA synchronous = NORMAL" in written
            assert relaxed == (level is Durability.RELAXED)
            assert len(journal.events(run_id, kinds=[kind])) == before + 1
        recorder.flush()  # whatever was held is written now, FULL
        journal._conn.set_trace_callback(None)
        assert len(journal.events(run_id, kinds=[kind])) == before + 1
        assert journal.pragma("synchronous") == 2
        journal.verify_run(run_id)
