"""Where a run writes what happened: `MemoryRecorder` keeps the events in a list (tests,
`--dry-run`, embedding); `JournalRecorder` writes them to the project's SQLite journal."""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from looprail.journal.models import EventRecord as EventRecord  # re-exported (users import it)
from looprail.journal.schema import JournalError


class Recorder(Protocol):
    """What a run writes to and reads back from (`run_id`: "no-journal" in memory)."""

    run_id: str

    def event(self, record: EventRecord, *, state: Sequence[str] | None = None) -> None: ...

    def task_started(
        self, key: str, *, plan_id: str, wave: int | None, message: str = ""
    ) -> int: ...

    def task_finished(
        self, key: str, *, status: str, duration_ms: int | None, message: str | None = None
    ) -> None: ...

    def wave_started(self, wave: int, tasks: Iterable[tuple[str, str]]) -> None: ...

    def done_tasks(self) -> set[str]: ...

    def done_count(self) -> int: ...

    def kinds(self, *kinds: str) -> list[EventRecord]: ...

    def native_selected(self, hook_ref: str, count: int, limit: int | None) -> None:
        """`native_selection`: the loop guard's counter of `hook_ref`'s Action (`limit`: its
        `maxSelections`); a journal commits it before the Action is delivered."""
        self.event(
            EventRecord(
                kind="native_selection",
                cap_id=hook_ref,
                hook_kind="native",
                outcome="selected",
                data={"count": count, "maxSelections": limit},
            )
        )

    def native_selections(self) -> dict[str, int]:
        """The loop guard's counters of this run so far: per hook ref, the highest."""
        counts: dict[str, int] = {}
        for e in self.kinds("native_selection"):
            count = e.data.get("count")
            if e.cap_id and isinstance(count, int) and not isinstance(count, bool) and count > 0:
                counts[e.cap_id] = max(counts.get(e.cap_id, 0), count)
        return counts


class MemoryRecorder(Recorder):
    """Events in a list, in order. Thread-safe: plans of a wave run in parallel."""

    run_id = "no-journal"

    def __init__(self) -> None:
        self.events: list[EventRecord] = []
        self.state: list[str] = []
        self._done: set[str] = set()
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()

    def event(self, record: EventRecord, *, state: Sequence[str] | None = None) -> None:
        with self._lock:
            self.events.append(record)
            if state is not None:
                self.state = list(state)

    def task_started(self, key: str, *, plan_id: str, wave: int | None, message: str = "") -> int:
        with self._lock:
            self._attempts[key] = self._attempts.get(key, 0) + 1
            self.events.append(
                EventRecord(
                    kind="task_started",
                    task_id=key,
                    plan_id=plan_id,
                    wave=wave,
                    message=message or None,
                )
            )
            return self._attempts[key]

    def task_finished(
        self, key: str, *, status: str, duration_ms: int | None, message: str | None = None
    ) -> None:
        with self._lock:
            if status == "done":
                self._done.add(key)
            self.events.append(
                EventRecord(
                    kind="task_finished",
                    task_id=key,
                    outcome=status,
                    duration_ms=duration_ms,
                    message=message,
                )
            )

    def wave_started(self, wave: int, tasks: Iterable[tuple[str, str]]) -> None:
        self.event(
            EventRecord(kind="wave_started", wave=wave, data={"tasks": [k for k, _ in tasks]})
        )

    def done_tasks(self) -> set[str]:
        with self._lock:
            return set(self._done)

    def done_count(self) -> int:
        return len(self._done)

    def kinds(self, *kinds: str) -> list[EventRecord]:
        """The events of these kinds (every event without any), in order."""
        with self._lock:
            return [e for e in self.events if not kinds or e.kind in kinds]


class Durability(enum.Enum):
    """How soon a write must be on disk. Each event kind declares its own once (`DURABILITY`)."""

    HELD = "held"  # written with the next commit of anything; a crash loses it (hooks re-run)
    SOON = "soon"  # held, but committed (relaxed) within FLUSH_AFTER, so readers see it
    RELAXED = "relaxed"  # committed before the call returns, without an fsync of its own
    FULL = "full"  # committed and fsynced before the call returns


_H, _S, _R, _F = Durability.HELD, Durability.SOON, Durability.RELAXED, Durability.FULL

