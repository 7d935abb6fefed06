"""Where a run writes what happened: the events of every transition, hook, gate verdict,
resolver result and task. `MemoryRecorder` keeps them in a list (tests, `--dry-run`, embedding);
`JournalRecorder` writes them to the project's SQLite journal, each state change in the same
transaction as its event row."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from typing import Any, Protocol

from looprail.store.models import EventRecord, TaskUpdate


class Recorder(Protocol):
    def event(self, record: EventRecord, *, state: Sequence[str] | None = None) -> None: ...

    def task_started(
        self, key: str, *, plan_id: str, wave: int | None, message: str = ""
    ) -> int: ...

    def task_finished(
        self, key: str, *, status: str, duration_ms: int | None, message: str | None = None
    ) -> None: ...

    def wave_started(self, wave: int, tasks: Iterable[tuple[str, str]]) -> None: ...

    def done_tasks(self) -> set[str]: ...

    def native_selected(self, hook_ref: str, count: int, limit: int | None) -> None: ...

    def native_selections(self) -> dict[str, int]: ...


def selection_record(hook_ref: str, count: int, limit: int | None) -> EventRecord:
    """`native_selection`: the Action of `hook_ref` was selected for the `count`-th time in this
    run (`limit` is its `maxSelections`). The loop guard's counter, journaled."""
    return EventRecord(
        kind="native_selection",
        cap_id=hook_ref,
        hook_kind="native",
        outcome="selected",
        data={"count": count, "maxSelections": limit},
    )


def selection_counts(events: Iterable[EventRecord]) -> dict[str, int]:
    """The loop guard's counters from `native_selection` events: per hook ref, the highest."""
    counts: dict[str, int] = {}
    for e in events:
        count = e.data.get("count") if e.kind == "native_selection" else None
        if e.cap_id and isinstance(count, int) and not isinstance(count, bool) and count > 0:
            counts[e.cap_id] = max(counts.get(e.cap_id, 0), count)
    return counts


class MemoryRecorder:
    """Events in a list, in order. Thread-safe: plans of a wave run in parallel."""

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

    def native_selected(self, hook_ref: str, count: int, limit: int | None) -> None:
        self.event(selection_record(hook_ref, count, limit))

    def native_selections(self) -> dict[str, int]:
        with self._lock:
            return selection_counts(self.events)

    def kinds(self, *kinds: str) -> list[EventRecord]:
        return [e for e in self.events if not kinds or e.kind in kinds]


