"""The run journal: one SQLite database per project at `<project>/.looprail/journal.sqlite`.

Three tables: `runs` (one row per run: phase, status, the machine configuration), `events`
(append-only, ordered by `seq`) and `tasks` (one row per task per run, with its attempt count).
Every write is one `BEGIN IMMEDIATE … COMMIT` with `synchronous=FULL` in WAL mode, so a state
change, its task row and its event commit together or not at all, and a commit survives a crash
of the process or the machine. Task execution is at-least-once (an in-flight task is run again
after a crash, with `attempt` + 1); recording is exactly-once.

A file at the journal path that is not a looprail journal, is corrupt, or was written by a newer
looprail is refused with a one-line `JournalError`, never overwritten.
"""

from __future__ import annotations

import functools
import hmac
import json
import os
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from looprail._version import __version__
from looprail.layout import JOURNAL_FILE, project_path
from looprail.store import seal as _seal  # hashes every commit: imported once, not per call
from looprail.store.inputs import diff_inputs
from looprail.store.models import (
    FINAL_STATUSES,
    RESUMABLE_STATUSES,
    EventRecord,
    EventRow,
    PlannedTask,
    RunRow,
    TaskRow,
    TaskUpdate,
)
from looprail.store.schema import (
    BUSY_TIMEOUT_MS,
    JournalError,
    NoJournalError,
    check_header,
    check_links,
    connect_readonly,
    prepare,
    translate,
)
from looprail.store.seal import SEAL_VERSION, canonical, chain_link, run_seal, task_digest, user_key

JOURNAL_NAME = JOURNAL_FILE

