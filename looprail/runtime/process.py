"""Bounded subprocesses. Every process looprail starts goes through `run_bounded`: it has a
timeout, an output cap, closed or explicit stdin, and is killed (with its process group) when it
overruns. Manifest strings never reach a shell here unless the caller passes `shell=True`, which
is reserved for strings the user wrote themselves (native-hook `shell`/`when`, a predicate's
declared `command`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_OUTPUT_CAP = 1 << 20  # 1 MiB per stream: enough for any verdict, bounded for any bug


@dataclass(frozen=True)
class ProcessResult:
    """What a bounded process did. `exit_code` is None when it never ran to an exit of its own
    (spawn failure or timeout)."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    spawn_error: str | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def describe_failure(self) -> str:
        """One line saying why this process did not succeed."""
        if self.spawn_error:
            return f"could not start: {self.spawn_error}"
        if self.timed_out:
            return f"timed out after {self.duration_s:.1f}s"
        return f"exited {self.exit_code}"


def _reader(stream, sink: bytearray, cap: int, flag: list[bool]) -> None:
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        room = cap - len(sink)
        if room > 0:
            sink.extend(chunk[:room])
        if len(chunk) > max(room, 0):
            flag[0] = True  # keep draining so the child never blocks on a full pipe
    stream.close()


def _writer(stream, data: bytes) -> None:
    try:
        stream.write(data)
    except (BrokenPipeError, OSError):
        pass  # the child need not read its input
    finally:
        with contextlib.suppress(OSError):
            stream.close()


def run_bounded(
    argv: Sequence[str] | str,
    *,
    timeout_s: float,
    stdin: bytes | str | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    shell: bool = False,
    output_cap: int = DEFAULT_OUTPUT_CAP,
) -> ProcessResult:
    """Run one process to completion or to its timeout, whichever is first.

    `argv` is an argument list (no shell) unless `shell=True`, in which case it is one string run
    by `/bin/sh -c`. stdin is closed when `stdin` is None. Output beyond `output_cap` bytes per
    stream is dropped (and `truncated` set). On timeout the whole process group is killed.
    """
    if shell:
        if not isinstance(argv, str):
            raise TypeError("shell=True takes one command string")
        cmd: list[str] = ["/bin/sh", "-c", argv]
    else:
        if isinstance(argv, str):
            raise TypeError("argv must be a list of arguments unless shell=True")
        cmd = [str(a) for a in argv]
    shown = tuple(cmd)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd) if cwd is not None else None,
            env=dict(env) if env is not None else None,
            start_new_session=True,  # own process group: a timeout kills grandchildren too
        )
    except OSError as exc:
        return ProcessResult(
            shown, None, "", "", time.monotonic() - start, spawn_error=exc.strerror or str(exc)
        )
    out, err = bytearray(), bytearray()
    out_flag, err_flag = [False], [False]
    readers = [
        threading.Thread(target=_reader, args=(proc.stdout, out, output_cap, out_flag)),
        threading.Thread(target=_reader, args=(proc.stderr, err, output_cap, err_flag)),
    ]
    for t in readers:
        t.daemon = True
        t.start()
    if data is not None:
        # Written from a thread: a child that never reads a large stdin must not block us
        # past the timeout (the pipe buffer is only ~64 KiB).
        writer = threading.Thread(target=_writer, args=(proc.stdin, data))
        writer.daemon = True
        writer.start()
        readers.append(writer)
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        proc.wait()
    for t in readers:
        t.join(timeout=2)
    return ProcessResult(
        argv=shown,
        exit_code=None if timed_out else proc.returncode,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        truncated=out_flag[0] or err_flag[0],
    )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def tail(text: str, limit: int = 2000) -> str:
    """The last `limit` characters of `text` (stderr tails in error messages)."""
    return text if len(text) <= limit else text[-limit:]


def escape_untrusted(text: str) -> str:
    """Make untrusted text (a resolver's stderr, a manifest string) safe to put on one line:
    control characters and newlines become visible escapes."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    return "".join(out)
