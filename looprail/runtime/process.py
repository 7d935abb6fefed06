"""Bounded subprocesses: every process looprail starts goes through `run_bounded` (a timeout,
an output cap, closed or explicit stdin, its process group killed when it overruns). `shell=True`
is only for strings the user wrote (native-hook `shell`/`when`, a predicate's `command`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from looprail.runtime.childenv import child_pwd_env, confined_path_env
from looprail.runtime.pump import close_pipes, pump
from looprail.textsafe import one_line as escape_untrusted  # noqa: F401 (its name for callers)

DEFAULT_OUTPUT_CAP = 1 << 20  # 1 MiB per stream: enough for any verdict, bounded for any bug
_GUARD = Path(__file__).with_name("guard.py")
GUARD_GRACE_S = 2.0


@dataclass(frozen=True)
class ProcessResult:
    """What a bounded process did; `exit_code` None: spawn failure or timeout."""

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
        if self.spawn_error:
            return f"could not start: {self.spawn_error}"
        if self.timed_out:
            return f"timed out after {self.duration_s:.1f}s"
        return f"exited {self.exit_code}"


@dataclass(frozen=True)
class Spawned:
    """A started child and its guard, each with its start time in clock ticks since boot
    (field 22 of /proc/PID/stat): a pid plus its start time names one process for good."""

    pid: int
    start: int
    guard_pid: int
    guard_start: int
    argv0: str = ""

    def as_data(self) -> dict[str, object]:
        return asdict(self)


def run_bounded(
    argv: Sequence[str] | str,
    *,
    timeout_s: float,
    stdin: bytes | str | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    shell: bool = False,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    on_output: Callable[[str, bytes], None] | None = None,
    guard: bool = True,
) -> ProcessResult:
    """Run one process to completion or to its timeout (then its whole tree is killed); back
    within `timeout_s` plus a short grace, leaving no thread, descriptor or zombie behind.
    `argv` is a list, or with `shell=True` one string for `/bin/sh -c`; output past `output_cap`
    bytes per stream is dropped (`truncated`); `on_output(stream, chunk)` sees every raw chunk
    on the calling thread. `guard=False`: no guard, so unjournaled (for looprail's own short
    calls such as git); `kill_running` still kills its process group."""
    cmd = _command(argv, shell)
    if not timeout_s or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    shown = tuple(cmd)
    env = child_pwd_env(confined_path_env(env), cwd)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    start = time.monotonic()
    # Registered before it exists: a `kill_running` from another thread while this child is
    # being started marks it, and it is killed the moment it exists.
    child = _Child(guarded=guard and guard_available())
    with _LIVE_LOCK:
        if _SPAWNING.refusing:
            why = "looprail is stopping: no new process is started"
            return ProcessResult(shown, None, "", "", 0.0, spawn_error=why)
        _LIVE.add(child)
    try:
        return _run_child(
            child, cmd, shown, data, cwd, env, start, timeout_s, output_cap, on_output
        )
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(child)


def _command(argv: Sequence[str] | str, shell: bool) -> list[str]:
    if not shell:
        if isinstance(argv, str):
            raise TypeError("argv must be a list of arguments unless shell=True")
        return [str(a) for a in argv]
    if not isinstance(argv, str):
        raise TypeError("shell=True takes one command string")
    return ["/bin/sh", "-c", argv]


def _since(start: float) -> float:
    return time.monotonic() - start


def _run_child(
    child: _Child,
    cmd: list[str],
    shown: tuple[str, ...],
    data: bytes | None,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    start: float,
    timeout_s: float,
    output_cap: int,
    on_output: Callable[[str, bytes], None] | None,
) -> ProcessResult:
    fds = [-1, -1]  # the guard's status pipe (read end, write end) while open
    proc: subprocess.Popen | None = None
    try:
        # Ctrl-C/SIGTERM wait until the child is in `child.proc`: raised inside Popen (after
        # the fork), it would leave a process nobody knows about.
        with _stop_signals_deferred():
            started = _start(child, cmd, data is not None, cwd, env, fds)
            if isinstance(started, str):
                return ProcessResult(shown, None, "", "", _since(start), spawn_error=started)
            proc = started
            with _LIVE_LOCK:
                child.proc = proc
                cancelled = child.cancelled
        if fds[1] >= 0:
            os.close(fds[1])
            fds[1] = -1
        if cancelled:  # `kill_running` came while it was being started
            _stop(child)
        why = _await_guard(child, proc, fds, shown[0]) if child.guarded else None
        if why is not None:
            return ProcessResult(shown, None, "", "", _since(start), spawn_error=why)
        timed_out, out, err, truncated = _pump(
            child, data, start + timeout_s, output_cap, on_output
        )
    except BaseException:
        close_fds(*fds)
        if proc is not None:
            _abandon(child, proc)
        raise
    return ProcessResult(
        argv=shown,
        exit_code=None if timed_out else proc.returncode,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        duration_s=_since(start),
        timed_out=timed_out,
        truncated=truncated,
    )


def _start(
    child: _Child,
    cmd: list[str],
    stdin: bool,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    fds: list[int],
) -> subprocess.Popen | str:
    """Start `cmd` (under a guard reporting on `fds`): the process, or why it did not start."""
    if child.guarded:
        fds[:] = os.pipe()
        guard = [sys.executable, "-I", "-S", str(_GUARD), str(os.getpid()), str(fds[1])]
        cmd = [*guard, "--", *cmd]
    try:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd) if cwd is not None else None,
            env=dict(env) if env is not None else None,
            start_new_session=True,  # own process group: a timeout kills its tree
            pass_fds=(fds[1],) if child.guarded else (),
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv or env
        close_fds(*fds)
        fds[:] = [-1, -1]
        return _why(exc)


def _why(exc: OSError | ValueError) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def _await_guard(child: _Child, proc: subprocess.Popen, fds: list[int], argv0: str) -> str | None:
    """None once the guard has started the real child, else why not (the guard reaped)."""
    fd, fds[0] = fds[0], -1
    spawned = _read_guard_status(proc, fd, argv0)
    if isinstance(spawned, str):
        close_pipes(proc)
        proc.wait()
        return spawned
    with _LIVE_LOCK:
        child.spawned = spawned
    _notify(spawned)
    return None


def _abandon(child: _Child, proc: subprocess.Popen) -> None:
    """Ctrl-C (or a bug) once the child exists: stop its tree (nothing else will) and reap it."""
    _stop(child)
    close_pipes(proc)
    with contextlib.suppress(BaseException):
        proc.wait()


def _pump(
    child: _Child,
    data: bytes | None,
    deadline: float,
    cap: int,
    on_output: Callable[[str, bytes], None] | None = None,
) -> tuple[bool, bytearray, bytearray, bool]:
    """`pump` the child's pipes; if they closed before it exited (it closed them itself), wait
    out the rest of its time, then kill it. Returns (timed_out, stdout, stderr, truncated); the
    child is reaped and every pipe closed."""
    proc = child.proc
    assert proc is not None

    def kill() -> None:
        _stop(child)
        proc.wait()

    timed_out, out, err, truncated = pump(proc, data, deadline, cap, on_output, kill)
    if proc.poll() is None:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            kill()
            timed_out = True
    return timed_out, out, err, truncated


# Every child of run_bounded, from just before it is started until it is reaped, so that Ctrl-C
# can stop them all (each has its own session: the terminal's SIGINT never reaches it).
_LIVE: set[_Child] = set()
_LIVE_LOCK = threading.Lock()


class _Spawning:
    """What every `run_bounded` call reads: `refusing` > 0 while `stopping_children` blocks
    (no new child starts), and the one spawn listener (`set_spawn_listener`)."""

    refusing = 0
    listener: Callable[[Spawned], None] | None = None


_SPAWNING = _Spawning()


@dataclass(eq=False, slots=True)  # eq=False: hashed by identity, in `_LIVE`
class _Child:
    """One run_bounded child. `proc` is None until Popen returned (`cancelled` then says a
    `kill_running` came meanwhile); `spawned` is set once the guard reported the real child."""

    guarded: bool
    proc: subprocess.Popen | None = None
    spawned: Spawned | None = None
    cancelled: bool = False


def kill_running() -> int:
    """Kill the tree of every child `run_bounded` runs now (any thread), and of every child
    being started as soon as it exists. Returns how many were killed or cancelled."""
    with _LIVE_LOCK:
        live = list(_LIVE)
        for child in live:
            child.cancelled = True
        started = [c for c in live if c.proc is not None]
    for child in started:
        _stop(child)
    return len(live)


@contextmanager
def stopping_children() -> Iterator[None]:
    """While looprail unwinds from Ctrl-C/SIGTERM: kill every child and start no new one
    (`run_bounded` returns a spawn error), so worker threads going on cannot start anything."""
    with _LIVE_LOCK:
        _SPAWNING.refusing += 1
    try:
        kill_running()
        yield
    finally:
        with _LIVE_LOCK:
            _SPAWNING.refusing -= 1


def stopping() -> bool:
    """Is looprail unwinding (`stopping_children`)? A thread waiting for a person stops then."""
    return _SPAWNING.refusing > 0


_STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextmanager
def _stop_signals_deferred() -> Iterator[None]:
    """In the main thread (the only one Python runs handlers in), hold back the handlers of
    SIGINT/SIGTERM/SIGHUP for the block and run them when it ends. `pthread_sigmask` would not
    do: another thread receives the signal, and the main thread runs the handler anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    saved: dict[int, Any] = {}

    def hold(signum: int, _frame: Any) -> None:
        held.append(signum)

    for signum in _STOP_SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):
            saved[signum] = handler
            signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(held):
            saved[signum](signum, None)  # raises KeyboardInterrupt (or `Terminated`) here


