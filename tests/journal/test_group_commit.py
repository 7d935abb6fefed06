"""Group commit of task finishes (`JournalRecorder.task_finished`): finishes that arrive while a
commit is syncing share the next one, and every caller returns only once its own row is
committed, so a finished task never runs again."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager

import pytest

from looprail.journal import Journal, JournalError, journal_path
from looprail.journal.recorder import JournalRecorder
from tests.support.journal import commits_failing


class SlowCommits:
    """The real journal, with each outer commit slowed down like a slow fsync, counted, and
    with a hook that can refuse one task's finish."""

    def __init__(self, journal: Journal, refuse: str | None = None):
        self.journal = journal
        self.commits = 0
        self.refuse = refuse
        self._depth = 0

    @contextmanager
    def transaction(self, **kwargs):
        outer = self._depth == 0
        self._depth += 1
        try:
            with self.journal.transaction(**kwargs):
                yield
                if outer:
                    time.sleep(0.05)  # the fsync every finish waits for
        finally:
            self._depth -= 1
        if outer:
            self.commits += 1

    def task_finished(self, run_id, key, **kwargs):
        if key == self.refuse:
            raise JournalError(f"refused {key}")
        return self.journal.task_finished(run_id, key, **kwargs)

    def __getattr__(self, name):
        return getattr(self.journal, name)


def _committed_status(project, run_id: str, key: str) -> str | None:
    db = sqlite3.connect(journal_path(project))
    try:
        row = db.execute(
            "SELECT status FROM tasks WHERE run_id = ? AND task_key = ?", (run_id, key)
        ).fetchone()
    finally:
        db.close()
    return row[0] if row else None