# What each event kind costs, and what a crash can take with it (docs/journal.md, "What is
# committed when"). An event written with a machine state is always FULL. A new kind is one
# line here (tests/machine/test_record_writer.py checks every kind has one).
DURABILITY: dict[str, Durability] = {
    "run_started": _F,
    "run_resumed": _F,
    "transition": _F,
    "point": _H,
    "hook": _H,
    "gate_verdict": _H,
    "resolver": _H,
    "read_first": _H,
    # Held: its task's finish (FULL) carries it, so a task costs one fsync; lost, the task
    # (never finished) runs again with the next attempt.
    "task_started": _S,
    "task_finished": _F,  # a finished task never runs again
    # Registers pending rows and decides nothing: lost in a power cut, the wave starts again.
    "wave_started": _R,
    "wave_finished": _F,
    "warning": _H,
    "halted": _F,
    "run_finished": _F,
    "native_hook": _H,
    "native_selection": _F,  # durable before the Action is delivered: no guard spent twice
    # Its cost survives a killed looprail (a resumed run's budget counts it) at no fsync.
    "agent_call": _R,
    "contribution": _H,
    "role_started": _F,
    "role_finished": _F,
    # A child under a guard dies with looprail: its pid is held like the start. Without a
    # guard it is RELAXED (see `durability`): it is what a resume reaps.
    "process": _S,
    # A run waiting at a checkpoint: committed before it asks, so `looprail answer`, the
    # dashboard and a resume after a kill see what is asked (no fsync: it decides nothing).
    "checkpoint": _R,
    # A person's answer: on disk before the run goes on (it is not asked again).
    "answer": _F,
    # A task's check (or a plan's must-have): its task's finish (FULL) carries it; lost, the
    # check runs again with the task.
    "check": _S,
}


def durability(record: EventRecord, state: Sequence[str] | None = None) -> Durability:
    """The durability of writing `record` (with the machine configuration `state`)."""
    if state is not None:
        return Durability.FULL
    declared = DURABILITY[record.kind]
    if record.kind == "process" and not record.data.get("guard_pid"):
        return Durability.RELAXED
    return declared


