"""The journal's one-commit task path: `Journal.task_ran` (a held start and its finish as one
write) equals `task_started` + `task_finished`; a transaction without savepoints never commits
a failed write; a task row kept in memory is never used once another connection wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.store import EventRecord, Journal, JournalError
from tests.support import examples

RUN = "01TESTRUN0000000000000000X"


def _clock():
    moments = iter(
        datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=7 * i) for i in range(10**6)
    )
    return lambda: next(moments)


def _journal(project: Path, before: str | None, clock=None) -> Journal:
    """A run holding task `k` in state `before` (None: no row), written the same way."""
    journal = Journal.open(project, clock=clock or _clock())
    journal.start_run("1", state=["execute"], run_id=RUN)
    if before is not None:
        journal.wave_started(RUN, 1, [("k", "p")])
    if before in ("running", "failed"):
        journal.task_started(RUN, "k", plan_id="p", wave=1)
    if before == "failed":
        journal.task_finished(RUN, "k", status="failed", duration_ms=3)
    return journal


# Every property here: each example makes its own journals with the (function-scoped) tmp_path_factory.
_PROPERTY = settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _contents(journal: Journal) -> tuple[list, list]:
    rows = [t.model_dump() for t in journal.tasks(RUN)]
    events = [e.model_dump() for e in journal.events(RUN)]
    return rows, events


@_PROPERTY
@given(
    before=st.sampled_from([None, "pending", "running", "failed"]),
    status=st.sampled_from(["done", "failed"]),
    duration=st.one_of(st.none(), st.integers(min_value=0, max_value=10**6)),
    start_message=st.one_of(st.none(), st.text(max_size=5)),
    message=st.one_of(st.none(), st.text(max_size=5)),
    plan=st.sampled_from([None, "p", "q"]),
    wave=st.sampled_from([None, 1, 2]),
)
def test_task_ran_writes_what_a_start_and_a_finish_write(
    tmp_path_factory, before, status, duration, start_message, message, plan, wave
):
    two = _journal(tmp_path_factory.mktemp("two"), before)
    one = _journal(tmp_path_factory.mktemp("one"), before)
    with two, one:
        at = two.timestamp()
        assert one.timestamp() == at  # the clocks are in step
        with two.transaction():
            a = two.task_started(RUN, "k", plan_id=plan, wave=wave, message=start_message, at=at)
            two.task_finished(RUN, "k", status=status, duration_ms=duration, message=message)
        b = one.task_ran(
            RUN,
            "k",
            started_at=at,
            plan_id=plan,
            wave=wave,
            start_message=start_message,
            status=status,
            duration_ms=duration,
            message=message,
        )
        assert a == b
        assert _contents(one) == _contents(two)
        one.verify_run(RUN)
        two.verify_run(RUN)


_PROCESS = st.builds(
    lambda pid, guard, argv0: EventRecord(
        kind="process",
        data={"pid": pid, "start": 7, "guard_pid": guard, "guard_start": 8, "argv0": argv0},
    ),
    st.integers(1, 2**22),
    st.one_of(st.none(), st.integers(1, 2**22)),
    st.text(max_size=8),
)


@_PROPERTY
@given(
    before=st.sampled_from([None, "pending", "running", "failed"]),
    status=st.sampled_from(["done", "failed"]),
    between=st.lists(_PROCESS, max_size=3),
)
def test_task_ran_with_records_between_writes_what_the_three_steps_write(
    tmp_path_factory, before, status, between
):
    """A child's `process` records written between a held start and its finish (one INSERT of
    all the rows) equal `task_started`, `record(at=…)` for each, and `task_finished`. One
    instant for every other write: the step-by-step path reads the clock once more."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    two = _journal(tmp_path_factory.mktemp("two"), before, clock=lambda: now)
    one = _journal(tmp_path_factory.mktemp("one"), before, clock=lambda: now)
    with two, one:
        at = two.timestamp()
        spawned = [f"2026-01-01T00:00:00.{i:03d}Z" for i in range(len(between))]  # earlier
        with two.transaction():
            a = two.task_started(RUN, "k", plan_id="p", wave=1, at=at)
            for ts, record in zip(spawned, between, strict=True):
                two.record(RUN, record, at=ts)
            two.task_finished(RUN, "k", status=status, duration_ms=5)
        b = one.task_ran(
            RUN, "k", started_at=at, plan_id="p", wave=1, status=status, duration_ms=5,
            between=list(zip(spawned, between, strict=True)),
        )  # fmt: skip
        assert a == b
        assert _contents(one) == _contents(two)
        one.verify_run(RUN)
        two.verify_run(RUN)


def test_task_ran_refuses_a_done_task_and_leaves_no_trace(tmp_path):
    with _journal(tmp_path, "pending") as journal:
        journal.task_ran(RUN, "k", started_at=journal.timestamp(), status="done")
        before = _contents(journal)
        with pytest.raises(JournalError, match="already done"):
            journal.task_ran(RUN, "k", started_at=journal.timestamp(), status="done")
        assert _contents(journal) == before
        journal.verify_run(RUN)


def test_a_transaction_without_savepoints_never_commits_a_failed_write(tmp_path):
    with _journal(tmp_path, "pending") as journal:
        journal.task_ran(RUN, "k", started_at=journal.timestamp(), status="done")
        before = _contents(journal)
        statements: list[str] = []
        journal._conn.set_trace_callback(statements.append)
        with (
            pytest.raises(JournalError, match="a write failed inside a transaction"),
            journal.transaction(savepoints=False),
        ):
            journal.record(RUN, EventRecord(kind="warning", message="kept?"))
            with pytest.raises(JournalError, match="already done"):
                journal.task_started(RUN, "k")  # refused, and the caller carries on
        journal._conn.set_trace_callback(None)
        assert not any("SAVEPOINT" in s for s in statements)
        assert _contents(journal) == before  # the warning went with it
        journal.record(RUN, EventRecord(kind="warning", message="later"))  # usable again
        journal.verify_run(RUN)


@pytest.mark.parametrize("verified", [False, True])
def test_a_task_row_written_by_another_connection_is_read_again(tmp_path, verified):
    """This connection keeps the rows it wrote; once another one wrote the run, they are
    read from the file again (else a start of a task finished elsewhere would pass)."""
    with _journal(tmp_path, "pending") as mine:
        mine.task_started(RUN, "k")
        with Journal.open(tmp_path) as other:
            other.task_finished(RUN, "k", status="done")
        if verified:  # takes the other's seal as known: still not this one's rows
            mine.verify_run(RUN)
        with pytest.raises(JournalError, match="already done"):
            mine.task_started(RUN, "k")
        mine.verify_run(RUN)
