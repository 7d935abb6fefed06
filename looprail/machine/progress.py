"""Progress for people: plain lines when the output is not a terminal (or under `NO_COLOR`,
`TERM=dumb`); on a terminal the same lines scroll above a live area drawn by rich (where the
loop is, each running task, elapsed times), the spawning banner once per wave."""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any, TextIO, cast

from rich.console import Console
from rich.live import Live
from rich.text import Text

from looprail.runtime.logs import show_line
from looprail.textsafe import one_line, wants_escapes

BANNER_PREFIX = "◆ Spawning "


class _Trusted:
    """The stream as rich sees it: its escape codes are our own terminal control, so they go
    through `write_trusted` past the CLI's control-character filter (textsafe.SafeStream);
    every piece of data in them was made one line first."""

    def __init__(self, stream: Any):
        self._stream = stream
        self.write = getattr(stream, "write_trusted", stream.write)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding…
        return getattr(self._stream, name)


# Line prefixes (after indentation) and their colour on a terminal.
_LINE_STYLES = (("✓", "green"), ("✗", "bold red"), ("!", "yellow"), ("⏸", "yellow"))
_STREAM_CUT = 1000  # characters of one streamed line shown (the log holds all of it)


class Progress:
    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        live: bool | None = None,
        quiet: bool = False,
        verbose: bool = False,
    ):
        self.stream = stream or sys.stderr
        self.live = wants_escapes(self.stream) if live is None else live
        self.quiet = quiet
        self.verbose = verbose and not quiet
        self._lock = threading.Lock()
        self._status = ""
        self._start = time.monotonic()
        self._tasks: dict[str, tuple[str, float]] = {}  # key -> (label, started)
        self._rows: tuple[tuple[str, float], ...] = ()  # a snapshot the redraw reads unlocked
        self._banner_shown = False  # on a terminal: one spawning banner per wave
        self._live: Live | None = None  # started on the first status
        self._console: Console | None = None  # made on the first line drawn

    def line(self, text: str) -> None:
        if self.quiet:
            return
        if self.live and text.startswith(BANNER_PREFIX):
            with self._lock:
                if self._banner_shown:
                    return  # the live area shows every running task already
                self._banner_shown = True
        self._write(text)

    def child_line(self, label: str, stream: str, text: str) -> None:
        """With -v: one line a running step, check or agent printed (colour codes dropped,
        every other control character escaped)."""
        if not self.verbose:
            return
        shown = show_line(text)
        if len(shown) > _STREAM_CUT:
            shown = shown[: _STREAM_CUT - 1] + "…"
        where = f"{label} stderr" if stream == "stderr" else label
        self._write(f"    ┆ {where}: {shown}", style="dim")

    def warn(self, text: str) -> None:
        self._write(f"  ! {text}")

    def _write(self, text: str, style: str | None = None) -> None:
        if not self.live:
            with self._lock:
                self.stream.write(one_line(text) + "\n")
                self.stream.flush()
            return
        # rich's console has its own lock (worker threads print too); never print while
        # holding ours: printing redraws the live area, which reads our state.
        if style is None:
            style = next((s for mark, s in _LINE_STYLES if text.lstrip().startswith(mark)), None)
        self._rich_console().print(Text(one_line(text), style=style or ""), soft_wrap=True)

    def new_stage(self) -> None:
        """A wave or a step's role work starts: its first agent gets the spawning banner."""
        with self._lock:
            self._banner_shown = False

    def status(self, text: str) -> None:
        if not self.live or self.quiet:
            return
        with self._lock:
            self._status = one_line(text)
            self._ensure_live()

    def task_started(self, key: str, label: str) -> None:
        if not self.live or self.quiet:
            return
        with self._lock:
            self._tasks[key] = (one_line(label), time.monotonic())
            self._rows = tuple(self._tasks.values())
            live = self._ensure_live()
        # Drawn now, not at the next tick: a task shorter than a tick would never be seen.
        # Outside our lock, as printing is (the redraw reads snapshots, rich locks itself).
        live.refresh()

    def task_finished(self, key: str) -> None:
        with self._lock:
            self._tasks.pop(key, None)
            self._rows = tuple(self._tasks.values())

    def close(self) -> None:
        with self._lock:
            live, self._live = self._live, None
        if live is not None:
            live.stop()
        with self._lock:
            self._status = ""
            self._tasks.clear()
            self._rows = ()

    def _rich_console(self) -> Console:
        if self._console is None:
            # A cast, not a TextIOBase subclass: TextIOBase's own encoding/fileno/close would
            # shadow `_Trusted`'s delegation (rich reads `encoding` from its file) and its
            # __del__ would close the wrapper. rich only writes, flushes and asks
            # isatty/fileno/encoding, all delegated.
            file = cast(IO[str], _Trusted(self.stream))
            self._console = Console(file=file, highlight=False, force_terminal=True)
        return self._console

    def _ensure_live(self) -> Live:
        if self._live is not None:
            return self._live
        self._live = Live(
            get_renderable=self._render,
            console=self._rich_console(),
            refresh_per_second=4,  # the elapsed times tick while an agent works
            transient=True,  # the area is gone at the end; the lines above it stay
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()
        return self._live

    def _render(self) -> Text:
        now = time.monotonic()
        status, tasks = self._status, self._rows  # snapshots: no lock on the redraw path
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"… {status}  ", style="dim")
        text.append(f"[{fmt_duration(now - self._start)}]", style="dim")
        for label, started in tasks:
            text.append("\n")
            text.append(f"  ▹ {label}  ", style="cyan")
            text.append(f"[{fmt_duration(now - started)}]", style="dim")
        return text


def fmt_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
