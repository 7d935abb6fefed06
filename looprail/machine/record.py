"""Where a run writes what happened: the events of every transition, hook, gate verdict,
resolver result and task. `MemoryRecorder` keeps them in a list (tests, `--dry-run`, embedding);
`JournalRecorder` writes them to the project's SQLite journal, each state change in the same
transaction as its event row."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext, suppress
from typing import Any, Protocol

from looprail.store.models import EventRecord, TaskUpdate
from looprail.store.schema import JournalError


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

    What is committed when:

    - Events that change no state (points, hook outcomes, verdicts, resolver and read_first
      results, warnings) are held in memory and written, in order, in the next commit.
    - A task's start is held too ("deferred, never lost"): `task_started` returns the attempt
      number at once (computed from the run's task rows, read once and kept in memory) and the
      start's row and event are written first in the next commit of anything, usually the
      task's own finish. So a short task costs one (FULL) commit.
    - A held start never stays unwritten for long: a flusher thread commits held writes
      (relaxed: no fsync) at most `FLUSH_AFTER` seconds after the oldest start was held, so a
      long task shows as running to every reader within that time. A child's `process` event
      (its pid, for a resume to reap what outlived a killed looprail) is held the same way
      when the child runs under a guard, which kills it if looprail dies; an unguarded
      child's commits at once (relaxed) and carries any held start with it, as does an agent
      call's record (its cost, which a resumed run's budget counts).
    - A task's finish, a state change and every other write commit FULL before they return.

    A finished task never runs again: its finish is durable (with its start) before
    `task_finished` returns. What a crash can lose is only held writes: a start (the task,
    never finished, runs again, as it would have anyway) and the tail of events since the
    last commit, whose hooks run again on resume (at-least-once)."""

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
    # Committed at once but without an fsync of their own (`Journal.relaxed`): such a commit
    # survives a crash of looprail, and the next FULL commit (the task's finish) makes it
    # durable. A child process's pid and start time only matter after a crash of looprail
    # (after a crash of the machine there is no process left to reap); an agent call's cost
    # must survive a killed looprail, since the budget of a resumed run counts it, but need
    # not cost a real agent task a second fsync.
    RELAXED = frozenset({"process", "agent_call"})
    FLUSH_AFTER = 0.05  # seconds a held start may wait for its commit
    IDLE_EXIT = 2.0  # seconds the flusher thread waits for work before it ends

    def __init__(self, journal: Any, run_id: str):
        self.journal = journal
        self.run_id = run_id
        # Held writes (events and task starts), in order. `_held` guards them and the task
        # state in memory; nothing else is ever locked while it is held. A thread that only
        # holds a write (a plan starting while another commits) never waits for a commit.
        self._pending: list[_Held] = []
        self._held = threading.Lock()
        self._lock = threading.RLock()  # orders the commits
        # The run's tasks, read from the journal once, then kept in memory.
        self._done: set[str] | None = None
        self._attempts: dict[str, int] = {}
        self._start_errors: dict[str, BaseException] = {}  # held starts the journal refused
        # Group commit (see _commit): writes that arrive while a commit is in flight.
        self._group = threading.Condition(threading.Lock())
        self._queue: list[_Write] = []
        self._committing = False
        # The flusher (see _flusher_loop).
        self._wake = threading.Condition(self._held)
        self._held_since: float | None = None  # when the oldest held start was held
        self._flusher: threading.Thread | None = None
        self._stopping = False
        self._kept: BaseException | None = None  # a flusher commit's error, for the next call

    # -- held writes -------------------------------------------------------------------------

    def _take(self) -> list[_Held]:
        """The held writes, to be written in the transaction the caller has open."""
        with self._held:
            pending, self._pending = self._pending, []
            self._held_since = None
        return pending

    def _give_back(self, taken: list[_Held]) -> None:
        """A commit that failed as a whole wrote nothing: its held writes are held again (in
        front: they came first). Not timed again: its error reaches the next call."""
        if taken:
            with self._held:
                self._pending[:0] = taken

    def _write_held(self, taken: list[_Held], *, flat: bool) -> None:
        for item in taken:
            if isinstance(item, _Start):
                self._write_start(item, flat=flat)
            elif isinstance(item, _Child):
                self.journal.record(self.run_id, item.record, at=item.at)
            else:
                self.journal.record(self.run_id, item)

    def _write_start(self, start: _Start, *, flat: bool) -> None:
        def write() -> None:
            attempt = self.journal.task_started(
                self.run_id,
                start.key,
                plan_id=start.plan_id,
                wave=start.wave,
                message=start.message or None,
                at=start.at,
            )
            if attempt != start.attempt:  # never expected: memory and journal disagree
                raise JournalError(
                    f"task {start.key}: attempt {start.attempt} was reported, the journal "
                    f"counts {attempt}; not recorded"
                )

        if flat:  # any failure fails the transaction; the batch is retried with savepoints
            write()
            return
        try:
            with self.journal.transaction():  # a savepoint: a refused start leaves no trace
                write()
        except Exception as exc:
            with self._held:  # its task's finish (or next start) raises it
                self._start_errors[start.key] = exc
                if self._attempts.get(start.key) == start.attempt:
                    self._attempts[start.key] = start.attempt - 1

    # -- the flusher -------------------------------------------------------------------------

    def _arm(self) -> None:
        """A start was just held (`_held` is held): make sure it is committed in time. The
        flusher is not woken (a wake-up per task would cost more than the rest of the
        recorder): it looks every `FLUSH_AFTER / 2` seconds for a start held at least that
        long, so a start waits at most `FLUSH_AFTER` for its commit."""
        if self._held_since is None:
            self._held_since = time.monotonic()
        if self._flusher is None and not self._stopping:
            self._flusher = threading.Thread(
                target=self._flusher_loop,
                name=f"looprail-journal-flusher {self.run_id}",
                daemon=True,
            )
            self._flusher.start()

    def _flusher_loop(self) -> None:
        """Commit held writes once the oldest held start has waited `FLUSH_AFTER / 2` (seen
        at a tick, every `FLUSH_AFTER / 2`). Ends when stopped, or after `IDLE_EXIT` seconds
        without a held start (the next start starts another)."""
        tick = self.FLUSH_AFTER / 2
        idle_until = time.monotonic() + self.IDLE_EXIT
        while True:
            with self._held:
                while True:
                    if self._stopping:
                        return
                    now = time.monotonic()
                    since = self._held_since
                    if since is not None:
                        idle_until = now + self.IDLE_EXIT
                        if now - since >= tick:
                            break
                    elif now >= idle_until:
                        self._flusher = None
                        return
                    self._wake.wait(tick)
            # Nobody waits for this commit: _commit_batch keeps its error for the next call.
            with suppress(BaseException):
                self._commit(_nothing, full=False, flusher=True)

    def _stop_flusher(self) -> None:
        with self._held:
            thread = self._flusher
            if thread is None:
                return
            self._stopping = True
            self._wake.notify_all()
        if thread is not threading.current_thread():
            thread.join()
        with self._held:
            self._stopping = False
            if self._flusher is thread:
                self._flusher = None

    def _raise_kept(self) -> None:
        """A commit by the flusher failed (its writes are held again): the next call says so."""
        if self._kept is not None:
            with self._held:
                kept, self._kept = self._kept, None
            if kept is not None:
                raise kept

    def flush(self) -> None:
        """Commit held writes now (before the run is finished or handed over), FULL, and stop
        the flusher thread (a later start starts it again)."""
        self._stop_flusher()
        self._raise_kept()
        with self._held:
            empty = not self._pending
        if not empty:
            self._commit(_nothing, full=True)

    def close(self) -> None:
        """Stop the flusher thread without committing anything (the run ends abnormally: what
        is still held is lost as in a crash). `flush` is the normal end."""
        self._stop_flusher()

    # -- writes ------------------------------------------------------------------------------

    def _relaxed(self) -> Any:
        relaxed = getattr(self.journal, "relaxed", None)
        return relaxed() if relaxed else nullcontext()

    def event(self, record: EventRecord, *, state: Sequence[str] | None = None) -> None:
        if state is None and record.kind in self.BUFFERED:
            with self._held:
                self._pending.append(record)
            return
        if state is None and record.kind == "process" and record.data.get("guard_pid"):
            # A child under a guard dies with looprail (the guard's death signal), so its pid
            # record is only a second line of defence: held like a start, it is committed
            # with the task's finish (a short task stays one commit) or by the flusher.
            stamp = getattr(self.journal, "timestamp", None)
            with self._held:
                self._pending.append(_Child(record, stamp() if stamp is not None else None))
                self._arm()
            return
        relaxed = state is None and record.kind in self.RELAXED
        if not relaxed:  # a process event is journaled whatever happened before (see _notify)
            self._raise_kept()
        self._commit(
            lambda: self.journal.record(self.run_id, record, state=state), full=not relaxed
        )

    def task_started(self, key: str, *, plan_id: str, wave: int | None, message: str = "") -> int:
        """Hold the task's start and return its attempt number (see the class)."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"a task key must be a non-empty string, got {key!r}")
        self._raise_kept()
        self._load()
        stamp = getattr(self.journal, "timestamp", None)
        at = stamp() if stamp is not None else None  # written later: when it really started
        with self._held:
            refused = self._start_errors.pop(key, None)
            if refused is None and self._done is not None and key in self._done:
                refused = JournalError(
                    f"{self.journal.path}: task {key} of run {self.run_id} is already done; "
                    "finished tasks are not run again"
                )
            if refused is not None:
                raise refused
            attempt = self._attempts.get(key, 0) + 1
            self._attempts[key] = attempt
            self._pending.append(_Start(key, plan_id, wave, message, attempt, at))
            self._arm()
        return attempt

    def task_finished(
        self, key: str, *, status: str, duration_ms: int | None, message: str | None = None
    ) -> None:
        """Commit the task's end (FULL: durable when this returns), with its held start and
        whatever else is held. With `--jobs N`, tasks that end together share one commit (see
        `_commit`), so they cost one fsync, and each caller still returns only once its own
        row is durable: a finished task never runs again. A start of this task the journal
        refused is raised here (its finish is not written)."""
        if status not in ("done", "failed"):
            raise ValueError(f"not a finishing task status: {status!r}")
        self._raise_kept()

        def finish() -> None:
            refused = self._start_errors.get(key)
            if refused is not None:
                raise refused
            self.journal.task_finished(
                self.run_id, key, status=status, duration_ms=duration_ms, message=message
            )

        def committed() -> None:  # the set in memory follows the journal
            with self._held:
                if self._done is not None:
                    if status == "done":
                        self._done.add(key)
                    else:
                        self._done.discard(key)

        try:
            self._commit(
                finish,
                full=True,
                committed=committed,
                finish=_Finish(key, status, duration_ms, message),
            )
        except BaseException:
            with self._held:
                self._start_errors.pop(key, None)  # raised: it reached its caller
            raise

    def wave_started(self, wave: int, tasks: Iterable[tuple[str, str]]) -> None:
        # Relaxed: it registers the wave's tasks as pending and decides nothing; lost in a
        # power cut, the wave starts again (the first task's finish, FULL, makes it durable).
        # Its fsync would delay every task of the wave.
        self._raise_kept()
        planned = list(tasks)
        self._commit(lambda: self.journal.wave_started(self.run_id, wave, planned), full=False)

    def _commit(
        self,
        do: Callable[[], Any],
        *,
        full: bool,
        committed: Callable[[], None] | None = None,
        flusher: bool = False,
        finish: _Finish | None = None,
    ) -> Any:
        """Run the write `do` (one atomic journal call) in a commit, with the held writes
        before it, and return its result once that commit is done. A group commit: writes
        that arrive while another commit is in flight queue, and the next caller to find no
        commit in flight commits every queued write in one transaction (each atomic on its
        own, so a refused one fails only its own caller; a failed commit fails them all);
        the others wait for it. The commit is FULL when any write in it needs FULL. So with
        `--jobs N`, finishes that arrive together cost one commit, and every caller still
        returns only once its own write is committed as it asked."""
        mine = _Write(do, full, committed, flusher)
        mine.finish = finish
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
        taken: list[_Held] = []
        try:
            full = any(w.full for w in batch)
            with self._lock, nullcontext() if full else self._relaxed():
                taken = self._take()
                writes = [w for w in batch if w.do is not _nothing]
                if not taken and not writes:
                    return
                if not taken and len(writes) == 1:  # its own transaction is the commit
                    self._run(writes[0])
                else:
                    # Usually every write succeeds: one transaction without savepoints. If
                    # one fails, that one is rolled back with the rest and the batch is
                    # written again, each write in a savepoint of its own.
                    try:
                        self._write_batch(taken, writes, flat=True)
                    except _FlatFailed:
                        for w in writes:
                            w.result = w.error = None
                        self._write_batch(taken, writes, flat=False)
                for w in writes:
                    if w.error is None and w.committed is not None:
                        w.committed()
        except BaseException as exc:
            self._give_back(taken)  # nothing of them was written: hold them again
            for w in batch:
                w.error = w.error or exc
            if all(w.flusher for w in batch):  # nobody waits for this commit: keep its error
                with self._held:
                    self._kept = self._kept or exc

    def _write_batch(self, taken: list[_Held], writes: list[_Write], *, flat: bool) -> None:
        # A task's start held last (or followed only by its child's `process` records) and
        # its finish first (the usual short task, its finish leading the commit): one write
        # of all of them (`Journal.task_ran`), in the same order.
        ran: _Start | None = None
        between: list[tuple[str, EventRecord]] = []
        first = writes[0] if writes else None
        last = len(taken) - 1
        while last >= 0 and _stamped_child(taken[last]):
            last -= 1
        start = taken[last] if last >= 0 else None
        if (
            isinstance(start, _Start)
            and first is not None
            and first.finish is not None
            and start.key == first.finish.key
            and start.at is not None
            and first.finish.key not in self._start_errors
        ):
            between = [
                (c.at, c.record)
                for c in taken[last + 1 :]
                if isinstance(c, _Child) and c.at is not None
            ]
            ran, taken = start, taken[:last]
        with self.journal.transaction(savepoints=not flat):
            try:
                self._write_held(taken, flat=flat)
                for w in writes:
                    if ran is not None and w is first:
                        self._write_ran(ran, w, between, flat=flat)
                    elif flat:
                        w.result = w.do()
                    else:
                        self._run(w)
            except Exception as exc:
                if flat:
                    raise _FlatFailed from exc
                raise

    def _write_ran(
        self, start: _Start, w: _Write, between: list[tuple[str, EventRecord]], *, flat: bool
    ) -> None:
        """A held start, its child's records and its task's finish, as one write (see
        `_write_batch`)."""
        finish = w.finish
        assert finish is not None and start.at is not None
        try:
            with self.journal.transaction():  # flat: no savepoint; else one for both
                attempt = self.journal.task_ran(
                    self.run_id,
                    start.key,
                    started_at=start.at,
                    plan_id=start.plan_id,
                    wave=start.wave,
                    start_message=start.message or None,
                    status=finish.status,
                    duration_ms=finish.duration_ms,
                    message=finish.message,
                    between=between,
                )
                if attempt != start.attempt:  # never expected: memory and journal disagree
                    raise JournalError(
                        f"task {start.key}: attempt {start.attempt} was reported, the "
                        f"journal counts {attempt}; not recorded"
                    )
        except Exception as exc:
            if flat:
                raise
            w.error = exc  # the start failed with it: its caller is this finish's
            with self._held:
                if self._attempts.get(start.key) == start.attempt:
                    self._attempts[start.key] = start.attempt - 1

    @staticmethod
    def _run(w: _Write) -> None:
        try:  # atomic on its own (its journal call is one transaction or savepoint)
            w.result = w.do()
        except Exception as exc:
            w.error = exc

    # -- reading -----------------------------------------------------------------------------

    def _load(self) -> None:
        """Read the run's task rows once (a resumed run has some): which are done, and the
        attempts so far (a start's attempt is the previous one + 1, as the journal counts)."""
        if self._done is not None:
            return
        with self._lock:  # no commit changes the rows while they are read
            if self._done is None:
                states = self.journal.task_states(self.run_id)
                with self._held:
                    for key, (_, attempt) in states.items():
                        self._attempts[key] = max(attempt, self._attempts.get(key, 0))
                    self._done = {key for key, (status, _) in states.items() if status == "done"}

    def _done_set(self) -> set[str]:
        self._load()
        assert self._done is not None
        return self._done

    def done_tasks(self) -> set[str]:
        with self._held:
            done = self._done
            if done is not None:
                return set(done)
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


def _nothing() -> None:
    """The write of a commit that only writes what is held (flush, the flusher)."""


class _FlatFailed(Exception):
    """A write of a batch without savepoints failed: write it again with savepoints."""


class _Start:
    """A held task start."""

    __slots__ = ("at", "attempt", "key", "message", "plan_id", "wave")

    def __init__(
        self, key: str, plan_id: str, wave: int | None, message: str, attempt: int, at: str | None
    ):
        self.key, self.plan_id, self.wave, self.message = key, plan_id, wave, message
        self.attempt, self.at = attempt, at


class _Child:
    """A held `process` event of a guarded child, with when it started."""

    __slots__ = ("at", "record")

    def __init__(self, record: EventRecord, at: str | None):
        self.record, self.at = record, at


_Held = EventRecord | _Start | _Child  # what the recorder holds, in order


def _stamped_child(item: _Held) -> bool:
    return isinstance(item, _Child) and item.at is not None


class _Finish:
    """What a task's finish writes (for `Journal.task_ran`, see `_write_batch`)."""

    __slots__ = ("duration_ms", "key", "message", "status")

    def __init__(self, key: str, status: str, duration_ms: int | None, message: str | None):
        self.key, self.status, self.duration_ms, self.message = key, status, duration_ms, message


class _Write:
    """A write waiting for its (group) commit."""

    __slots__ = ("committed", "do", "error", "finish", "flusher", "full", "result", "settled")

    def __init__(
        self,
        do: Callable[[], Any],
        full: bool,
        committed: Callable[[], None] | None,
        flusher: bool = False,
    ):
        self.do, self.full, self.committed, self.flusher = do, full, committed, flusher
        self.finish: _Finish | None = None
        self.result: Any = None
        self.settled = False
        self.error: BaseException | None = None


__all__ = ["EventRecord", "JournalRecorder", "MemoryRecorder", "Recorder", "TaskUpdate"]
