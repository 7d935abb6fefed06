"""How the plans of a wave (and other independent work) run at once: `make_executor(jobs)`, a
thread pool or with `jobs=1` inline (one deterministic order); `run_all` returns every result in
submission order, one failure never cancelling or hiding its siblings."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from looprail.runtime.process import stopping_children

T = TypeVar("T")
_WAKE_S = 0.2


class InlineExecutor(Executor):
    """Runs each submitted function immediately, in the caller's thread."""

    def __init__(self) -> None:
        self._shutdown = False
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new work after shutdown")
        future: Future[T] = Future()
        future.set_running_or_notify_cancel()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # delivered through the future, like a pool would
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True


@contextmanager
def interruptible_executor(jobs: int) -> Iterator[Executor]:
    """`make_executor(jobs)` for a block Ctrl-C/SIGTERM may interrupt: on an exception every
    child is killed, work not started is cancelled, and no worker starts a new child while the
    block waits for the running ones to end."""
    executor = make_executor(jobs)
    try:
        yield executor
    except BaseException:
        with stopping_children():
            executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown(wait=True)


def make_executor(jobs: int) -> Executor:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if jobs == 1:
        return InlineExecutor()
    return ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="looprail")


@dataclass(frozen=True)
class Settled(Generic[T]):
    """How one function ended: its value, or the exception it raised."""

    value: T | None = None
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def start_threads(executor: Executor, count: int) -> None:
    """Have a thread pool start `count` worker threads now, before a wave's plans are handed
    over (a pool starts them one per submit). Nothing for an inline executor."""
    if not isinstance(executor, ThreadPoolExecutor):
        return
    count = min(count, getattr(executor, "_max_workers", count))  # more would never meet
    if count < 2:
        return
    # Only a head start: a barrier that breaks (a thread that cannot start in time) is ignored.
    ready = threading.Barrier(count + 1, timeout=10)
    futures = [executor.submit(ready.wait) for _ in range(count)]
    with contextlib.suppress(threading.BrokenBarrierError):
        ready.wait()  # every worker holds one slot: `count` threads exist
    wait(futures)


def _after(go: threading.Event, fn: Callable[[], T]) -> T:
    go.wait()
    return fn()


def run_all(executor: Executor, fns: Iterable[Callable[[], T]]) -> list[Settled[T]]:
    """Run every function on `executor` and wait for all (an exception in its `Settled`)."""
    if isinstance(executor, InlineExecutor):
        futures = [executor.submit(fn) for fn in fns]
    else:
        # Every function waits until all are submitted: a thread already at work holds the GIL
        # while the pool starts the next one, so the last function would start late.
        go = threading.Event()
        futures = [executor.submit(_after, go, fn) for fn in fns]
        go.set()
    pending = set(futures)
    while pending:
        # Short waits, not one long one: a Ctrl-C/SIGTERM the kernel hands to a worker thread
        # runs its Python handler (in the main thread) only when the main thread next wakes.
        _, pending = wait(pending, timeout=_WAKE_S)
    settled: list[Settled[T]] = []
    for future in futures:
        error = future.exception()
        if error is None:
            settled.append(Settled(value=future.result()))
        elif isinstance(error, Exception):
            settled.append(Settled(error=error))
        else:  # KeyboardInterrupt and friends are not a unit of work failing
            raise error
    return settled