class JournalRecorder(Recorder):
    """The durable recorder of one journal run: one writer thread commits a queue of writes in
    one transaction (each a savepoint), FULL when any is: a group commit. RELAXED and FULL
    callers wait for it; held writes wait for the next one, or for a SOON one `FLUSH_AFTER / 2`
    old. So a short task is one FULL commit, and a crash loses only held writes."""

    FLUSH_AFTER = 0.05  # seconds a SOON write may wait for its commit
    IDLE_EXIT = 2.0  # seconds the writer thread waits for work before it ends

    def __init__(self, journal: Any, run_id: str):
        self.journal = journal
        self.run_id = run_id
        self._cv = threading.Condition()  # guards everything below
        self._queue: list[_Write] = []
        self._waiting = 0  # RELAXED/FULL writes in the queue (someone waits for them)
        self._soon: float | None = None  # when the oldest queued SOON write was queued
        self._writer: threading.Thread | None = None
        self._stopping = False
        self._kept: BaseException | None = None  # a commit nobody waited for failed
        # The run's tasks, read from the journal once, then kept up to date.
        self._done: set[str] | None = None
        self._attempts: dict[str, int] = {}
        self._refused: dict[str, tuple[BaseException, int]] = {}  # starts the journal refused

    # -- the writer --------------------------------------------------------------------------

    def _queue_write(self, write: Callable[[], Any], level: Durability, **kw: Any) -> Any:
        """Queue `write`; for RELAXED and FULL, wait for its commit and return its result."""
        item = _Write(write, level, **kw)
        waits = level is Durability.RELAXED or level is Durability.FULL
        with self._cv:
            self._queue.append(item)
            if level is Durability.SOON and self._soon is None:
                self._soon = time.monotonic()
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_loop,
                    name=f"looprail-journal-writer {self.run_id}",
                    daemon=True,
                )
                self._writer.start()
            if not waits:
                return None
            self._waiting += 1
            self._cv.notify_all()
            while not item.settled:
                self._cv.wait()
        if item.error is not None:
            raise item.error
        return item.result

    def _write_loop(self) -> None:
        tick = self.FLUSH_AFTER / 2
        idle_until = time.monotonic() + self.IDLE_EXIT
        while True:
            with self._cv:
                while not self._waiting:  # someone waits: commit now
                    now = time.monotonic()
                    if self._stopping or (self._soon is None and now >= idle_until):
                        self._writer, self._stopping = None, False
                        return
                    if self._soon is not None and now - self._soon >= tick:
                        break
                    self._cv.wait(tick)
                batch, self._queue = self._queue, []
                self._waiting, self._soon = 0, None
            self._commit(batch)
            idle_until = time.monotonic() + self.IDLE_EXIT

    def _commit(self, batch: list[_Write]) -> None:
        journal = self.journal
        full = any(w.level is Durability.FULL for w in batch)
        try:
            with nullcontext() if full else journal.relaxed(), journal.transaction():
                for w in batch:
                    try:  # each journal call is atomic (a savepoint inside this transaction)
                        w.result = w.write()
                    except Exception as exc:
                        w.error = exc
        except BaseException as exc:  # nothing of the batch was written
            with self._cv:
                held = [w for w in batch if w.level in (Durability.HELD, Durability.SOON)]
                self._queue[:0] = held  # held again, in front (not timed again)
                if len(held) == len(batch):  # nobody waits: the next call raises it
                    self._kept = self._kept or exc
                for w in batch:
                    w.error = None if w in held else exc
        else:
            for w in batch:
                if w.error is None and w.committed is not None:
                    w.committed()
        finally:
            with self._cv:
                for w in batch:
                    w.settled = True
                self._cv.notify_all()

    def _stop(self) -> None:
        with self._cv:
            writer = self._writer
            if writer is None or writer is threading.current_thread():
                return
            self._stopping = True
            self._cv.notify_all()
        writer.join()

    def _raise_kept(self) -> None:
        """A commit nobody waited for failed (its writes are held again): say so now."""
        if self._kept is not None:
            with self._cv:
                kept, self._kept = self._kept, None
            if kept is not None:
                raise kept

    def flush(self) -> None:
        """Commit what is held now, FULL, and stop the writer thread (a write starts it again)."""
        self._raise_kept()
        with self._cv:
            empty = not self._queue
        if not empty:
            self._queue_write(lambda: None, Durability.FULL)  # commits only what is held
        self._stop()

    def close(self) -> None:
        """Stop the writer thread without committing what is held (lost, as in a crash)."""
        self._stop()

    # -- writes ------------------------------------------------------------------------------

    def event(self, record: EventRecord, *, state: Sequence[str] | None = None) -> None:
        level = durability(record, state)
        if level is Durability.HELD or level is Durability.SOON:
            at = self.journal.timestamp()  # written later: stamped with when it happened
            self._queue_write(lambda: self.journal.record(self.run_id, record, at=at), level)
            return
        if record.kind != "process":  # a child's pid is journaled whatever happened before
            self._raise_kept()
        self._queue_write(lambda: self.journal.record(self.run_id, record, state=state), level)

    def task_started(self, key: str, *, plan_id: str, wave: int | None, message: str = "") -> int:
        """Hold the task's start and return its attempt number: the previous one + 1."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"a task key must be a non-empty string, got {key!r}")
        self._raise_kept()
        done = self._done_set()
        at = self.journal.timestamp()
        self._raise_refused(key)
        if key in done:
            raise JournalError(
                f"{self.journal.path}: task {key} of run {self.run_id} is already done; "
                "finished tasks are not run again"
            )
        # One thread runs a task's start and finish, so nobody else counts this key now.
        attempt = self._attempts[key] = self._attempts.get(key, 0) + 1

        def write() -> None:
            try:
                self.journal.task_started(
                    self.run_id, key, plan_id=plan_id, wave=wave, message=message or None,
                    attempt=attempt, at=at,
                )  # fmt: skip
            except Exception as exc:  # its task's finish (or next start) raises it
                self._refused[key] = (exc, attempt)  # no lock: the writer holds the journal's

        self._queue_write(write, DURABILITY["task_started"])
        return attempt

    def task_finished(
        self, key: str, *, status: str, duration_ms: int | None, message: str | None = None
    ) -> None:
        """Commit the task's end with whatever is held (FULL). A refused start of this task is
        raised here (its finish is not written)."""
        if status not in ("done", "failed"):
            raise ValueError(f"not a finishing task status: {status!r}")
        self._raise_kept()

        def write() -> None:
            self._raise_refused(key)
            self.journal.task_finished(
                self.run_id, key, status=status, duration_ms=duration_ms, message=message
            )

        def committed() -> None:  # the done set follows the journal
            with self._cv:
                if self._done is not None:
                    (self._done.add if status == "done" else self._done.discard)(key)

        self._queue_write(write, DURABILITY["task_finished"], committed=committed)

    def wave_started(self, wave: int, tasks: Iterable[tuple[str, str]]) -> None:
        self._raise_kept()
        planned = list(tasks)
        self._queue_write(
            lambda: self.journal.wave_started(self.run_id, wave, planned),
            DURABILITY["wave_started"],
        )

    def _raise_refused(self, key: str) -> None:
        """A held start of `key` the journal refused reaches the task's next call."""
        refused = self._refused.pop(key, None)
        if refused is not None:
            exc, attempt = refused
            if self._attempts.get(key) == attempt:  # that start never happened
                self._attempts[key] = attempt - 1
            raise exc

    # -- reading -----------------------------------------------------------------------------

    def _done_set(self) -> set[str]:
        """The run's done tasks, read once (a resumed run has some), with the attempts so far."""
        if self._done is None:
            # Under the lock `committed` takes: no finish is lost between the read and the set.
            with self._cv:
                if self._done is None:
                    states = self.journal.task_states(self.run_id)
                    for key, (_, attempt) in states.items():
                        self._attempts[key] = max(attempt, self._attempts.get(key, 0))
                    self._done = {key for key, (status, _) in states.items() if status == "done"}
        return self._done

    def done_tasks(self) -> set[str]:
        done = self._done_set()
        with self._cv:
            return set(done)

    def done_count(self) -> int:
        return len(self._done_set())

    def kinds(self, *kinds: str) -> list[EventRecord]:
        """The run's journaled events of these kinds, in order."""
        return list(self.journal.events(self.run_id, kinds=list(kinds) or None))


@dataclass(slots=True, eq=False)
class _Write:
    """A queued write: run by the writer inside its commit."""

    write: Callable[[], Any]
    level: Durability
    committed: Callable[[], None] | None = None
    result: Any = None
    error: BaseException | None = None
    settled: bool = False
