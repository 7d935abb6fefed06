"""The executor seam: ordering, inline determinism, failure isolation."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from looprail.runtime.executors import InlineExecutor, Settled, make_executor, run_all


def test_jobs_one_runs_inline_in_submission_order() -> None:
    executor = make_executor(1)
    assert isinstance(executor, InlineExecutor)
    order: list[int] = []
    main = threading.get_ident()
    threads: set[int] = set()

    def job(i: int):
        def run() -> int:
            order.append(i)
            threads.add(threading.get_ident())
            return i * 10

        return run

    settled = run_all(executor, [job(i) for i in range(5)])
    assert order == [0, 1, 2, 3, 4]
    assert threads == {main}
    assert [s.value for s in settled] == [0, 10, 20, 30, 40]


def test_more_jobs_is_a_thread_pool() -> None:
    with make_executor(3) as executor:
        assert isinstance(executor, ThreadPoolExecutor)
        assert executor._max_workers == 3


@pytest.mark.parametrize("jobs", [0, -1, True, 1.5])
def test_jobs_must_be_a_positive_integer(jobs) -> None:
    with pytest.raises(ValueError, match="jobs"):
        make_executor(jobs)


def test_results_keep_submission_order_whatever_finishes_first() -> None:
    last_done = threading.Event()
    finished: list[str] = []

    def first() -> str:
        assert last_done.wait(timeout=10), "the last job never ran"
        finished.append("first")
        return "first"

    def last() -> str:
        finished.append("last")
        last_done.set()
        return "last"

    with make_executor(2) as executor:
        settled = run_all(executor, [first, last])
    assert finished == ["last", "first"]
    assert [s.value for s in settled] == ["first", "last"]


@pytest.mark.parametrize("jobs", [1, 4])
def test_one_failure_never_cancels_its_siblings(jobs: int) -> None:
    ran: list[int] = []
    lock = threading.Lock()

    def job(i: int):
        def run() -> int:
            with lock:
                ran.append(i)
            if i == 1:
                raise RuntimeError("task 1 broke")
            return i

        return run

    with make_executor(jobs) as executor:
        settled = run_all(executor, [job(i) for i in range(4)])
    assert sorted(ran) == [0, 1, 2, 3]
    assert [s.ok for s in settled] == [True, False, True, True]
    assert str(settled[1].error) == "task 1 broke"
    assert settled[3].value == 3


def test_inline_executor_refuses_work_after_shutdown() -> None:
    executor = make_executor(1)
    executor.shutdown()
    with pytest.raises(RuntimeError):
        executor.submit(lambda: None)


def test_run_all_with_nothing_to_do() -> None:
    assert run_all(make_executor(1), []) == []


def test_settled_is_a_plain_value() -> None:
    assert Settled(value=3) == Settled(value=3)
    assert Settled(value=None).ok


def test_a_pools_functions_start_only_once_all_are_submitted() -> None:
    """A pool starts one thread per submit; a function already at work would slow the next
    thread's start (the GIL), so none begins before the last one is handed over."""
    import time

    log: list[str] = []

    def functions():
        for i in range(4):
            log.append(f"submitted {i}")
            yield lambda i=i: log.append(f"ran {i}")
            time.sleep(0.05)  # room for a function that was not held back to start

    with make_executor(4) as pool:
        settled = run_all(pool, functions())
    assert all(s.ok for s in settled)
    assert log[:4] == [f"submitted {i}" for i in range(4)]
    assert sorted(log[4:]) == [f"ran {i}" for i in range(4)]


def test_start_threads_starts_the_pools_threads_and_never_waits_for_more() -> None:
    from looprail.runtime.executors import start_threads

    with make_executor(3) as pool:
        before = threading.active_count()
        start_threads(pool, 10)  # more than the pool has: starts its 3, returns
        assert threading.active_count() - before == 3
        settled = run_all(pool, [lambda i=i: i for i in range(5)])
        assert [s.value for s in settled] == list(range(5))
    start_threads(InlineExecutor(), 4)  # nothing to start