def _stop(child: _Child) -> None:
    """Kill a child's whole tree: through its guard when guarded (which works before the guard
    has reported the child's pid); a guard that does not exit in time is killed, and the child
    with it when it is known and still the same process."""
    proc = child.proc
    if proc is None:
        return
    if child.guarded:
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGTERM)  # not once it is reaped: its pid may be reused
        try:
            proc.wait(timeout=GUARD_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            if child.spawned is not None:
                reap_spawned(replace(child.spawned, guard_pid=0))
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def set_spawn_listener(listener: Callable[[Spawned], None] | None) -> None:
    """Call `listener` with every guarded child as it starts (journaled for a resume to reap)."""
    _SPAWNING.listener = listener


def _notify(spawned: Spawned) -> None:
    listener = _SPAWNING.listener
    if listener is not None:
        with contextlib.suppress(Exception):  # journaling must never break a step
            listener(spawned)


def guard_available() -> bool:
    """The guard needs Linux prctl; `LOOPRAIL_NO_GUARD=1` turns it off."""
    return (
        sys.platform.startswith("linux")
        and os.environ.get("LOOPRAIL_NO_GUARD") != "1"
        and bool(sys.executable)  # an embedding interpreter may have none to start the guard
        and _GUARD.is_file()
    )


def _read_guard_status(proc: subprocess.Popen, fd: int, argv0: str) -> Spawned | str:
    """The guard's one report: `P<pid> <start> <guard start> <guard pid>` or `E<why>`."""
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
            if b"\n" in chunk:
                break
    finally:
        os.close(fd)
    text = b"".join(chunks).decode(errors="replace").strip()
    if text.startswith("P"):
        pid, start, guard_start = (int(x) for x in text[1:].split()[:3])
        return Spawned(pid, start, proc.pid, guard_start, argv0)
    return text[1:] if text.startswith("E") else "the process guard did not start"


def close_fds(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def proc_state(pid: int) -> list[bytes]:
    """The fields of /proc/PID/stat after the command name (the state first), or []."""
    try:
        text = Path(f"/proc/{pid}/stat").read_bytes()
        return text[text.rindex(b")") + 2 :].split()
    except (OSError, ValueError):
        return []


def start_ticks(pid: int, *, live_only: bool = False) -> int | None:
    """Field 22 of /proc/PID/stat (start time since boot), or None when there is no such
    process; with `live_only`, also None for a zombie (dead, not yet reaped)."""
    fields = proc_state(pid)
    if len(fields) < 20 or (live_only and fields[0] in (b"Z", b"X")):
        return None
    with contextlib.suppress(ValueError):
        return int(fields[19])
    return None


def reap_spawned(spawned: Spawned) -> list[int]:
    """Kill what is left of a child an earlier looprail started (its guard, its group), each
    only while its pid still names the same process (same start time). Returns the pids."""
    killed = []
    if spawned.guard_pid and start_ticks(spawned.guard_pid, live_only=True) == spawned.guard_start:
        with contextlib.suppress(OSError):
            os.kill(spawned.guard_pid, signal.SIGTERM)  # it kills its whole tree
            killed.append(spawned.guard_pid)
    if spawned.pid and start_ticks(spawned.pid, live_only=True) == spawned.start:
        with contextlib.suppress(OSError):
            if os.getpgid(spawned.pid) == spawned.pid:
                os.killpg(spawned.pid, signal.SIGKILL)
            else:
                os.kill(spawned.pid, signal.SIGKILL)
            killed.append(spawned.pid)
    return killed


def find_program(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """`shutil.which` over the confined `PATH` (`confined_path_env`): never the project."""
    base = os.environ if env is None else env
    confined = confined_path_env(base) or base
    path = confined.get("PATH", os.defpath)
    return shutil.which(name, path=path or os.defpath)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_words(code: int | None, meaning: str | None = None) -> str:
    """How a process ended, in words: `was killed by SIGKILL`, `exited 3 (meaning)`."""
    if code is not None and code < 0:
        return f"was killed by {signal_name(-code)}"
    return f"exited {code}" + (f" ({meaning})" if meaning else "")


def tail(text: str, limit: int = 2000) -> str:
    return text[-limit:]
