"""A program on a real pseudo-terminal: the pty is its stdin, stdout, stderr and controlling
terminal, in a session of its own, with a window size, so it sees `isatty()` as in a person's
shell (echo and all); the test reads and types into it as that person would (`expect`, `send`,
`keys`, `wait`). `Terminal.looprail(ARGS…)` starts `looprail ARGS…`.

`answer=True` also answers what full-screen programs ask their terminal (the cursor position,
the device attributes, the colours), as a terminal emulator does: the real agent CLIs' screens
wait for those answers before they draw."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.procs import LOOPRAIL

# A terminal's answers to the queries full-screen programs send (xterm's).
ANSWERS = (
    (b"\x1b[6n", b"\x1b[1;1R"),  # cursor position
    (b"\x1b[c", b"\x1b[?62;22c"),  # primary device attributes
    (b"\x1b]10;?", b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"),  # foreground colour
    (b"\x1b]11;?", b"\x1b]11;rgb:0000/0000/0000\x1b\\"),  # background colour
    (b"\x1b[?u", b"\x1b[?0u"),  # keyboard protocol flags
)

# Escape sequences: CSI; OSC/DCS/APC/PM ended by BEL or ST (never past the next ESC, so an
# unended one cannot swallow the rest); charset selection; keypad modes, cursor save/restore.
_ANSI = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]P_^][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[()][A-Za-z0-9]"
    rb"|\x1b[=>78]"
)


def _controlling_tty() -> None:  # runs in the child, before exec
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """`argv` on a pty: `expect` what it shows, `send` what a person types."""

    def __init__(
        self,
        argv: Sequence[str | Path],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        answer: bool = False,
        size: tuple[int, int] = (50, 200),
    ) -> None:
        """`env` is the whole environment (default: this process's); `size` rows, columns."""
        primary, secondary = os.openpty()
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
        try:
            self.proc = subprocess.Popen(
                [str(a) for a in argv],
                stdin=secondary,
                stdout=secondary,
                stderr=secondary,
                cwd=cwd,
                env=dict(os.environ if env is None else env),
                preexec_fn=_controlling_tty,
                close_fds=True,
            )
        except BaseException:
            os.close(primary)
            raise
        finally:
            os.close(secondary)
        self.fd = primary
        self.raw = b""
        self.answer = answer
        self._answered = dict.fromkeys((q for q, _ in ANSWERS), 0)
        self._mark = 0  # in `text`: where the last thing expected ended

    @classmethod
    def looprail(
        cls,
        *args: str | Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        answer: bool = False,
    ) -> Terminal:
        """`looprail ARGS…` on a pty (the console script's way of running main())."""
        return cls([*LOOPRAIL, *args], cwd=cwd, env=env, answer=answer)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def raw_text(self) -> str:
        """Everything written so far, escape sequences (colours, cursor moves) kept."""
        return self.raw.decode("utf-8", errors="replace").replace("\r\n", "\n")

    @property
    def text(self) -> str:
        """Everything shown so far, escape sequences removed."""
        return _ANSI.sub(b"", self.raw).decode("utf-8", errors="replace").replace("\r", "")

    def _read(self, timeout: float) -> bool:
        """Read what is there within `timeout`; False at the end of the output."""
        if self.fd < 0:
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: every holder of the terminal's other side is gone
            return False
        self.raw += chunk
        if self.answer:
            for query, reply in ANSWERS:
                while self._answered[query] < self.raw.count(query):
                    self._answered[query] += 1
                    os.write(self.fd, reply)
        return bool(chunk)

    def expect(self, needle: str, timeout: float = 60) -> str:
        """Wait until `needle` is shown after the last thing expected; returns the text."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text
            at = text.find(needle, self._mark)
            if at != -1:
                self._mark = at + len(needle)
                return text
            if time.monotonic() > deadline or not self._read(0.2):
                if needle in self.text[self._mark :]:
                    continue
                raise AssertionError(f"never shown: {needle!r}; the terminal shows:\n{self.text}")

    def send(self, line: str) -> None:
        """Type `line` and Enter."""
        os.write(self.fd, line.encode() + b"\r")

    def keys(self, *presses: bytes, pause: float = 0.7) -> None:
        """Press keys one after the other, as a person does (a screen reads them apart)."""
        for press in presses:
            os.write(self.fd, press)
            self.read_for(pause)

    def read_for(self, seconds: float) -> None:
        """Read (and answer) what the program prints for `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._read(0.1):
            pass

    def send_eof(self) -> None:
        os.write(self.fd, b"\x04")  # Ctrl-D at the start of a line

    def wait(self, timeout: float = 120) -> int:
        """The program's exit code, once it ended (its output read to the end; the terminal
        is closed then: `text` stays)."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"still running after {timeout}s:\n{self.text}")
            if not self._read(0.1):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=0.1)  # the terminal closed: it is ending
        while self._read(0.2) and select.select([self.fd], [], [], 0)[0]:
            pass  # what is left, without waiting on a grandchild that holds the terminal
        self._close_fd()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the program and everything in its session (its agents)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._close_fd()

    def close(self) -> None:
        self.kill()

    def _close_fd(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
