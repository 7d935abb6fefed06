"""The incremental seal (journal/seal.py): any random history of writes verifies, any edit made
outside looprail is refused, and a commit hashes only the rows it changed.

Edits are what someone with an SQLite tool and no key can do: change, add or delete a task
row, change, delete, reorder or truncate event rows (dropping the append-only triggers first),
change the run row, rewrite or drop the seal and chain rows, or put back rows and seal rows
from an earlier state of the same run (a rollback of part of the run)."""

from __future__ import annotations

import sqlite3
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.journal import EventRecord, Journal, JournalError, journal_path
from tests.support import examples

# One write of a random history: (operation, task number).
OPS = st.lists(
    st.tuples(
        st.sampled_from(["wave", "start", "finish", "fail", "event", "inputs", "rollback"]),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=25,
)


def _history(journal: Journal, ops: list[tuple[str, int]]) -> str:
    """Play `ops` on a new run (skipping what the journal refuses); return the run id."""
    run_id = journal.start_run("01", state=["execute"])
    waves = 0
    for op, n in ops:
        key = f"01-01/T{n}"
        try:
            if op == "wave":
                waves += 1
                journal.wave_started(run_id, waves, [(key, "01-01"), (f"01-02/T{n}", "01-02")])
            elif op == "start":
                journal.task_started(run_id, key, plan_id="01-01", wave=waves or None)
            elif op in ("finish", "fail"):
                status = "done" if op == "finish" else "failed"
                journal.task_finished(run_id, key, status=status, duration_ms=n)
            elif op == "event":
                journal.record(run_id, EventRecord(kind="transition", data={"n": n}), state=[op])
            elif op == "inputs":
                journal.update_inputs(run_id, {f"f{n}": "0" * 64})
            else:  # a transaction that fails halfway: nothing of it may count
                with pytest.raises(RuntimeError), journal.transaction():
                    journal.task_started(run_id, f"01-09/T{n}", plan_id="01-09")
                    with journal.transaction():  # a nested block that commits (a savepoint)
                        journal.record(run_id, EventRecord(kind="warning", message="w"))
                    raise RuntimeError("boom")
        except JournalError:  # e.g. starting a task that is done
            pass
    return run_id


def _tamper(db: sqlite3.Connection, run_id: str, how: str, pick: int) -> bool:
    """Apply one edit; False when this journal has nothing it applies to."""
    db.execute("DROP TRIGGER IF EXISTS events_no_update")
    db.execute("DROP TRIGGER IF EXISTS events_no_delete")
    tasks = db.execute("SELECT task_key FROM tasks WHERE run_id = ? ORDER BY task_key", (run_id,))
    keys = [row[0] for row in tasks]
    seqs = [
        row[0]
        for row in db.execute("SELECT seq FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
    ]
    if how == "task-status":
        if not keys:
            return False
        key = keys[pick % len(keys)]
        db.execute(
            "UPDATE tasks SET status = CASE status WHEN 'done' THEN 'pending' ELSE 'done' END "
            "WHERE run_id = ? AND task_key = ?",
            (run_id, key),
        )
    elif how == "task-attempt":
        if not keys:
            return False
        db.execute(
            "UPDATE tasks SET attempt = attempt + 1 WHERE run_id = ? AND task_key = ?",
            (run_id, keys[pick % len(keys)]),
        )
    elif how == "task-deleted":
        if not keys:
            return False
        db.execute(
            "DELETE FROM tasks WHERE run_id = ? AND task_key = ?", (run_id, keys[pick % len(keys)])
        )
    elif how == "task-planted":
        db.execute(
            "INSERT INTO tasks (run_id, task_key, plan_id, wave, status, attempt) "
            "VALUES (?, 'planted', '01-01', 1, 'done', 1)",
            (run_id,),
        )
    elif how == "event-edited":
        db.execute(
            "UPDATE events SET outcome = 'approved' WHERE seq = ?", (seqs[pick % len(seqs)],)
        )
    elif how == "event-deleted":
        db.execute("DELETE FROM events WHERE seq = ?", (seqs[pick % len(seqs)],))
    elif how == "events-reordered":
        if len(seqs) < 2:
            return False
        a = seqs[pick % (len(seqs) - 1)]
        b = seqs[pick % (len(seqs) - 1) + 1]
        rows = [
            db.execute("SELECT * FROM events WHERE seq = ?", (seq,)).fetchone()[1:]
            for seq in (a, b)
        ]
        if rows[0] == rows[1]:  # two events alike but for seq (same millisecond): no edit
            return False
        db.execute("UPDATE events SET seq = -1 WHERE seq = ?", (a,))
        db.execute("UPDATE events SET seq = ? WHERE seq = ?", (a, b))
        db.execute("UPDATE events SET seq = ? WHERE seq = -1", (b,))
    elif how == "tail-truncated":
        cut = seqs[-1 - pick % len(seqs)]
        db.execute("DELETE FROM events WHERE run_id = ? AND seq >= ?", (run_id, cut))
    elif how == "event-appended":
        db.execute(
            "INSERT INTO events (run_id, ts, kind) VALUES (?, '2026-01-01T00:00:00.000Z', 'halted')",
            (run_id,),
        )
    elif how == "run-edited":
        db.execute("UPDATE runs SET state = '[\"ship\"]' WHERE id = ?", (run_id,))
    elif how == "seal-dropped":
        db.execute("DELETE FROM meta WHERE key = ?", (f"seal:{run_id}",))
    elif how == "seal-rewritten":
        db.execute(
            "UPDATE meta SET value = 'v2:' || substr(value, 4, 10) || 'ffff' WHERE key = ?",
            (f"seal:{run_id}",),
        )
    elif how == "chain-rewritten":
        db.execute("UPDATE meta SET value = 'x' || value WHERE key = ?", (f"chain:{run_id}",))
    else:
        raise AssertionError(how)
    return True


EDITS = [
    "task-status",
    "task-attempt",
    "task-deleted",
    "task-planted",
    "event-edited",
    "event-deleted",
    "events-reordered",
    "tail-truncated",
    "event-appended",
    "run-edited",
    "seal-dropped",
    "seal-rewritten",
    "chain-rewritten",
]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, how=st.sampled_from(EDITS), pick=st.integers(0, 1000))
def test_any_history_verifies_and_any_edit_is_refused(ops, how, pick):
    with tempfile.TemporaryDirectory(prefix="looprail-seal-") as tmp:
        with Journal.open(tmp) as journal:
            run_id = _history(journal, ops)
            journal.verify_run(run_id)
        with Journal.open(tmp) as journal:  # a new connection recomputes everything
            journal.verify_run(run_id)
        db = sqlite3.connect(journal_path(tmp))
        applied = _tamper(db, run_id, how, pick)
        db.commit()
        db.close()
        with Journal.open(tmp) as journal:
            if not applied:
                journal.verify_run(run_id)
                return
            with pytest.raises(JournalError) as exc:
                journal.verify_run(run_id)
    message = str(exc.value)
    assert "\n" not in message and "--new" in message
    assert "seal" in message


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=OPS, after=OPS, pick=st.integers(0, 1000))
def test_rows_put_back_from_an_earlier_state_are_refused(before, after, pick):
    """A copy of the file taken mid-run gives old task rows and the seal rows that matched
    them; putting them back beside the newer events (or the reverse) is refused."""
    with tempfile.TemporaryDirectory(prefix="looprail-seal-") as tmp:
        path = journal_path(tmp)
        with Journal.open(tmp) as journal:
            run_id = _history(journal, before)
        old = sqlite3.connect(path)
        old_tasks = old.execute("SELECT * FROM tasks WHERE run_id = ?", (run_id,)).fetchall()
        old_meta = old.execute("SELECT * FROM meta WHERE key LIKE '%:' || ?", (run_id,)).fetchall()
        old.close()
        with Journal.open(tmp) as journal:
            _play_more(journal, run_id, after)
        db = sqlite3.connect(path)
        new_tasks = db.execute("SELECT * FROM tasks WHERE run_id = ?", (run_id,)).fetchall()
        if sorted(new_tasks) == sorted(old_tasks):
            db.close()
            return  # the rows came back to what they were: nothing to put back
        db.execute("DELETE FROM tasks WHERE run_id = ?", (run_id,))
        db.executemany("INSERT INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?)", old_tasks)
        if pick % 2:  # and the seal rows of that time, too
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", old_meta)
        db.commit()
        db.close()
        with Journal.open(tmp) as journal, pytest.raises(JournalError, match="seal"):
            journal.verify_run(run_id)


