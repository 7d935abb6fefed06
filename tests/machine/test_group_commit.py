"""Group commit of task ends (JournalRecorder.task_finished): ends that arrive while another
commits are committed together, one FULL transaction for the group; each call returns only
once its own end is committed, and a failed group commit fails every end in it."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager

import pytest

from looprail.machine.record import JournalRecorder
from looprail.store import Journal


def slow_commits(journal, pause_s: float) -> list[str]:
    """Make each transaction take `pause_s` longer (a slow fsync); returns the statements run,
    in which each commit is one "COMMIT"."""
    statements: list[str] = []
    real = journal.transaction

    @contextmanager
    def transaction():
        with real():
            yield
            time.sleep(pause_s)

    journal.transaction = transaction
    journal._conn.set_trace_callback(statements.append)
    return statements


def test_concurrent_ends_share_commits_and_each_is_durable_on_return(tmp_path):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("1", state=["execute"])
        recorder = JournalRecorder(journal, run_id)
        keys = [f"01-{i:02d}/T1" for i in range(8)]
        for key in keys:
            recorder.task_started(key, plan_id=key[:5], wave=1)
        commits = slow_commits(journal, 0.2)
        gate = threading.Barrier(len(keys))
        seen: dict[str, set[str]] = {}

        def finish(key: str) -> None:
            gate.wait()
            recorder.task_finished(key, status="done", duration_ms=1)
            # Through a connection of its own: only what is committed.
            with sqlite3.connect(tmp_path / ".looprail" / "journal.sqlite") as other:
                rows = other.execute("SELECT task_key FROM tasks WHERE status='done'")
                seen[key] = {k for (k,) in rows}

        threads = [threading.Thread(target=finish, args=(k,)) for k in keys]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert all(key in seen[key] for key in keys)  # committed before its call returned
        journal._conn.set_trace_callback(None)
        assert commits.count("COMMIT") < len(keys)  # grouped: 8 ends, fewer commits
        assert recorder.done_tasks() == set(keys)
    with Journal.open(tmp_path, create=False) as journal:  # and durable
        assert {t.task_key: t.status for t in journal.tasks(run_id)} == dict.fromkeys(keys, "done")


def test_a_failed_group_commit_fails_every_end_in_it(tmp_path):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("1", state=["execute"])
        recorder = JournalRecorder(journal, run_id)
        for key in ("a", "b"):
            recorder.task_started(key, plan_id="p", wave=1)
        real = journal.task_finished

        def broken(run, key, **kw):
            if key == "b":
                raise OSError("disk full")
            return real(run, key, **kw)

        journal.task_finished = broken
        errors: dict[str, BaseException] = {}
        recorder._lock.acquire()  # hold the lock: both ends queue, then commit as one group
        try:

            def finish(key: str) -> None:
                try:
                    recorder.task_finished(key, status="done", duration_ms=1)
                except OSError as exc:
                    errors[key] = exc

            threads = [threading.Thread(target=finish, args=(k,)) for k in ("a", "b")]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 10
            while len(recorder._finishing) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            recorder._lock.release()
        for t in threads:
            t.join(timeout=10)
        assert set(errors) == {"a", "b"}  # "a" was in the failed transaction too
        assert recorder.done_tasks() == set()
        assert {t.task_key: t.status for t in journal.tasks(run_id)} == {
            "a": "running",
            "b": "running",
        } or pytest.fail(str({t.task_key: t.status for t in journal.tasks(run_id)}))
