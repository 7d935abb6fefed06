"""A program on a real pseudo-terminal (stdlib `pty`): its controlling terminal, in a session of
its own, read and typed into as a user at a terminal would (`expect`, `send`, `wait`).

`answer=True` also answers what full-screen programs ask their terminal (the cursor position,
the device attributes, the colours), as a terminal emulator does: the real agent CLIs' screens
wait for those answers before they draw."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

# A terminal's answers to the queries full-screen programs send (xterm's).
ANSWERS = (
    (b"\x1b[6n", b"\x1b[1;1R"),  # cursor position
    (b"\x1b[c", b"\x1b[?62;22c"),  # primary device attributes
    (b"\x1b]10;?", b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"),  # foreground colour
    (b"\x1b]11;?", b"\x1b]11;rgb:0000/0000/0000\x1b\\"),  # background colour
    (b"\x1b[?u", b"\x1b[?0u"),  # keyboard protocol flags
)


class Terminal:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        answer: bool = False,
    ) -> None:
        argv = [str(a) for a in argv]
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its stdin, stdout, stderr and controlling tty
            try:
                os.chdir(cwd)
                os.execve(argv[0], argv, dict(env))
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = b""
        self.code: int | None = None
        self.answer = answer
        self._answered = dict.fromkeys((q for q, _ in ANSWERS), 0)

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", errors="replace").replace("\r\n", "\n")

    def _read(self, timeout: float) -> bool:
        """Read what is there within `timeout`; False at the end of the output."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: every holder of the terminal's other side is gone
            return False
        self.output += chunk
        if self.answer:
            for query, reply in ANSWERS:
                while self._answered[query] < self.output.count(query):
                    self._answered[query] += 1
                    os.write(self.fd, reply)
        return bool(chunk)

    def expect(self, text: str, timeout: float = 60) -> None:
        """Wait until the program has printed `text`."""
        deadline = time.monotonic() + timeout
        while text not in self.text:
            if time.monotonic() > deadline or not self._read(0.2):
                if text in self.text:
                    return
                raise AssertionError(f"never printed {text!r}; the terminal shows:\n{self.text}")

    def send(self, line: str) -> None:
        """Type `line` and Enter."""
        os.write(self.fd, line.encode() + b"\r")

    def keys(self, *presses: bytes, pause: float = 0.7) -> None:
        """Press keys one after the other, as a person does (a screen reads them apart)."""
        for press in presses:
            os.write(self.fd, press)
            deadline = time.monotonic() + pause
            while time.monotonic() < deadline and self._read(0.1):
                pass

    def read_for(self, seconds: float) -> None:
        """Read (and answer) what the program prints for `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._read(0.2):
            pass

    def send_eof(self) -> None:
        os.write(self.fd, b"\x04")  # Ctrl-D at the start of a line

    def wait(self, timeout: float = 120) -> int:
        """The program's exit code, once it ended (its output read to the end)."""
        deadline = time.monotonic() + timeout
        while self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"still running after {timeout}s:\n{self.text}")
            self._read(0.1)
        while self._read(0.2) and select.select([self.fd], [], [], 0)[0]:
            pass  # what is left, without waiting on a grandchild that holds the terminal
        return self.code

    def close(self) -> None:
        if self.code is None:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.code = -9
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