def _finish_together(recorder: JournalRecorder, project, run_id: str, keys: list[str]):
    seen: dict[str, str | None] = {}
    errors: dict[str, BaseException] = {}
    start = threading.Barrier(len(keys))

    def finish(key: str) -> None:
        start.wait()
        try:
            recorder.task_finished(key, status="done", duration_ms=1)
        except BaseException as exc:
            errors[key] = exc
            return
        # Returned: the row is committed (another connection reads it).
        seen[key] = _committed_status(project, run_id, key)

    threads = [threading.Thread(target=finish, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return seen, errors


def test_concurrent_finishes_share_commits_and_each_returns_committed(tmp_path):
    keys = [f"01-0{i}/T1" for i in range(8)]
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        journal.wave_started(run_id, 1, [(k, k.split("/")[0]) for k in keys])
        for key in keys:
            journal.task_started(run_id, key)
        slow = SlowCommits(journal)
        recorder = JournalRecorder(slow, run_id)
        seen, errors = _finish_together(recorder, tmp_path, run_id, keys)
        assert not errors
        assert seen == dict.fromkeys(keys, "done")
        # 8 finishes arriving together: the first commits alone, the rest queue behind it.
        assert 1 <= slow.commits < len(keys)
        assert recorder.done_tasks() == set(keys)
        journal.verify_run(run_id)
        finished = journal.events(run_id, kinds=["task_finished"])
        assert sorted(e.task_id for e in finished) == sorted(keys)


def test_a_refused_finish_fails_only_its_own_caller(tmp_path):
    keys = [f"01-0{i}/T1" for i in range(5)]
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        journal.wave_started(run_id, 1, [(k, k.split("/")[0]) for k in keys])
        slow = SlowCommits(journal, refuse=keys[2])
        recorder = JournalRecorder(slow, run_id)
        seen, errors = _finish_together(recorder, tmp_path, run_id, keys)
        assert set(errors) == {keys[2]} and "refused" in str(errors[keys[2]])
        assert seen == {k: "done" for k in keys if k != keys[2]}
        assert _committed_status(tmp_path, run_id, keys[2]) == "pending"
        journal.verify_run(run_id)


def test_a_failed_group_commit_fails_every_caller_in_it(tmp_path):
    keys = [f"01-0{i}/T1" for i in range(4)]
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        journal.wave_started(run_id, 1, [(k, "01-01") for k in keys])
        recorder = JournalRecorder(journal, run_id)
        # A journal whose commits fail (e.g. the disk is full): nobody may believe they finished.
        with commits_failing(journal):
            seen, errors = _finish_together(recorder, tmp_path, run_id, keys)
        assert set(errors) == set(keys) and not seen
        assert all(_committed_status(tmp_path, run_id, k) == "pending" for k in keys)
        journal.verify_run(run_id)


def test_a_bad_status_is_refused_before_queueing(tmp_path):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        with pytest.raises(ValueError, match="not a finishing task status"):
            JournalRecorder(journal, run_id).task_finished("t", status="running", duration_ms=1)


def _queued(recorder: JournalRecorder, calls) -> tuple[dict, dict]:
    """Run `calls` (name → function) on threads while the writer is held off (as while it
    commits), so every one of them queues; then let it go: it commits them all in one batch."""
    results: dict = {}
    errors: dict = {}

    def run(name, fn):
        try:
            results[name] = fn()
        except BaseException as exc:
            errors[name] = exc

    recorder.close()  # stops the writer; what is held stays queued
    with recorder._cv:  # a writer that is not running yet: callers queue and wait
        recorder._writer = threading.Thread(target=recorder._write_loop, daemon=True)
    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for t in threads:
        t.start()
    wait_until = time.monotonic() + 10
    while recorder._waiting < len(calls) and time.monotonic() < wait_until:
        time.sleep(0.01)
    assert recorder._waiting == len(calls)
    recorder._writer.start()
    for t in threads:
        t.join(30)
    return results, errors


def test_held_starts_are_written_together_by_one_relaxed_commit(tmp_path):
    """Starts are held (a start of a done task is refused at once); the flusher writes the
    held ones in one commit without an fsync, with the journal's attempt numbers."""
    keys = [f"01-0{i}/T1" for i in range(5)]
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        journal.wave_started(run_id, 1, [(k, k.split("/")[0]) for k in keys])
        journal.task_started(run_id, keys[0])
        journal.task_finished(run_id, keys[0])  # done: a start of it is refused
        journal.task_started(run_id, keys[1])  # in flight (a crash): its next start is attempt 2
        recorder = JournalRecorder(journal, run_id)
        # Hold the moment, don't race it: at the usual 50 ms a loaded machine can let the
        # flusher commit between two of the four starts.
        recorder.FLUSH_AFTER = 2.0
        recorder.done_tasks()
        statements: list[str] = []
        journal._conn.set_trace_callback(statements.append)
        with pytest.raises(JournalError, match="already done"):
            recorder.task_started(keys[0], plan_id=keys[0][:5], wave=1)
        results = {k: recorder.task_started(k, plan_id=k[:5], wave=1) for k in keys[1:]}
        assert results == {keys[1]: 2, keys[2]: 1, keys[3]: 1, keys[4]: 1}
        wait_until = time.monotonic() + 10
        while _committed_status(tmp_path, run_id, keys[4]) != "running":
            assert time.monotonic() < wait_until
            time.sleep(0.01)
        journal._conn.set_trace_callback(None)
        assert statements.count("COMMIT") == 1  # one commit for the four starts
        assert statements[0] == "PRAGMA synchronous = NORMAL"  # starts only: relaxed
        assert journal.pragma("synchronous") == 2
        rows = {t.task_key: (t.status, t.attempt) for t in journal.tasks(run_id)}
        assert rows[keys[0]] == ("done", 1) and rows[keys[1]] == ("running", 2)
        recorder.flush()
        journal.verify_run(run_id)


def test_a_finish_makes_the_commit_of_held_starts_full(tmp_path):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        journal.wave_started(run_id, 1, [("a", "p1"), ("b", "p2")])
        journal.task_started(run_id, "a")
        recorder = JournalRecorder(journal, run_id)
        recorder.done_tasks()
        statements: list[str] = []
        journal._conn.set_trace_callback(statements.append)
        assert recorder.task_started("b", plan_id="p2", wave=1) == 1
        recorder.task_finished("a", status="done", duration_ms=1)
        journal._conn.set_trace_callback(None)
        assert statements.count("COMMIT") == 1
        assert not any("synchronous" in s for s in statements)  # FULL: the finish must sync
        assert recorder.done_tasks() == {"a"}
        assert _committed_status(tmp_path, run_id, "b") == "running"
        recorder.flush()
        journal.verify_run(run_id)


def test_finishes_queued_behind_a_commit_carry_their_held_starts(tmp_path):
    """Starts held on several threads, their finishes queued while a commit is in flight:
    one commit writes every start and finish, in order, each task once."""
    keys = [f"01-0{i}/T1" for i in range(4)]
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        journal.wave_started(run_id, 1, [(k, k.split("/")[0]) for k in keys])
        recorder = JournalRecorder(journal, run_id)
        recorder.done_tasks()
        for k in keys:
            assert recorder.task_started(k, plan_id=k[:5], wave=1) == 1
        statements: list[str] = []
        journal._conn.set_trace_callback(statements.append)
        results, errors = _queued(
            recorder,
            {
                k: (lambda k=k: recorder.task_finished(k, status="done", duration_ms=1))
                for k in keys
            },
        )
        journal._conn.set_trace_callback(None)
        assert not errors
        assert statements.count("COMMIT") == 1
        assert recorder.done_tasks() == set(keys)
        events = journal.events(run_id, kinds=["task_started", "task_finished"])
        for k in keys:
            mine = [e.kind for e in events if e.task_id == k]
            assert mine == ["task_started", "task_finished"]
        recorder.flush()
        journal.verify_run(run_id)
