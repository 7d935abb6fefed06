"""The run journal's writes: every write one `BEGIN IMMEDIATE … COMMIT` (WAL, `synchronous=FULL`),
a state change, its task row and its event together (docs/journal.md, "Guarantees")."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from looprail._version import __version__
from looprail.journal.inputs import diff_inputs
from looprail.journal.models import (
    FINAL_STATUSES,
    EventRecord,
    PlannedTask,
    RunRow,
    TaskRow,
    TaskUpdate,
    iso_utc,
    new_run_id,
)
from looprail.journal.reading import JournalReader, task_row
from looprail.journal.schema import JournalError, connect
from looprail.journal.seal import RunSeals
from looprail.journal.summary import duration_ms as duration
from looprail.journal.summary import journal_file as journal_path

# The statements of the per-task path, as constants (sqlite3 keeps them prepared by their text).
_GET_TASK = "SELECT * FROM tasks WHERE run_id = ? AND task_key = ?"
_START_TASK = (
    "INSERT INTO tasks (run_id, task_key, plan_id, wave, status, attempt, started_at) "
    "VALUES (?, ?, ?, ?, 'running', ?, ?) "
    "ON CONFLICT (run_id, task_key) DO UPDATE SET status = 'running', "
    "attempt = excluded.attempt, started_at = excluded.started_at, ended_at = NULL, "
    "plan_id = coalesce(excluded.plan_id, plan_id), "
    "wave = coalesce(excluded.wave, wave) RETURNING *"
)
_SET_TASK = (
    "INSERT INTO tasks (run_id, task_key, plan_id, wave, status, attempt, ended_at) "
    "VALUES (?, ?, ?, ?, ?, 0, ?) "
    "ON CONFLICT (run_id, task_key) DO UPDATE SET status = excluded.status, "
    "ended_at = excluded.ended_at, "
    "plan_id = coalesce(excluded.plan_id, plan_id), "
    "wave = coalesce(excluded.wave, wave) RETURNING *"
)
_INSERT_EVENT = (
    "INSERT INTO events (run_id, ts, kind, point, wave, plan_id, task_id, cap_id, "
    "hook_kind, outcome, duration_ms, message, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *"
)


class Journal(JournalReader):
    """A project's run journal (`Journal.open(project)`; a context manager). Safe to share
    between threads (one connection behind a lock); other processes may read it (WAL)."""

    def __init__(self, conn: sqlite3.Connection, path: Path, clock: Callable[[], datetime]):
        super().__init__(conn, path)
        self._depth = 0
        self._clock = clock
        self._seals = RunSeals(path, self._sql)  # every commit's seals (journal/seal.py)

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        project: str | Path,
        *,
        create: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> Journal:
        """Open (with `create`, create or migrate) the project's journal (`schema.connect`)."""
        path = journal_path(project)
        return cls(connect(path, create=create), path, clock or (lambda: datetime.now(UTC)))

    @classmethod
    def open_readonly(cls, project: str | Path) -> Journal:
        """Open the project's journal read-only (every write fails): the dashboard's."""
        path = journal_path(project)
        return cls(connect(path, readonly=True), path, lambda: datetime.now(UTC))

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes: everything inside commits together or not at all. Nests (an inner block
        is a savepoint, so a write that fails inside leaves the outer ones)."""
        with self._mutex:
            outer = self._depth == 0
            if outer and self._conn.in_transaction:  # a signal landed between a BEGIN and its try
                self._abandon()
            savepoint = f"sp{self._depth}"
            self._sql("BEGIN IMMEDIATE" if outer else f"SAVEPOINT {savepoint}")
            if not outer:  # what a rollback to the savepoint restores
                saved = self._seals.save()
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._abandon()
                else:
                    self._seals.restore(saved)
                    self._sql(f"ROLLBACK TO {savepoint}")
                    self._sql(f"RELEASE {savepoint}")
                raise
            self._depth -= 1
            if not outer:
                self._sql(f"RELEASE {savepoint}")
                return
            try:
                sealed = self._seals.seal()
                self._sql("COMMIT")
            except BaseException:
                self._abandon()
                raise
            self._seals.committed(sealed)

    @contextmanager
    def relaxed(self) -> Iterator[None]:
        """Commits inside wait for no fsync (`synchronous=NORMAL`): they survive a crash of the
        process, and one of the machine once a later FULL commit has synced the WAL."""
        with self._mutex:
            if self._depth:  # inside a transaction: its own commit decides
                yield
                return
            self._sql("PRAGMA synchronous = NORMAL")
            try:
                yield
            finally:
                self._sql("PRAGMA synchronous = FULL")

    # -- runs --------------------------------------------------------------------------------

    def start_run(
        self,
        phase: str,
        *,
        state: Sequence[str] = (),
        machine_config: Mapping[str, Any] | None = None,
        inputs_digest: Mapping[str, str] | None = None,
        run_id: str | None = None,
    ) -> str:
        """Create a `running` run owned by this process, journal `run_started`, return its id."""
        now = self._clock()
        run_id = run_id or new_run_id(now)
        config = dict(machine_config or {})
        data = {"phase": str(phase), "state": list(state), "machine_config": config}
        with self.transaction():
            self._sql(
                "INSERT INTO runs (id, phase, status, started_at, state, machine_config, "
                "inputs_digest, pid, host) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (run_id, data["phase"], iso_utc(now), _dumps(data["state"]),
                 _dumps(data["machine_config"]), _sorted_json(inputs_digest or {}), os.getpid(),
                 socket.gethostname()),
            )  # fmt: skip
            self._seals.run_changed(run_id)
            event = EventRecord(kind="run_started", data={**data, "looprail": __version__})
            self._insert_event(run_id, iso_utc(now), event)  # (which looprail ran it)
        return run_id

    def resume_run(self, run_id: str, *, inputs_digest: Mapping[str, str] | None = None) -> RunRow:
        """Take over a resumable run: this process owns it, status `running`; `run_resumed`
        records the previous owner, the tasks in flight (run again) and which inputs changed."""
        with self.transaction():
            run = self._require_run(run_id)
            if run.status in FINAL_STATUSES:
                raise JournalError(
                    f"{self.path}: run {run_id} already {run.status}; nothing to resume"
                )
            in_flight = [t.task_key for t in self.tasks(run_id) if t.status == "running"]
            data: dict[str, object] = {
                "previous_status": run.status,
                "previous_pid": run.pid,
                "previous_host": run.host,
                "in_flight": in_flight,
                "looprail": __version__,  # a resume may be by a newer looprail
            }
            digest = run.inputs_digest
            if inputs_digest is not None:
                digest = dict(sorted(inputs_digest.items()))
                data["inputs_changed"] = diff_inputs(run.inputs_digest, digest)
            now = iso_utc(self._clock())
            self._seals.run_changed(run_id)
            self._sql(
                "UPDATE runs SET status = 'running', ended_at = NULL, halt_reason = NULL, "
                "pid = ?, host = ?, inputs_digest = ? WHERE id = ?",
                (os.getpid(), socket.gethostname(), _dumps(digest), run_id),
            )
            self._insert_event(run_id, now, EventRecord(kind="run_resumed", data=data))
            return self._require_run(run_id)

    def update_inputs(self, run_id: str, inputs_digest: Mapping[str, str]) -> None:
        """Record the inputs as of the run's latest committed state (a resume compares)."""
        with self.transaction():
            self._seals.run_changed(run_id)
            self._sql(
                "UPDATE runs SET inputs_digest = ? WHERE id = ?",
                (_sorted_json(inputs_digest), run_id),
            )

    def finish_run(
        self,
        run_id: str,
        status: Literal["shipped", "failed", "halted", "paused"],
        reason: str | None = None,
    ) -> None:
        """End (or pause) a run: `run_finished`, `reason` kept as its `halt_reason`."""
        if status not in ("shipped", "failed", "halted", "paused"):
            raise ValueError(f"not a finishing status: {status!r}")
        with self.transaction():
            now = iso_utc(self._clock())
            self._seals.run_changed(run_id)
            self._sql(
                "UPDATE runs SET status = ?, ended_at = ?, halt_reason = ? WHERE id = ?",
                (status, now, reason, run_id),
            )
            self._insert_event(
                run_id, now, EventRecord(kind="run_finished", outcome=status, message=reason)
            )

    # -- events and tasks --------------------------------------------------------------------

    def record(
        self,
        run_id: str,
        event: EventRecord,
        *,
        state: Sequence[str] | None = None,
        task_update: TaskUpdate | None = None,
        at: str | None = None,
    ) -> int:
        """Append `event` (with `state`, the machine configuration; with `task_update`, that task
        row) in one transaction; its `seq`. `at` (a `timestamp()`): when it happened, for an
        event written later (held by the recorder); default now."""
        state_json = _dumps(list(state)) if state is not None else None
        with self.transaction():
            if state_json is not None:
                self._seals.run_changed(run_id)
                self._sql("UPDATE runs SET state = ? WHERE id = ?", (state_json, run_id))
            return self._append(run_id, event, task_update, at)[0]

    def _append(
        self, run_id: str, event: EventRecord, update: TaskUpdate | None, at: str | None = None
    ) -> tuple[int, sqlite3.Row | None]:
        """Write an event (inside a transaction; with `update`, its task row changes and the
        event is annotated from it): (seq, the task row after)."""
        self._seals.touch(run_id)
        now = at or iso_utc(self._clock())
        after = None
        if update is not None:
            before, after = self._change_task(run_id, update, now)
            event = _annotate_task_event(event, after, before)
        return self._insert_event(run_id, now, event), after

    def task_started(
        self,
        run_id: str,
        task_key: str,
        *,
        plan_id: str | None = None,
        wave: int | None = None,
        message: str | None = None,
        attempt: int | None = None,
        at: str | None = None,
    ) -> int:
        """Start an attempt of a task (`task_started`); its number: `attempt` when the caller
        counts them (the recorder), else the row's + 1. A `done` task is refused. `at`: as
        for `record`."""
        event = EventRecord(kind="task_started", message=message)
        update = TaskUpdate(
            task_key=task_key, status="running", plan_id=plan_id, wave=wave, attempt=attempt
        )
        with self.transaction():
            _, after = self._append(run_id, event, update, at)
        assert after is not None
        return int(after["attempt"])

    def timestamp(self) -> str:
        """Now, as the journal writes times (its clock)."""
        return iso_utc(self._clock())

    def task_finished(
        self,
        run_id: str,
        task_key: str,
        *,
        status: Literal["done", "failed"] = "done",
        duration_ms: int | None = None,
        message: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> TaskRow:
        """End the task's current attempt (`task_finished`; duration by default since its start)."""
        if status not in ("done", "failed"):
            raise ValueError(f"not a finishing task status: {status!r}")
        event = EventRecord(
            kind="task_finished",
            outcome=status,
            duration_ms=duration_ms,
            message=message,
            data=dict(data or {}),
        )
        with self.transaction():
            _, after = self._append(run_id, event, TaskUpdate(task_key=task_key, status=status))
        assert after is not None
        return task_row(after)

    def wave_started(
        self,
        run_id: str,
        wave: int,
        tasks: Iterable[PlannedTask | tuple[str, str | None]] = (),
    ) -> int:
        """Journal `wave_started` and register its tasks as `pending` (existing rows kept)."""
        planned = [PlannedTask(*task) for task in tasks]
        plans = list(dict.fromkeys(t.plan_id for t in planned if t.plan_id is not None))
        data = {"plans": plans, "tasks": [t.task_key for t in planned]}
        event = EventRecord(kind="wave_started", wave=wave, data=data)
        with self.transaction():
            self._seals.digest(run_id)  # before any row is added (see _change_task)
            for task in planned:
                added = self._sql(
                    "INSERT OR IGNORE INTO tasks (run_id, task_key, plan_id, wave, status) "
                    "VALUES (?, ?, ?, ?, 'pending') RETURNING *",
                    (run_id, task.task_key, task.plan_id, wave),
                ).fetchone()
                if added is not None:  # a row that already existed is kept as it was
                    self._seals.digest_change(run_id, None, added)
            return self._insert_event(run_id, iso_utc(self._clock()), event)

    def _change_task(
        self, run_id: str, update: TaskUpdate, now: str
    ) -> tuple[sqlite3.Row | None, sqlite3.Row]:
        """Change one task row and the run's task digest with it: the row before (or None) and
        after. A start is attempt `update.attempt`, else the row's + 1."""
        self._seals.digest(run_id)  # loaded before the row changes
        task_key, plan_id, wave = update.task_key, update.plan_id, update.wave
        before = self._sql(_GET_TASK, (run_id, task_key)).fetchone()
        if update.status == "running":
            if before is not None and before["status"] == "done":
                raise JournalError(
                    f"{self.path}: task {task_key} of run {run_id} is already done; "
                    "finished tasks are not run again"
                )
            attempt = update.attempt
            if attempt is None:
                attempt = (before["attempt"] if before is not None else 0) + 1
            cursor = self._sql(_START_TASK, (run_id, task_key, plan_id, wave, attempt, now))
        else:
            ended_at = now if update.status in ("done", "failed") else None
            values = (run_id, task_key, plan_id, wave, update.status, ended_at)
            cursor = self._sql(_SET_TASK, values)
        after = cursor.fetchone()
        assert after is not None
        self._seals.digest_change(run_id, before, after)
        return before, after

    def _insert_event(self, run_id: str, ts: str, event: EventRecord) -> int:
        """Append an event row and extend its run's chain; its `seq`."""
        values = (run_id, ts, event.kind, event.point, event.wave, event.plan_id, event.task_id,
                  event.cap_id, event.hook_kind, event.outcome, event.duration_ms, event.message,
                  _dumps(event.data))  # fmt: skip
        row = self._sql(_INSERT_EVENT, values).fetchone()
        self._seals.chain(run_id, row)
        return int(row["seq"])

    def _abandon(self) -> None:
        self._seals.abandon()
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def verify_run(self, run_id: str) -> None:
        """Refuse a run this user's looprail did not write, or that was changed since."""
        with self._mutex:
            self._seals.verify(self._require_run(run_id).id)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # built once


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def _sorted_json(digest: Mapping[str, str]) -> str:
    return _dumps(dict(sorted(digest.items())))


def _annotate_task_event(
    event: EventRecord, row: sqlite3.Row, before: sqlite3.Row | None
) -> EventRecord:
    """The event with its task's coordinates and attempt (on a start, what the row was), so
    the journal alone shows a re-run."""
    data = dict(event.data)
    data.setdefault("attempt", row["attempt"])
    if event.kind == "task_started" and before is not None:
        data.setdefault("previous_status", before["status"])
    update: dict[str, object] = {
        "data": data,
        "task_id": event.task_id or row["task_key"],
        "plan_id": event.plan_id or row["plan_id"],
        "wave": event.wave if event.wave is not None else row["wave"],
    }
    if event.kind == "task_finished" and event.duration_ms is None and row["started_at"]:
        update["duration_ms"] = duration(row["started_at"], row["ended_at"] or row["started_at"])
    return event.model_copy(update=update)