def _play_more(journal: Journal, run_id: str, ops: list[tuple[str, int]]) -> None:
    for op, n in ops:
        key = f"01-01/T{n}"
        try:
            if op in ("finish", "fail"):
                journal.task_finished(run_id, key, status="done" if op == "finish" else "failed")
            elif op in ("start", "rollback"):
                journal.task_started(run_id, key, plan_id="01-01")
            elif op == "wave":
                journal.wave_started(run_id, 9, [(f"01-03/T{n}", "01-03")])
            else:
                journal.record(run_id, EventRecord(kind="transition"))
        except JournalError:
            pass


def test_two_connections_writing_one_run_keep_its_seal_right(tmp_path):
    """The task digest is kept in memory per connection; a connection whose run was written by
    another one meanwhile recomputes it (the seal in the file is not the one it wrote)."""
    with Journal.open(tmp_path) as a, Journal.open(tmp_path) as b:
        run_id = a.start_run("01")
        a.wave_started(run_id, 1, [("t1", "p"), ("t2", "p"), ("t3", "p")])
        b.task_started(run_id, "t1")
        a.task_started(run_id, "t2")
        b.task_finished(run_id, "t1")
        a.task_finished(run_id, "t2")
        b.task_started(run_id, "t3")
        a.verify_run(run_id)
        b.verify_run(run_id)


