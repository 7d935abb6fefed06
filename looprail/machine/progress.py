"""Progress for people: what is dispatched, verdicts, durations. Plain lines when the output is
not a terminal (CI, pipes, logs); on a terminal the same lines plus a live status line that says
where the loop is (step, wave, tasks done) and is redrawn in place."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from looprail.textsafe import one_line


class Progress:
    def __init__(
        self, stream: TextIO | None = None, *, live: bool | None = None, quiet: bool = False
    ):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.quiet = quiet
        self._lock = threading.Lock()
        self._status = ""
        self._start = time.monotonic()
        # Terminal control of our own bypasses the CLI's control-character filter; data never.
        self._control = getattr(self.stream, "write_trusted", self.stream.write)

    def _write(self, text: str) -> None:
        if self.live and self._status:
            self._control("\r\x1b[2K")
        self.stream.write(one_line(text) + "\n")
        if self.live and self._status:
            self._control(self._status)
        self.stream.flush()

    def line(self, text: str) -> None:
        if self.quiet:
            return
        with self._lock:
            self._write(text)

    def warn(self, text: str) -> None:
        with self._lock:
            self._write(f"  ! {text}")

    def status(self, text: str) -> None:
        """The live one-line status (terminals only)."""
        if not self.live or self.quiet:
            return
        with self._lock:
            elapsed = time.monotonic() - self._start
            self._status = f"\x1b[2m… {one_line(text)}  [{elapsed:0.1f}s]\x1b[0m"
            self._control("\r\x1b[2K" + self._status)
            self.stream.flush()

    def close(self) -> None:
        if self.live and self._status:
            with self._lock:
                self._control("\r\x1b[2K")
                self.stream.flush()
                self._status = ""


def plural(n: int, noun: str, many: str | None = None) -> str:
    """`1 error`, `2 errors`, `0 errors` (`many` for irregular nouns: `plural(n, "dispatch",
    "dispatches")`)."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


def fmt_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