class JournalRecorder:
    """The durable recorder: one journal run.

    Events that change no state (points, hook outcomes, verdicts, resolver and read_first
    results, warnings) are held in memory and committed in the same transaction as the next
    state-bearing write (a transition, a task start or end, a halt). That keeps the fsyncs per
    task to the two that matter, and never weakens the contract: every state change commits
    together with its event row and everything that led to it. What a crash can lose is only
    the tail of events since the last state change, whose hooks run again on resume anyway
    (at-least-once)."""

    BUFFERED = frozenset(
        {
            "point",
            "hook",
            "gate_verdict",
            "resolver",
            "read_first",
            "warning",
            "native_hook",
            "contribution",
        }
    )

    def __init__(self, journal: Any, run_id: str):
        self.journal = journal
        self.run_id = run_id
        self._pending: list[EventRecord] = []
        # Held events have a lock of their own: a thread that only adds one (a plan starting
        # while another commits) never waits for a commit. `_lock` orders the commits.
        self._held = threading.Lock()
        self._lock = threading.RLock()
        self._done: set[str] | None = None  # read from the journal once, then kept in memory
        # Group commit (see _commit): writes that arrive while a commit is in flight.
        self._group = threading.Condition(threading.Lock())
        self._queue: list[_Write] = []
        self._committing = False

    def _take(self) -> list[EventRecord]:
        """The held events, to be written in the transaction the caller has open (or opens
        when there are any)."""
        with self._held:
            pending, self._pending = self._pending, []
        return pending

    def _write(self, pending: list[EventRecord]) -> None:
        for record in pending:
            self.journal.record(self.run_id, record)

    def flush(self) -> None:
        """Commit held events now (before the run is finished or handed over)."""
        with self._lock:
            pending = self._take()
            if pending:
                with self.journal.transaction():
                    self._write(pending)

    # Committed without an fsync of their own (`Journal.relaxed`): a child process's pid and
    # start time only matter after a crash of looprail, which such a commit survives (after a
    # crash of the machine there is no process left to reap), and any later FULL commit makes
    # it durable anyway.
    RELAXED = frozenset({"process"})

    def _relaxed(self) -> Any:
        relaxed = getattr(self.journal, "relaxed", None)
        return relaxed() if relaxed else nullcontext()

    def event(self, record: EventRecord, *, state: Sequence[str] | None = None) -> None:
        if state is None and record.kind in self.BUFFERED:
            with self._held:
                self._pending.append(record)
            return
        self._commit(
            lambda: self.journal.record(self.run_id, record, state=state),
            full=state is not None or record.kind not in self.RELAXED,
        )

    def task_started(self, key: str, *, plan_id: str, wave: int | None, message: str = "") -> int:
        # No fsync of its own: the task's finish (FULL) makes it durable; lost in a power cut,
        # it only means the unfinished task runs again. One fsync per task.
        return self._commit(
            lambda: self.journal.task_started(
                self.run_id, key, plan_id=plan_id, wave=wave, message=message or None
            ),
            full=False,
        )

    def task_finished(
        self, key: str, *, status: str, duration_ms: int | None, message: str | None = None
    ) -> None:
        """Commit the task's end (FULL: durable when this returns). With `--jobs N`, tasks
        that end together share one commit (see `_commit`), so they cost one fsync, and each
        caller still returns only once its own row is durable: a finished task never runs
        again."""
        if status not in ("done", "failed"):
            raise ValueError(f"not a finishing task status: {status!r}")

        def finish() -> None:
            self.journal.task_finished(
                self.run_id, key, status=status, duration_ms=duration_ms, message=message
            )

        def committed() -> None:  # the set in memory follows the journal
            if self._done is not None:
                if status == "done":
                    self._done.add(key)
                else:
                    self._done.discard(key)

        self._commit(finish, full=True, committed=committed)

    def wave_started(self, wave: int, tasks: Iterable[tuple[str, str]]) -> None:
        # Relaxed like a task's start: it registers the wave's tasks as pending and decides
        # nothing; lost in a power cut, the wave starts again (the first task's finish, FULL,
        # makes it durable). Its fsync would delay every task of the wave.
        planned = list(tasks)
        self._commit(lambda: self.journal.wave_started(self.run_id, wave, planned), full=False)

    def _commit(
        self,
        do: Callable[[], Any],
        *,
        full: bool,
        committed: Callable[[], None] | None = None,
    ) -> Any:
        """Run the write `do` (one atomic journal call) in a commit, with the held events
        before it, and return its result once that commit is done. A group commit: writes
        that arrive while another commit is in flight queue, and the next caller to find no
        commit in flight commits every queued write in one transaction (each atomic on its
        own, so a refused one fails only its own caller; a failed commit fails them all);
        the others wait for it. The commit is FULL when any write in it needs FULL. So with
        `--jobs N`, starts and finishes that arrive together cost one commit, and every
        caller still returns only once its own write is committed as it asked."""
        mine = _Write(do, full, committed)
        with self._group:
            self._queue.append(mine)
            while not mine.settled:
                if not self._committing:  # lead: commit every write queued so far
                    batch, self._queue = self._queue, []
                    self._committing = True
                    break
                self._group.wait()
            else:  # a leader committed it
                if mine.error is not None:
                    raise mine.error
                return mine.result
        try:
            self._commit_batch(batch)
        finally:
            with self._group:
                for w in batch:
                    w.settled = True
                self._committing = False
                self._group.notify_all()
        if mine.error is not None:
            raise mine.error
        return mine.result

    def _commit_batch(self, batch: list[_Write]) -> None:
        try:
            full = any(w.full for w in batch)
            with self._lock, nullcontext() if full else self._relaxed():
                pending = self._take()
                # One write and no held event: its own transaction is the commit.
                alone = len(batch) == 1 and not pending
                with nullcontext() if alone else self.journal.transaction():
                    self._write(pending)
                    for w in batch:
                        try:  # atomic on its own (a savepoint): a refused write leaves no trace
                            w.result = w.do()
                        except Exception as exc:
                            w.error = exc
                for w in batch:
                    if w.error is None and w.committed is not None:
                        w.committed()
        except BaseException as exc:
            for w in batch:
                w.error = w.error or exc

    def _done_set(self) -> set[str]:
        with self._lock:
            if self._done is None:
                self._done = {
                    t.task_key for t in self.journal.tasks(self.run_id) if t.status == "done"
                }
            return self._done

    def done_tasks(self) -> set[str]:
        with self._lock:
            return set(self._done_set())

    def done_count(self) -> int:
        return len(self._done_set())

    def native_selected(self, hook_ref: str, count: int, limit: int | None) -> None:
        """Committed at once (not held like `native_hook` rows): the count is durable before
        the Action is delivered, so no crash or resume can spend a guard twice."""
        self.event(selection_record(hook_ref, count, limit))

    def native_selections(self) -> dict[str, int]:
        """The loop guard's counters of this run so far (a resumed run continues them)."""
        return selection_counts(self.journal.events(self.run_id, kinds=["native_selection"]))


class _Write:
    """A write waiting for its (group) commit."""

    __slots__ = ("committed", "do", "error", "full", "result", "settled")

    def __init__(self, do: Callable[[], Any], full: bool, committed: Callable[[], None] | None):
        self.do, self.full, self.committed = do, full, committed
        self.result: Any = None
        self.settled = False
        self.error: BaseException | None = None


__all__ = ["EventRecord", "JournalRecorder", "MemoryRecorder", "Recorder", "TaskUpdate"]
