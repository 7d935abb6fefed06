"""Reading a run journal: one connection behind a lock, rows as models (`Journal` writes)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel

from looprail.journal.models import RESUMABLE_STATUSES, EventRow, RunRow, TaskRow
from looprail.journal.report_data import find_run
from looprail.journal.schema import JournalError, reading


class JournalReader:
    """The reads of a journal connection (safe to share between threads)."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self._conn = conn
        self._mutex = threading.RLock()
        self.path = path

    def close(self) -> None:
        with self._mutex:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def pragma(self, name: str) -> Any:
        """The current value of a connection pragma (`journal_mode`, `synchronous`, …)."""
        if not name.isidentifier():
            raise ValueError(f"not a pragma name: {name!r}")
        with self._mutex:
            return self._sql(f"PRAGMA {name}").fetchone()[0]

    def get_run(self, run_id: str) -> RunRow | None:
        with self._mutex:
            row = self._sql("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return run_row(row) if row else None

    def find_run(self, ref: str) -> RunRow:
        """A run by its id or a unique prefix of it (case-insensitive)."""
        if not ref:
            raise JournalError(f"{self.path}: no run {ref!r} (`looprail history` lists them)")
        with self._mutex, reading(self.path):
            return run_row(find_run(self._conn, self.path, ref))

    def runs(self) -> list[RunRow]:
        """Every run, oldest first."""
        with self._mutex:
            rows = self._sql("SELECT * FROM runs ORDER BY started_at, id").fetchall()
        return [run_row(row) for row in rows]

    def latest_run(self) -> RunRow | None:
        with self._mutex:
            row = self._sql("SELECT * FROM runs ORDER BY started_at DESC, id DESC").fetchone()
        return run_row(row) if row else None

    def unfinished_run(self, phase: str | None = None) -> RunRow | None:
        """The latest resumable run (of `phase`, when given)."""
        marks = ", ".join("?" * len(RESUMABLE_STATUSES))
        sql = f"SELECT * FROM runs WHERE status IN ({marks})"
        params: list[Any] = list(RESUMABLE_STATUSES)
        if phase is not None:
            sql += " AND phase = ?"
            params.append(str(phase))
        with self._mutex:
            row = self._sql(sql + " ORDER BY started_at DESC, id DESC", params).fetchone()
        return run_row(row) if row else None

    def events(
        self, run_id: str, *, kinds: Iterable[str] | None = None, after: int = 0
    ) -> list[EventRow]:
        """The run's events in order (only `kinds`, when given; only after `seq` `after`)."""
        sql = "SELECT * FROM events WHERE run_id = ?"
        params: list[Any] = [run_id]
        if after:
            sql += " AND seq > ?"
            params.append(int(after))
        if kinds is not None:
            wanted = list(kinds)
            sql += f" AND kind IN ({', '.join('?' * len(wanted))})"
            params.extend(wanted)
        with self._mutex:
            rows = self._sql(sql + " ORDER BY seq", params).fetchall()
        return [event_row(row) for row in rows]

    def last_seq(self) -> int:
        """The newest event's `seq` (0 when none): a cheap change marker for readers."""
        with self._mutex:
            return int(self._sql("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])

    def task_counts(self) -> dict[str, dict[str, int]]:
        """`{run id: {status: count}}` of every run's task rows, in one query."""
        with self._mutex:
            rows = self._sql(
                "SELECT run_id, status, count(*) FROM tasks GROUP BY run_id, status"
            ).fetchall()
        out: dict[str, dict[str, int]] = {}
        for run_id, status, count in rows:
            out.setdefault(run_id, {})[status] = count
        return out

    def task_states(self, run_id: str) -> dict[str, tuple[str, int]]:
        """`{task key: (status, attempt)}` of the run's task rows (no model per row)."""
        with self._mutex:
            rows = self._sql(
                "SELECT task_key, status, attempt FROM tasks WHERE run_id = ?", (run_id,)
            ).fetchall()
        return {key: (status, attempt) for key, status, attempt in rows}

    def tasks(self, run_id: str) -> list[TaskRow]:
        """The run's task rows by wave, then in registration order."""
        with self._mutex:
            rows = self._sql(
                "SELECT * FROM tasks WHERE run_id = ? ORDER BY wave IS NULL, wave, rowid",
                (run_id,),
            ).fetchall()
        return [task_row(row) for row in rows]

    def _require_run(self, run_id: str) -> RunRow:
        row = self._sql("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise JournalError(f"{self.path}: no run {run_id!r}")
        return run_row(row)

    def _sql(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        with reading(self.path):
            return self._conn.execute(sql, params)


def _columns(row: sqlite3.Row, model: type[BaseModel]) -> dict[str, Any]:
    """The row's values for the model's fields (a later migration may add columns)."""
    return {name: row[name] for name in model.model_fields}


def run_row(row: sqlite3.Row) -> RunRow:
    values = _columns(row, RunRow)
    for column in ("state", "machine_config", "inputs_digest"):
        values[column] = json.loads(values[column])
    return RunRow(**values)


def event_row(row: sqlite3.Row) -> EventRow:
    values = _columns(row, EventRow)
    values["data"] = json.loads(values["data"])
    return EventRow(**values)


def task_row(row: sqlite3.Row) -> TaskRow:
    return TaskRow(**_columns(row, TaskRow))