def test_a_seal_of_the_older_format_is_refused_with_its_own_reason(tmp_path):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
    db = sqlite3.connect(journal_path(tmp_path))
    db.execute("UPDATE meta SET value = ? WHERE key = ?", ("ab" * 32, f"seal:{run_id}"))
    db.commit()
    db.close()
    with Journal.open(tmp_path) as journal, pytest.raises(JournalError) as exc:
        journal.verify_run(run_id)
    message = str(exc.value)
    assert "sealed by an older looprail" in message and "--new" in message
    assert "\n" not in message


def test_the_task_digest_is_never_stored_in_the_journal(tmp_path):
    """Stored, the running sum would show each row's MAC difference commit by commit, and
    enough of those can be combined into a forgery; only HMAC outputs are in the file."""
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        journal.wave_started(run_id, 1, [("t1", "p")])
        journal.task_started(run_id, "t1")
    from looprail.journal.seal import task_digest, user_key

    db = sqlite3.connect(journal_path(tmp_path))
    db.row_factory = sqlite3.Row
    digest = task_digest(user_key(), [dict(r) for r in db.execute("SELECT * FROM tasks")])
    db.row_factory = None
    stored = " ".join(value for (value,) in db.execute("SELECT value FROM meta"))
    db.close()
    assert digest and digest not in stored


def test_a_commit_hashes_only_the_rows_it_changed(tmp_path, monkeypatch):
    """O(1) per commit at any run size: finishing one task of a 600-task run computes two task
    MACs (the row before and the row after), not one per row."""
    from looprail.journal import seal

    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        keys = [(f"t{i}", f"p{i // 5}") for i in range(600)]
        journal.wave_started(run_id, 1, keys)
        journal.task_started(run_id, "t0")
        calls = []
        real = seal.task_mac
        monkeypatch.setattr(seal, "task_mac", lambda key, row: calls.append(1) or real(key, row))
        journal.task_finished(run_id, "t0")
        journal.record(run_id, EventRecord(kind="transition"), state=["verify"])
        assert len(calls) == 2
        journal.verify_run(run_id)  # verification is the one pass over every row
        assert len(calls) == 2 + 600


def test_swapping_events_alike_but_for_seq_is_no_edit():
    """Two events written in the same millisecond with the same content differ only in `seq`:
    swapping them changes nothing, so the property above must not count it as an edit (it
    did, and failed, when the clock happened to land both in one millisecond)."""
    from datetime import UTC, datetime

    frozen = datetime(2026, 1, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory(prefix="looprail-seal-") as tmp:
        with Journal.open(tmp, clock=lambda: frozen) as journal:
            run_id = _history(journal, [("event", 1), ("event", 1)])
        db = sqlite3.connect(journal_path(tmp))
        assert not _tamper(db, run_id, "events-reordered", 1)  # seqs 2 and 3: alike
        assert _tamper(db, run_id, "events-reordered", 0)  # run_started and an event: unlike
        db.commit()
        db.close()
        with Journal.open(tmp) as journal, pytest.raises(JournalError):
            journal.verify_run(run_id)
