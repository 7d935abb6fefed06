"""Where a running process's output goes as it arrives: `.looprail/logs/<run>/NNN-<kind>-<name>`
(an agent CLI's transcript folder, or a local process's `.log` of both streams), and with `-v`
the terminal, a whole line at a time. Flushed every chunk: a killed run leaves its logs."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from looprail.fsutil import looprail_path
from looprail.layout import LOGS_DIR, log_of  # noqa: F401 (log_of re-exported)

if TYPE_CHECKING:
    from looprail.runtime.adapter import Reply
    from looprail.runtime.base import Outcome, Request
    from looprail.runtime.process import ProcessResult

# One line a process printed, as `(stream, text)`; text has no newline and is not yet escaped.
LineSink = Callable[[str, str], None]

LOG_CAP = 64 << 20  # bytes per log file: a runaway process cannot fill the disk through us
LINE_CAP = 64 << 10  # a "line" with no newline for this long is passed on as it is

_SEQ = re.compile(r"^(\d{3,})-")
# Terminal control sequences (CSI, OSC, two-byte ESC): colour codes a tool prints are dropped
# from the -v stream; every other control character is escaped by the display (textsafe).
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def write_prompt(folder: Path, prompt: str) -> Path:
    """`folder/prompt.md`, readable by the user alone (an interactive CLI is told to read it,
    and a prompt can hold CONTEXT.md and checkpoint answers); never written through a link."""
    path = folder / "prompt.md"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fd, 0o600)  # a file that was there keeps no wider mode
        fh.write(prompt)
    return path


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:60] or "work"


class Transcripts:
    """Numbers and files the work of one run (`run_id` None: a `no-journal-<time>` folder)."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self._lock = threading.Lock()
        self._seq = 0
        self.run_id: str | None = None
        self._adhoc: str | None = None

    def base(self) -> Path:
        with self._lock:
            if self.run_id is None and self._adhoc is None:  # one folder per unjournaled run
                self._adhoc = time.strftime("no-journal-%Y%m%dT%H%M%S")
            run = self.run_id or self._adhoc
        # Checked every time: a `.looprail/logs` linked out of the project gets no log.
        return looprail_path(self.project, LOGS_DIR, str(run))

    def _next(self, base: Path) -> int:
        with self._lock:
            if self._seq == 0 and base.is_dir():  # a resumed run: continue the numbering
                found = (_SEQ.match(p.name) for p in base.iterdir())
                self._seq = max((int(m.group(1)) for m in found if m), default=0)
            self._seq += 1
            return self._seq

    def folder(self, request: Request) -> Path:
        """A new folder `NNN-<kind>-<name>/` for one agent invocation's transcript."""
        path = self.file(request).with_suffix("")
        path.mkdir(exist_ok=True)
        return path

    def file(self, request: Request) -> Path:
        """A new log file `NNN-<kind>-<name>.log` for one process's output (not yet created)."""
        base = self.base()
        base.mkdir(parents=True, exist_ok=True)
        return base / f"{self._next(base):03d}-{request.kind}-{slug(request.name)}.log"

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.project).as_posix()
        except ValueError:
            return str(path)


class OutputTee:
    """A process's output, chunk by chunk (`run_bounded(on_output=...)`), passed on to
    `combined` (one log of both streams, whole lines in arrival order), `split` (one raw file
    per stream) and `on_line(stream, text)` (every whole line, decoded). A log that cannot be
    written is given up quietly; `close()` passes on an unfinished last line."""

    def __init__(
        self,
        *,
        combined: Path | None = None,
        split: Mapping[str, Path] | None = None,
        on_line: LineSink | None = None,
        header: str | None = None,
    ) -> None:
        self.on_line = on_line
        self._pending: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._files: dict[str, IO[bytes]] = {}
        self._written: dict[str, int] = {}
        self._combined: IO[bytes] | None = None
        self.cut = False
        if combined is not None:
            self._combined = _open(combined)
            if self._combined is not None and header:
                self._write(self._combined, "combined", header.encode() + b"\n")
        for stream, path in (split or {}).items():
            handle = _open(path)
            if handle is not None:
                self._files[stream] = handle

    @property
    def wanted(self) -> bool:
        return bool(self.on_line or self._combined or self._files)

    def __call__(self, stream: str, chunk: bytes) -> None:
        raw = self._files.get(stream)
        if raw is not None:
            self._write(raw, stream, chunk)
            self._flush(raw)
        if self._combined is None and self.on_line is None:
            return
        pending = self._pending.setdefault(stream, bytearray())
        pending.extend(chunk)
        while True:
            end = pending.find(b"\n")
            if end < 0:
                if len(pending) < LINE_CAP:
                    break
                end = LINE_CAP - 1
            line = bytes(pending[: end + 1])
            del pending[: end + 1]
            self._line(stream, line)
        if self._combined is not None:
            self._flush(self._combined)

    def _line(self, stream: str, line: bytes) -> None:
        if self._combined is not None:
            self._write(self._combined, "combined", line if line.endswith(b"\n") else line + b"\n")
        if self.on_line is not None:
            text = line.decode("utf-8", errors="replace").rstrip("\n").removesuffix("\r")
            try:
                self.on_line(stream, text)
            except Exception:  # showing a line must never break the work
                self.on_line = None

    def close(self, footer: str | None = None) -> None:
        for stream, pending in self._pending.items():
            if pending:
                self._line(stream, bytes(pending))
                pending.clear()
        if self._combined is not None and footer:
            self._write(self._combined, "combined", footer.encode() + b"\n")
        for handle in [*self._files.values(), *([self._combined] if self._combined else [])]:
            with contextlib.suppress(OSError):
                handle.close()
        self._files.clear()
        self._combined = None

    def _write(self, handle: IO[bytes], key: str, data: bytes) -> None:
        done = self._written.get(key, 0)
        if done >= LOG_CAP:
            return
        room = LOG_CAP - done
        if len(data) > room:
            data = data[:room] + b"\n[looprail: log cut here, at its size limit]\n"
            self.cut = True
        try:
            handle.write(data)
        except (OSError, ValueError):
            self._written[key] = LOG_CAP  # disk full, say: stop trying, keep working
            return
        self._written[key] = done + len(data)

    @staticmethod
    def _flush(handle: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            handle.flush()  # to the OS: a SIGKILLed looprail still leaves what arrived


def _open(path: Path) -> IO[bytes] | None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644
        )
        return os.fdopen(fd, "ab")
    except OSError:
        return None


def show_line(text: str) -> str:
    """A child's line as `-v` shows it: colour codes dropped, trailing blanks trimmed."""
    return ANSI.sub("", text).rstrip()


def write_transcript(
    folder: Path,
    argv: Sequence[str],
    result: ProcessResult,
    reply: Reply,
    outcome: Outcome,
) -> None:
    """An agent invocation's meta.json, beside its prompt.md and the streams `OutputTee` wrote."""
    meta = {
        "argv": list(argv),
        "exitCode": result.exit_code,
        "timedOut": result.timed_out,
        "durationS": round(result.duration_s, 3),
        "truncated": result.truncated,
        "events": reply.events,
        "complete": reply.complete,
        "sessionId": reply.session_id,
        "inputTokens": reply.input_tokens,
        "cachedInputTokens": reply.cached_input_tokens,
        "outputTokens": reply.output_tokens,
        "costUsd": reply.cost_usd,
        "error": reply.error,
        "errorStatus": reply.error_status,
        "permissionDenials": reply.denials,
        "final": reply.final,
        "ok": outcome.ok,
        "detail": outcome.detail,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
