"""Stop signals (SIGTERM and SIGHUP stop a run as Ctrl-C does) and child processes (journaled,
so a resume can reap what outlived a crash) while a run runs."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from looprail.journal.recorder import EventRecord
from looprail.runtime.process import set_spawn_listener, signal_name


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP during a run: handled like Ctrl-C (the CLI exits 128 + signal)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal_name(signum))


def signal_label(exc: BaseException) -> str:
    return signal_name(exc.signum) if isinstance(exc, Terminated) else "Ctrl-C"


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise `Terminated` in the main thread (elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: Any) -> None:
        raise Terminated(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def journal_children(recorder: Any) -> Iterator[None]:
    """Journal every child process the run starts (pid and start time, and its guard's)."""

    def listener(spawned: Any) -> None:
        recorder.event(EventRecord(kind="process", data=spawned.as_data()))

    set_spawn_listener(listener)
    try:
        yield
    finally:
        set_spawn_listener(None)
