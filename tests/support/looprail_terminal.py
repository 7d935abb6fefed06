"""A real pseudo-terminal for tests: `looprail` started with a pty as its controlling terminal
(stdin, stdout and stderr), so it sees `isatty()` as a person's shell would, echo and all."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

from tests.support.procs import LOOPRAIL

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")


def _controlling_tty() -> None:  # runs in the child, before exec
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """`looprail ARGS…` on a pty: `expect` what it shows, `send` what a person types."""

    def __init__(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.proc = subprocess.Popen(
            [*LOOPRAIL, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            preexec_fn=_controlling_tty,
            close_fds=True,
        )
        os.close(slave)
        self.fd = master
        self.raw = b""
        self._mark = 0

    @property
    def text(self) -> str:
        """Everything shown so far, escape sequences removed."""
        return _ANSI.sub(b"", self.raw).decode(errors="replace").replace("\r", "")

    def _pump(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the other side closed
            return False
        if not chunk:
            return False
        self.raw += chunk
        return True

    def expect(self, needle: str, timeout: float = 60) -> str:
        """Wait until `needle` is shown after the last thing expected; returns the text."""
        end = time.monotonic() + timeout
        while True:
            text = self.text
            at = text.find(needle, self._mark)
            if at != -1:
                self._mark = at + len(needle)
                return text
            if time.monotonic() > end or not self._pump(0.1):
                if needle in self.text[self._mark :]:
                    continue
                raise AssertionError(f"not shown: {needle!r}; the terminal shows:\n{self.text}")

    def send(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    def wait(self, timeout: float = 120) -> int:
        """Read to the end and return the exit code."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self._pump(0.1):
            if self.proc.poll() is not None and not select.select([self.fd], [], [], 0.2)[0]:
                break
        code = self.proc.wait(timeout=max(1.0, end - time.monotonic()))
        os.close(self.fd)
        return code

    def kill(self) -> None:
        """SIGKILL looprail and everything in its session (its agents)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        os.close(self.fd)
