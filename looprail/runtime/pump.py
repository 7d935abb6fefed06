"""A child's pipes, driven from the calling thread: its stdin fed, its stdout and stderr
drained with one selector, each capped, every chunk seen as it arrives."""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import time
from collections.abc import Callable
from typing import Any

# How long to keep draining the pipes after the child has exited (or been killed): its last
# writes arrive within this, and a grandchild holding a pipe open cannot hold the call longer.
_DRAIN_GRACE_S = 0.5
_CHUNK = 65536


def pump(
    proc: Any,
    data: bytes | None,
    deadline: float,
    cap: int,
    on_output: Callable[[str, bytes], None] | None,
    kill: Callable[[], None],
) -> tuple[bool, bytearray, bytearray, bool]:
    """Feed stdin and drain stdout/stderr from this thread with one selector, until the child
    has exited and the pipes are closed, or the deadline (then the group is killed), or a short
    grace after the child's exit (a grandchild holding a pipe); `kill()` stops and reaps it.
    Returns (timed_out, stdout, stderr, truncated); every pipe is closed."""
    output = _Output(proc, cap, on_output)
    timed_out = False
    pending = memoryview(data or b"")
    stop_at: float | None = None  # set once the child has exited (or was killed)
    with selectors.DefaultSelector() as selector:
        for stream in (proc.stdout, proc.stderr):
            selector.register(stream, selectors.EVENT_READ)
        if proc.stdin is not None:
            if pending:
                selector.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        try:
            while selector.get_map():
                now = time.monotonic()
                if stop_at is None and proc.poll() is not None:
                    stop_at = now + _DRAIN_GRACE_S
                if stop_at is None and now >= deadline:
                    timed_out = True
                    kill()
                    stop_at = now + _DRAIN_GRACE_S
                if stop_at is not None and now >= stop_at:
                    break
                wake = min(deadline if stop_at is None else stop_at, now + 0.1) - now
                for key, _events in selector.select(max(wake, 0)):
                    if key.fileobj is proc.stdin:
                        pending = _feed(selector, key, pending)
                    else:
                        output.read(selector, key)
        finally:
            close_pipes(proc)
    return timed_out, output.sinks[proc.stdout], output.sinks[proc.stderr], output.truncated


def _feed(
    selector: selectors.BaseSelector, key: selectors.SelectorKey, pending: memoryview
) -> memoryview:
    """Write what the child's stdin can take; unregister and close it once all is written."""
    try:
        written = os.write(key.fd, pending[: select.PIPE_BUF])
    except OSError:  # the child closed its stdin: it need not read it
        written = len(pending)
    pending = pending[written:]
    if not pending:
        selector.unregister(key.fileobj)
        with contextlib.suppress(OSError):
            key.fileobj.close()  # type: ignore[union-attr]
    return pending


class _Output:
    """What the child printed, per pipe, up to `cap` bytes each (`truncated` past it)."""

    def __init__(self, proc: Any, cap: int, on_output: Callable[[str, bytes], None] | None):
        self.sinks: dict[object, bytearray] = {proc.stdout: bytearray(), proc.stderr: bytearray()}
        self.names: dict[object, str] = {proc.stdout: "stdout", proc.stderr: "stderr"}
        self.cap = cap
        self.on_output = on_output
        self.truncated = False

    def read(self, selector: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
        chunk = os.read(key.fd, _CHUNK)
        if not chunk:
            selector.unregister(key.fileobj)
            return
        if self.on_output is not None:
            self.on_output(self.names[key.fileobj], chunk)
        sink = self.sinks[key.fileobj]
        room = self.cap - len(sink)
        if room > 0:
            sink.extend(chunk[:room])
        if len(chunk) > max(room, 0):
            self.truncated = True  # keep draining so the child never blocks on a full pipe


def close_pipes(proc: Any) -> None:
    """Close the child's pipes, whatever state they are in."""
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