# The statements of the per-task path, as constants (sqlite3 keeps them prepared by their text).
_GET_TASK = "SELECT * FROM tasks WHERE run_id = ? AND task_key = ?"
_START_TASK = (
    "INSERT INTO tasks (run_id, task_key, plan_id, wave, status, attempt, started_at) "
    "VALUES (?, ?, ?, ?, 'running', 1, ?) "
    "ON CONFLICT (run_id, task_key) DO UPDATE SET status = 'running', "
    "attempt = attempt + 1, started_at = excluded.started_at, ended_at = NULL, "
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
_RAN_TASK = (  # _START_TASK and then _SET_TASK, as one write
    "INSERT INTO tasks (run_id, task_key, plan_id, wave, status, attempt, started_at, ended_at) "
    "VALUES (?, ?, ?, ?, ?, 1, ?, ?) "
    "ON CONFLICT (run_id, task_key) DO UPDATE SET status = excluded.status, "
    "attempt = attempt + 1, started_at = excluded.started_at, ended_at = excluded.ended_at, "
    "plan_id = coalesce(excluded.plan_id, plan_id), "
    "wave = coalesce(excluded.wave, wave) RETURNING *"
)
_INSERT_EVENT = (
    "INSERT INTO events (run_id, ts, kind, point, wave, plan_id, task_id, cap_id, "
    "hook_kind, outcome, duration_ms, message, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *"
)


@functools.cache
def _insert_events(count: int) -> str:
    """One INSERT of `count` event rows (task_ran: a task's start, what came between, its
    finish), in order."""
    more = ", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" * (count - 1)
    return _INSERT_EVENT.removesuffix(" RETURNING *") + more + " RETURNING *"


def journal_path(project: str | Path) -> Path:
    return Path(project_path(project, JOURNAL_NAME))


_RUN_ID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32


def new_run_id(now: datetime | None = None) -> str:
    """A ULID: 48-bit millisecond time + 80 random bits, Crockford base32, so ids sort by start."""
    moment = now or datetime.now(UTC)
    value = (int(moment.timestamp() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_RUN_ID_ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5))


def is_run_id(value: object) -> bool:
    """Is `value` a run id in the form `new_run_id` makes (26 characters of Crockford base32,
    the first at most `7`)? A journal is a file in the project, so an id read from it may be
    planted: one that is not looprail's never reaches a path or a printed command."""
    return (
        isinstance(value, str)
        and len(value) == 26
        and value[0] <= "7"
        and all(c in _RUN_ID_ALPHABET for c in value)
    )


def iso_utc(moment: datetime) -> str:
    """`2026-05-09T07:35:25.123Z`: fixed width, so text order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Journal:
    """A project's run journal. Open with `Journal.open(project)`; use as a context manager or
    call `close()`. Safe to share between threads (one connection behind a lock); other
    processes may read it at the same time (WAL)."""

    def __init__(self, conn: sqlite3.Connection, path: Path, clock: Callable[[], datetime]):
        self._conn = conn
        self._mutex = threading.RLock()
        self._depth = 0
        self._clock = clock
        self.path = path
        self._key: bytes | None = None
        self._touched: set[str] = set()  # runs written in the open transaction: sealed at commit
        # Task digests (store/seal.py) are never written to the file: a run's digest is kept
        # here with the seal it went into, and recomputed from the rows when the seal in the
        # file is not that one (another connection wrote the run since).
        # With it, the chain head and the run row's canonical bytes it covered: while the file
        # still holds that seal, nobody else wrote the run, so none of them is read again.
        self._sealed: dict[str, tuple[str, str, str, bytes]] = {}
        self._digests: dict[str, str] = {}  # working digests of the open transaction
        self._heads: dict[str, str] = {}  # chain heads of the open transaction
        self._checked: dict[str, tuple[str, str, str, bytes] | None] = {}  # per transaction
        self._run_dirty: set[str] = set()  # runs whose row this transaction changed
        self._known_runs: set[str] = set()  # runs seen to exist (runs are never deleted)
        self._macs: dict[tuple[str, str], tuple[tuple[Any, ...], int]] = {}  # see _row_mac
        # The task rows this connection last wrote, per run: while the file still holds its
        # seal of the run (nobody else wrote it), such a row is what the file holds, so a task's
        # change need not read it first. Rows written in the open transaction are kept apart
        # until it commits.
        self._rows: dict[str, dict[str, sqlite3.Row]] = {}
        self._rows_tx: dict[tuple[str, str], sqlite3.Row] = {}
        # The thread whose open transaction has no savepoints (see transaction), and its
        # inner blocks: a failure inside one poisons the transaction.
        self._flat_owner: int | None = None
        self._flat_block = _FlatBlock(self)
        self._poisoned = False  # … and a write in it failed

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        project: str | Path,
        *,
        create: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> Journal:
        """Open (and with `create`, create or migrate) the project's journal.

        Raises `NoJournalError` when there is none and `create` is false, and `JournalError` for
        a foreign, corrupt or newer file."""
        path = journal_path(project)
        check_links(path)  # before anything else: a dangling link "does not exist"
        if not path.exists():
            if not create:
                raise NoJournalError(f"{path}: no journal yet (no run has been recorded)")
            path.parent.mkdir(parents=True, exist_ok=True)
        check_header(path)
        try:
            conn = sqlite3.connect(
                path,
                isolation_level=None,  # explicit BEGIN IMMEDIATE … COMMIT only
                check_same_thread=False,  # guarded by Journal._mutex
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        except sqlite3.Error as exc:
            raise JournalError(f"{path}: cannot open the journal ({exc})") from None
        try:
            prepare(conn, path)
        except BaseException:
            conn.close()
            raise
        conn.row_factory = sqlite3.Row
        return cls(conn, path, clock or (lambda: datetime.now(UTC)))

    @classmethod
    def open_readonly(cls, project: str | Path) -> Journal:
        """Open the project's journal for reading only (`mode=ro`, `query_only`): no schema
        change, no migration, no pragma stored in the file, and every write method fails. For
        viewers that run beside a live run (the dashboard). Raises `NoJournalError` when there
        is none (or it is still an empty file) and `JournalError` for a foreign, corrupt or
        newer one."""
        path = journal_path(project)
        conn = connect_readonly(path)
        return cls(conn, path, lambda: datetime.now(UTC))

    def close(self) -> None:
        with self._mutex:
            self._conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def pragma(self, name: str) -> Any:
        """The current value of a connection pragma (`journal_mode`, `synchronous`, …)."""
        if not name.isidentifier():
            raise ValueError(f"not a pragma name: {name!r}")
        with self._mutex:
            return self._sql(f"PRAGMA {name}").fetchone()[0]

    # -- transactions ------------------------------------------------------------------------

    def transaction(self, *, savepoints: bool = True) -> AbstractContextManager[None]:
        """Group writes: everything inside commits together or not at all. Nests (an inner block
        is a savepoint); every write method already runs in one, so this is only for callers
        that tie several writes to one step (e.g. a machine transition and its hook events).

        With `savepoints=False` (an outer block only), inner blocks are not savepoints: a write
        that fails inside fails the whole transaction, which is never committed even if the
        caller catches the error. For a batch of writes that normally all succeed (the
        recorder's group commit), it saves two statements per write."""
        if self._flat_owner == threading.get_ident():  # inside this thread's flat transaction
            return self._flat_block
        return self._transaction(savepoints)

    @contextmanager
    def _transaction(self, savepoints: bool) -> Iterator[None]:
        with self._mutex:
            outer = self._depth == 0
            savepoint = f"sp{self._depth}"
            self._sql("BEGIN IMMEDIATE" if outer else f"SAVEPOINT {savepoint}")
            # What a rollback to the savepoint restores (an outer rollback forgets it all).
            if not outer:
                digests, heads, rows = dict(self._digests), dict(self._heads), dict(self._rows_tx)
            self._depth += 1
            if outer and not savepoints:
                self._flat_owner = threading.get_ident()
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._abandon()
                else:
                    self._digests, self._heads, self._rows_tx = digests, heads, rows
                    self._sql(f"ROLLBACK TO {savepoint}")
                    self._sql(f"RELEASE {savepoint}")
                raise
            finally:
                if outer:
                    self._flat_owner = None
            self._depth -= 1
            if not outer:
                self._sql(f"RELEASE {savepoint}")
                return
            try:
                if self._poisoned:
                    raise JournalError(
                        f"{self.path}: a write failed inside a transaction; nothing of it is "
                        "committed"
                    )
                sealed = self._seal_touched()
                self._sql("COMMIT")
            except BaseException:
                self._abandon()
                raise
            self._sealed.update(sealed)
            for (run_id, task_key), row in self._rows_tx.items():
                self._rows.setdefault(run_id, {})[task_key] = row
            self._rows_tx.clear()

    @contextmanager
    def relaxed(self) -> Iterator[None]:
        """Commits inside wait for no fsync (`synchronous=NORMAL`; WAL keeps them in order).
        Such a commit survives a crash of the process, and one of the machine once any later
        FULL commit has synced the WAL (which holds it). For a task start the recorder's
        flusher writes, and a child's pid: losing either only means the task, never finished,
        runs again (or no process is left to reap) — so a task costs one fsync, at its
        finish."""
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
        with self.transaction():
            self._run_dirty.add(run_id)
            self._sql(
                "INSERT INTO runs (id, phase, status, started_at, state, machine_config, "
                "inputs_digest, pid, host) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    str(phase),
                    iso_utc(now),
                    _dumps(list(state)),
                    _dumps(config),
                    _dumps(dict(sorted((inputs_digest or {}).items()))),
                    os.getpid(),
                    socket.gethostname(),
                ),
            )
            self._insert_event(
                run_id,
                iso_utc(now),
                EventRecord(
                    kind="run_started",
                    data={
                        "phase": str(phase),
                        "state": list(state),
                        "machine_config": config,
                        "looprail": __version__,  # which looprail ran it
                    },
                ),
            )
        return run_id

    def resume_run(self, run_id: str, *, inputs_digest: Mapping[str, str] | None = None) -> RunRow:
        """Take over a resumable run: this process becomes its owner, status goes back to
        `running`, and `run_resumed` records the previous owner, the tasks that were in flight
        (they will run again: at-least-once) and, when `inputs_digest` is given, which inputs
        changed (the new digest is stored)."""
        with self.transaction():
            run = self._require_run(run_id)
            if run.status in FINAL_STATUSES:
                raise JournalError(
                    f"{self.path}: run {run_id} already {run.status}; nothing to resume"
                )
            in_flight = [t.task_key for t in self.tasks(run_id) if t.status == "running"]
            data: dict[str, Any] = {
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
            self._run_dirty.add(run_id)
            self._sql(
                "UPDATE runs SET status = 'running', ended_at = NULL, halt_reason = NULL, "
                "pid = ?, host = ?, inputs_digest = ? WHERE id = ?",
                (os.getpid(), socket.gethostname(), _dumps(digest), run_id),
            )
            self._insert_event(run_id, now, EventRecord(kind="run_resumed", data=data))
            return self._require_run(run_id)

    def update_inputs(self, run_id: str, inputs_digest: Mapping[str, str]) -> None:
        """Record the inputs as of the run's latest committed state (the run itself writes plans,
        so the digest moves forward with it; a later resume compares against this)."""
        with self.transaction():
            self._require_run(run_id)
            self._touched.add(run_id)
            self._run_dirty.add(run_id)
            self._sql(
                "UPDATE runs SET inputs_digest = ? WHERE id = ?",
                (_dumps(dict(sorted(inputs_digest.items()))), run_id),
            )

    def finish_run(
        self,
        run_id: str,
        status: Literal["shipped", "failed", "halted", "paused"],
        reason: str | None = None,
    ) -> None:
        """End (or pause) a run and journal `run_finished` with the status as its outcome.
        `reason` is kept as the run's `halt_reason`."""
        if status not in ("shipped", "failed", "halted", "paused"):
            raise ValueError(f"not a finishing status: {status!r}")
        with self.transaction():
            self._require_run(run_id)
            now = iso_utc(self._clock())
            self._run_dirty.add(run_id)
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
        """Append `event`; with `state`, also store the machine configuration; with
        `task_update`, also change that task row. All in one transaction. Returns the event's
        `seq`. With a task update, unset `task_id`/`plan_id`/`wave` come from the task row and
        `data["attempt"]` is the row's attempt. `at` (from `timestamp()`): when it happened,
        for an event written later than that (held by the recorder); default now."""
        seq, _ = self._record(run_id, event, state=state, task_update=task_update, at=at)
        return seq

    def task_started(
        self,
        run_id: str,
        task_key: str,
        *,
        plan_id: str | None = None,
        wave: int | None = None,
        message: str | None = None,
        data: Mapping[str, Any] | None = None,
        at: str | None = None,
    ) -> int:
        """Start an attempt of a task and journal `task_started`. Returns the attempt number
        (1 on a first run; more when a failed task is retried or an in-flight one re-run).
        A task that is already `done` is refused: finished tasks never run again. `at` (a
        `timestamp()`) is when the task started, for a start written later (the recorder
        holds starts until its next commit); default now."""
        with self.transaction():
            after = self._task_step(
                run_id, task_key, "running", plan_id, wave, message, None, data, at
            )
        return int(after["attempt"])

    def task_ran(
        self,
        run_id: str,
        task_key: str,
        *,
        started_at: str,
        plan_id: str | None = None,
        wave: int | None = None,
        start_message: str | None = None,
        status: Literal["done", "failed"] = "done",
        duration_ms: int | None = None,
        message: str | None = None,
        between: Sequence[tuple[str, EventRecord]] = (),
    ) -> int:
        """`task_started(at=started_at)` and `task_finished` in one transaction, for a start
        not written yet: the same two events with the same values, and the task row goes to
        its end state in one write (nobody could have seen the state between). `between`:
        events that change no state (a child's `process` record) with their times, written
        between the two as `record(at=…)` would write them. Returns the attempt number."""
        if status not in ("done", "failed"):
            raise ValueError(f"not a finishing task status: {status!r}")
        _check_step(task_key, duration_ms)
        with self.transaction():
            self._require_run_id(run_id)
            now = iso_utc(self._clock())
            self._digest(run_id)  # before the row changes (see _change_task)
            before = self._task_before(run_id, task_key)
            self._refuse_done(run_id, task_key, before)
            after = self._sql(
                _RAN_TASK, (run_id, task_key, plan_id, wave, status, started_at, now)
            ).fetchone()
            self._digest_change(run_id, before, after)
            self._rows_tx[(run_id, task_key)] = after
            attempt = int(after["attempt"])
            # The events' data as `_dumps` writes it (`status` is one of four words, a CHECK).
            finished = f'{{"attempt":{attempt}}}'
            started = (
                f'{{"attempt":{attempt},"previous_status":"{before["status"]}"}}'
                if before is not None
                else finished
            )
            if duration_ms is None:
                duration_ms = _elapsed_ms(started_at, now)
            wave, plan = after["wave"], after["plan_id"]
            middle: list[Any] = []
            for ts, e in between:
                middle += (run_id, ts, e.kind, e.point, e.wave, e.plan_id, e.task_id,
                           e.cap_id, e.hook_kind, e.outcome, e.duration_ms, e.message,
                           _dumps(e.data))  # fmt: skip
            rows = self._sql(
                _insert_events(2 + len(between)),
                (run_id, started_at, "task_started", None, wave, plan, task_key, None, None,
                 None, None, start_message, started,
                 *middle,
                 run_id, now, "task_finished", None, wave, plan, task_key, None, None, status,
                 duration_ms, message, finished),
            ).fetchall()  # fmt: skip
            for row in sorted(rows, key=lambda r: r["seq"]):  # RETURNING promises no order
                self._chain(run_id, row)
        return attempt

    def timestamp(self) -> str:
        """Now, as the journal writes times (its clock): for `task_started(at=…)`."""
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
        """End the task's current attempt and journal `task_finished` (outcome = status). The
        duration defaults to the time since the attempt started."""
        if status not in ("done", "failed"):
            raise ValueError(f"not a finishing task status: {status!r}")
        with self.transaction():
            after = self._task_step(
                run_id, task_key, status, None, None, message, duration_ms, data
            )
        return _task_row(after)

    def wave_started(
        self,
        run_id: str,
        wave: int,
        tasks: Iterable[PlannedTask | tuple[str, str | None]] = (),
        *,
        message: str | None = None,
    ) -> int:
        """Journal `wave_started` and register the wave's tasks as `pending` in the same
        transaction. Registering is idempotent: rows that exist (a resumed wave) are kept."""
        planned = [PlannedTask(*task) for task in tasks]
        plans = list(dict.fromkeys(t.plan_id for t in planned if t.plan_id is not None))
        event = EventRecord(
            kind="wave_started",
            wave=wave,
            message=message,
            data={"plans": plans, "tasks": [t.task_key for t in planned]},
        )
        with self.transaction():
            self._require_run(run_id)
            self._digest(run_id)  # before any row is added (see _apply_task_update)
            for task in planned:
                added = self._sql(
                    "INSERT OR IGNORE INTO tasks (run_id, task_key, plan_id, wave, status) "
                    "VALUES (?, ?, ?, ?, 'pending') RETURNING *",
                    (run_id, task.task_key, task.plan_id, wave),
                ).fetchone()
                if added is not None:  # a row that already existed is kept as it was
                    self._digest_change(run_id, None, added)
                    self._rows_tx[(run_id, task.task_key)] = added
            return self._insert_event(run_id, iso_utc(self._clock()), event)

    # -- reading -----------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRow | None:
        with self._mutex:
            row = self._sql("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run_row(row) if row else None

    def find_run(self, ref: str) -> RunRow:
        """A run by its id or a unique prefix of it (case-insensitive)."""
        exact = self.get_run(ref)
        if exact is not None:
            return exact
        pattern = ref.upper().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        with self._mutex:
            rows = self._sql(
                "SELECT * FROM runs WHERE upper(id) LIKE ? ESCAPE '\\' ORDER BY started_at, id",
                (pattern + "%",),
            ).fetchall()
        if not ref or not rows:
            raise JournalError(f"{self.path}: no run {ref!r} (`looprail history` lists them)")
        if len(rows) > 1:
            listed = ", ".join(row["id"] for row in rows[:3]) + (", …" if len(rows) > 3 else "")
            raise JournalError(
                f"{self.path}: run prefix {ref!r} matches {len(rows)} runs ({listed}); "
                "give more characters"
            )
        return _run_row(rows[0])

    def runs(self) -> list[RunRow]:
        """Every run, oldest first."""
        with self._mutex:
            rows = self._sql("SELECT * FROM runs ORDER BY started_at, id").fetchall()
        return [_run_row(row) for row in rows]

    def latest_run(self) -> RunRow | None:
        with self._mutex:
            row = self._sql("SELECT * FROM runs ORDER BY started_at DESC, id DESC").fetchone()
        return _run_row(row) if row else None

    def unfinished_run(self, phase: str | None = None) -> RunRow | None:
        """The latest run (of `phase`, when given) that can be resumed: status `running` (its
        process may have died), `paused` or `halted`."""
        marks = ", ".join("?" * len(RESUMABLE_STATUSES))
        sql = f"SELECT * FROM runs WHERE status IN ({marks})"
        params: list[Any] = list(RESUMABLE_STATUSES)
        if phase is not None:
            sql += " AND phase = ?"
            params.append(str(phase))
        with self._mutex:
            row = self._sql(sql + " ORDER BY started_at DESC, id DESC", params).fetchone()
        return _run_row(row) if row else None

    def events(
        self, run_id: str, *, kinds: Iterable[str] | None = None, after: int = 0
    ) -> list[EventRow]:
        """The run's events in the order they were recorded (optionally only some kinds, and
        only those after `seq` `after`: a reader that polls fetches just what is new)."""
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
        return [_event_row(row) for row in rows]

    def last_seq(self) -> int:
        """The `seq` of the newest event of any run (0 when there is none): a cheap change
        marker for readers that poll."""
        with self._mutex:
            return int(self._sql("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])

    def task_counts(self) -> dict[str, dict[str, int]]:
        """`{run id: {status: count}}` of every run's task rows, in one query (for listings
        that show counts without reading every row)."""
        with self._mutex:
            rows = self._sql(
                "SELECT run_id, status, count(*) FROM tasks GROUP BY run_id, status"
            ).fetchall()
        out: dict[str, dict[str, int]] = {}
        for run_id, status, count in rows:
            out.setdefault(run_id, {})[status] = count
        return out

    def task_states(self, run_id: str) -> dict[str, tuple[str, int]]:
        """`{task key: (status, attempt)}` of the run's task rows, without building a model per
        row (the recorder reads them once per run)."""
        with self._mutex:
            rows = self._sql(
                "SELECT task_key, status, attempt FROM tasks WHERE run_id = ?", (run_id,)
            ).fetchall()
        return {key: (status, attempt) for key, status, attempt in rows}

    def tasks(self, run_id: str) -> list[TaskRow]:
        """The run's task rows by wave, then in the order they were first registered."""
        with self._mutex:
            rows = self._sql(
                "SELECT * FROM tasks WHERE run_id = ? ORDER BY wave IS NULL, wave, rowid",
                (run_id,),
            ).fetchall()
        return [_task_row(row) for row in rows]

    # -- internals ---------------------------------------------------------------------------

    def _record(
        self,
        run_id: str,
        event: EventRecord,
        *,
        state: Sequence[str] | None = None,
        task_update: TaskUpdate | None = None,
        at: str | None = None,
    ) -> tuple[int, TaskRow | None]:
        state_json = _dumps(list(state)) if state is not None else None
        with self.transaction():
            self._require_run_id(run_id)
            now = at or iso_utc(self._clock())
            if state_json is not None:
                self._run_dirty.add(run_id)
                self._sql("UPDATE runs SET state = ? WHERE id = ?", (state_json, run_id))
            row = None
            if task_update is not None:
                row, before = self._apply_task_update(run_id, task_update, now)
                event = _annotate_task_event(event, row, before)
            return self._insert_event(run_id, now, event), row

    def _task_step(
        self,
        run_id: str,
        task_key: str,
        status: str,
        plan_id: str | None,
        wave: int | None,
        message: str | None,
        duration_ms: int | None,
        data: Mapping[str, Any] | None,
        at: str | None = None,
    ) -> sqlite3.Row:
        """`task_started` (status `running`) or `task_finished` inside the open transaction:
        the row's change and its event, annotated as `_annotate_task_event` does. The hot path
        of a run (two per task), so no model is built: the checks the models make are here."""
        _check_step(task_key, duration_ms)
        self._require_run_id(run_id)
        now = at or iso_utc(self._clock())
        before, after = self._change_task(run_id, task_key, status, plan_id, wave, now)
        values = dict(data or {})
        values.setdefault("attempt", after["attempt"])
        if status == "running":
            kind, outcome = "task_started", None
            if before is not None:
                values.setdefault("previous_status", before["status"])
        else:
            kind, outcome = "task_finished", status
            if duration_ms is None and after["started_at"]:
                duration_ms = _elapsed_ms(after["started_at"], after["ended_at"])
        self._insert_row(
            run_id,
            now,
            (kind, None, after["wave"], after["plan_id"], task_key, None, None, outcome,
             duration_ms, message, _dumps(values)),
        )  # fmt: skip
        return after

    def _apply_task_update(
        self, run_id: str, update: TaskUpdate, now: str
    ) -> tuple[TaskRow, TaskRow | None]:
        before, after = self._change_task(
            run_id, update.task_key, update.status, update.plan_id, update.wave, now
        )
        return _task_row(after), _task_row(before) if before is not None else None

    def _change_task(
        self,
        run_id: str,
        task_key: str,
        status: str,
        plan_id: str | None,
        wave: int | None,
        now: str,
    ) -> tuple[sqlite3.Row | None, sqlite3.Row]:
        """Change one task row (inside the open transaction) and the run's task digest with
        it. Returns the row before (None when there was none) and after."""
        self._digest(run_id)  # before the row changes: a digest recomputed now must not see it
        before = self._task_before(run_id, task_key)
        if status == "running":
            self._refuse_done(run_id, task_key, before)
            cursor = self._sql(_START_TASK, (run_id, task_key, plan_id, wave, now))
        else:
            ended_at = now if status in ("done", "failed") else None
            cursor = self._sql(_SET_TASK, (run_id, task_key, plan_id, wave, status, ended_at))
        after = cursor.fetchone()
        assert after is not None
        self._digest_change(run_id, before, after)
        self._rows_tx[(run_id, task_key)] = after
        return before, after

    def _refuse_done(self, run_id: str, task_key: str, row: sqlite3.Row | None) -> None:
        if row is not None and row["status"] == "done":
            raise JournalError(
                f"{self.path}: task {task_key} of run {run_id} is already done; "
                "finished tasks are not run again"
            )

    def _task_before(self, run_id: str, task_key: str) -> sqlite3.Row | None:
        """The task row as it is now, inside the open transaction: the row this connection
        last wrote when the file still holds its seal of the run (see `_rows`), else read."""
        row = self._rows_tx.get((run_id, task_key))
        if row is not None:
            return row
        if self._valid_sealed(run_id) is not None:
            row = self._rows.get(run_id, {}).get(task_key)
            if row is not None:
                return row
        return self._sql(_GET_TASK, (run_id, task_key)).fetchone()

    def _require_run_id(self, run_id: str) -> None:
        """`_require_run` without building the row, once per run (looprail never deletes a
        run, and the events' foreign key refuses a row for a run deleted from outside)."""
        if run_id in self._known_runs:
            return
        if self._sql("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise JournalError(f"{self.path}: no run {run_id!r}")
        self._known_runs.add(run_id)

    def _require_run(self, run_id: str) -> RunRow:
        row = self._sql("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise JournalError(f"{self.path}: no run {run_id!r}")
        return _run_row(row)

    def _insert_event(self, run_id: str, ts: str, event: EventRecord) -> int:
        return self._insert_row(
            run_id,
            ts,
            (event.kind, event.point, event.wave, event.plan_id, event.task_id, event.cap_id,
             event.hook_kind, event.outcome, event.duration_ms, event.message,
             _dumps(event.data)),
        )  # fmt: skip

    def _insert_row(self, run_id: str, ts: str, values: tuple[Any, ...]) -> int:
        """Append an event row (`values`: kind … data, in `_INSERT_EVENT`'s order) and extend
        the run's chain with it. Returns its `seq`."""
        row = self._sql(_INSERT_EVENT, (run_id, ts, *values)).fetchone()
        self._chain(run_id, row)
        return int(row["seq"])

    # -- seals (see store/seal.py) -----------------------------------------------------------

    def _user_key(self) -> bytes:
        if self._key is None:
            self._key = user_key()
        return self._key

    def _meta(self, key: str) -> str | None:
        row = self._sql("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str, *more: str) -> None:
        """Write `meta` rows: `key, value` and further key/value pairs, in one statement."""
        pairs = (key, value, *more)
        marks = ", ".join(["(?, ?)"] * (len(pairs) // 2))
        self._sql(
            f"INSERT INTO meta (key, value) VALUES {marks} "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            pairs,
        )

    def _chain(self, run_id: str, row: sqlite3.Row) -> None:
        """Extend the run's event chain by the row just inserted (inside its transaction; the
        head is written once, at commit, with the seal)."""
        head = self._heads.get(run_id)
        if head is None:
            valid = self._valid_sealed(run_id)
            head = valid[2] if valid is not None else (self._meta(f"chain:{run_id}") or "")
        self._heads[run_id] = _seal.chain_link(self._user_key(), head, dict(row))
        self._touched.add(run_id)

    def _digest(self, run_id: str) -> str:
        """The run's task digest as of now, inside the open transaction."""
        digest = self._digests.get(run_id)
        if digest is None:
            # Recomputed on the first write of this run by this connection, or when another
            # one wrote it since.
            valid = self._valid_sealed(run_id)
            digest = valid[1] if valid is not None else self._task_digest(run_id)
            self._digests[run_id] = digest
        return digest

    def _valid_sealed(self, run_id: str) -> tuple[str, str, str, bytes] | None:
        """What this connection last sealed for the run (seal, task digest, chain head, run
        row bytes), if the file still holds that seal: then nobody else wrote the run since.
        The seal is read once per transaction."""
        if run_id in self._checked:
            return self._checked[run_id]
        known = self._sealed.get(run_id)
        valid = None
        if known is not None:
            seal = self._meta(f"seal:{run_id}")
            if seal is not None and hmac.compare_digest(known[0], seal):
                valid = known
        self._checked[run_id] = valid
        if valid is None:  # written elsewhere (or never sealed here): its rows are read again
            self._rows.pop(run_id, None)
        return valid

    def _task_digest(self, run_id: str) -> str:
        rows = self._sql("SELECT * FROM tasks WHERE run_id = ?", (run_id,))
        return task_digest(self._user_key(), (dict(row) for row in rows))

    def _digest_change(
        self, run_id: str, before: sqlite3.Row | None, after: sqlite3.Row | None
    ) -> None:
        """A task row of `run_id` changed (inside the open transaction): update its digest."""
        digest = self._digests[run_id]  # loaded by the caller before the row changed
        self._digests[run_id] = _seal.digest_add(
            digest,
            remove=self._row_mac(before) if before is not None else 0,
            add=self._row_mac(after) if after is not None else 0,
        )
        self._touched.add(run_id)

    def _row_mac(self, row: sqlite3.Row) -> int:
        """A task row's MAC (`seal.task_mac`). The last one computed for each row is kept with
        the values it covered, so the row a task's start wrote is not hashed again when its
        finish replaces it (a MAC depends on the values alone: the cache can never be wrong)."""
        values = tuple(row)
        slot = (row["run_id"], row["task_key"])
        known = self._macs.get(slot)
        if known is not None and known[0] == values:
            return known[1]
        mac = _seal.task_mac(self._user_key(), dict(row))
        self._macs[slot] = (values, mac)
        return mac

    def _seal_touched(self) -> dict[str, tuple[str, str, str, bytes]]:
        """Write the seal of every run written in this transaction (O(1) each: the chain head
        and the task digest are kept up to date row by row, and the run row is read again
        only when it changed). Returns them for `_sealed`."""
        touched, self._touched = self._touched, set()
        sealed = {}
        for run_id in sorted(touched):
            valid = self._valid_sealed(run_id)
            chain = self._heads.get(run_id)
            extended = chain is not None
            if chain is None:  # no event in this transaction (e.g. update_inputs)
                chain = valid[2] if valid is not None else (self._meta(f"chain:{run_id}") or "")
            digest = self._digest(run_id)
            if valid is not None and run_id not in self._run_dirty:
                run_bytes = valid[3]
            else:
                run = self._sql("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
                run_bytes = _seal.canonical(dict(run))
            seal = _seal.run_seal(self._user_key(), chain, digest, run_bytes)
            if extended:  # the chain head and the seal in one statement
                self._set_meta(f"seal:{run_id}", seal, f"chain:{run_id}", chain)
            else:
                self._set_meta(f"seal:{run_id}", seal)
            sealed[run_id] = (seal, digest, chain, run_bytes)
        self._end_transaction()
        return sealed

    def _end_transaction(self) -> None:
        """Forget what belonged to the transaction that ends (committed or not)."""
        self._digests.clear()
        self._heads.clear()
        self._checked.clear()
        self._run_dirty.clear()
        self._poisoned = False

    def _abandon(self) -> None:
        """The open transaction failed: forget what it would have sealed, roll it back."""
        self._touched.clear()
        self._rows_tx.clear()
        self._end_transaction()
        self._known_runs.clear()  # a run created in it is gone again
        self._rollback()

    def verify_run(self, run_id: str) -> None:
        """Refuse (one-line `JournalError`) a run this user did not write with looprail on this
        machine: its seal is missing, or its rows were changed outside looprail since. One
        pass over the run's events and one over its task rows."""
        with self._mutex:
            run = self._require_run(run_id)
            seal = self._meta(f"seal:{run_id}")
            key = self._user_key()
            chain = ""
            for row in self._sql("SELECT * FROM events WHERE run_id = ? ORDER BY seq", (run_id,)):
                chain = chain_link(key, chain, dict(row))
            digest = self._task_digest(run_id)
            run_row = self._sql("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            run_bytes = canonical(dict(run_row))
            expected = run_seal(key, chain, digest, run_bytes)
            ok = (
                seal is not None
                and hmac.compare_digest(chain, self._meta(f"chain:{run_id}") or "")
                and hmac.compare_digest(seal, expected)
            )
            if ok:
                assert seal is not None
                if self._sealed.get(run_id, ("",))[0] != seal:  # another connection wrote it
                    self._rows.pop(run_id, None)
                self._sealed[run_id] = (seal, digest, chain, run_bytes)
        if not ok:
            if seal is not None and not seal.startswith(SEAL_VERSION + ":"):
                raise JournalError(
                    f"{self.path}: run {run.id} was sealed by an older looprail (another seal "
                    "format); this one cannot check it, so it is not resumed (start over with "
                    "--new)"
                )
            why = "it carries no seal" if seal is None else "its seal does not match its rows"
            raise JournalError(
                f"{self.path}: run {run.id} was not written by this user's looprail on this "
                f"machine, or was changed outside looprail ({why}); refusing to resume it "
                "(start over with --new)"
            )

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def _sql(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise translate(self.path, exc) from None


class _FlatBlock:
    """An inner block of a transaction without savepoints: a failure poisons it. A class, not
    a generator: it is entered on every write of the hot path."""

    __slots__ = ("_journal",)

    def __init__(self, journal: Journal):
        self._journal = journal

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            self._journal._poisoned = True


# -- rows ------------------------------------------------------------------------------------


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # built once


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def _check_step(task_key: Any, duration_ms: Any) -> None:
    """What the models would check of a task step (the hot path builds none)."""
    if not isinstance(task_key, str) or not task_key:
        raise ValueError(f"a task key must be a non-empty string, got {task_key!r}")
    if duration_ms is not None and (
        isinstance(duration_ms, bool) or not isinstance(duration_ms, int) or duration_ms < 0
    ):
        raise ValueError(f"duration_ms must be a whole number >= 0, got {duration_ms!r}")


def _elapsed_ms(started_at: str, ended_at: str | None) -> int:
    started = datetime.fromisoformat(started_at)
    ended = datetime.fromisoformat(ended_at or started_at)
    return max(0, round((ended - started).total_seconds() * 1000))


def _columns(row: sqlite3.Row, model: type[BaseModel]) -> dict[str, Any]:
    """The row's values for the model's fields (a column added by a later migration is not a
    field of an older model)."""
    return {name: row[name] for name in model.model_fields}


def _run_row(row: sqlite3.Row) -> RunRow:
    values = _columns(row, RunRow)
    for column in ("state", "machine_config", "inputs_digest"):
        values[column] = json.loads(values[column])
    return RunRow(**values)


def _event_row(row: sqlite3.Row) -> EventRow:
    values = _columns(row, EventRow)
    values["data"] = json.loads(values["data"])
    return EventRow(**values)


def _task_row(row: sqlite3.Row) -> TaskRow:
    return TaskRow(**_columns(row, TaskRow))


def _annotate_task_event(event: EventRecord, row: TaskRow, before: TaskRow | None) -> EventRecord:
    """An event written with a task update carries the task's coordinates and the attempt it
    belongs to (and, on a start, what the row was), so the journal alone shows a re-run."""
    data = dict(event.data)
    data.setdefault("attempt", row.attempt)
    if event.kind == "task_started" and before is not None:
        data.setdefault("previous_status", before.status)
    update: dict[str, Any] = {
        "data": data,
        "task_id": event.task_id or row.task_key,
        "plan_id": event.plan_id or row.plan_id,
        "wave": event.wave if event.wave is not None else row.wave,
    }
    if event.kind == "task_finished" and event.duration_ms is None and row.started_at:
        update["duration_ms"] = _elapsed_ms(row.started_at, row.ended_at)
    return event.model_copy(update=update)
