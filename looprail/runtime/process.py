"""Bounded subprocesses. Every process looprail starts goes through `run_bounded`: it has a
timeout, an output cap, closed or explicit stdin, and is killed (with its process group) when it
overruns. Manifest strings never reach a shell here unless the caller passes `shell=True`, which
is reserved for strings the user wrote themselves (native-hook `shell`/`when`, a predicate's
declared `command`)."""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from looprail.textsafe import one_line

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


# How long to keep draining the pipes after the child has exited (or been killed): output its
# last writes left in flight arrives within this, and a grandchild that holds a pipe open (a
# background job, a daemon that escaped the process group) cannot hold the call up longer.
_DRAIN_GRACE_S = 0.5
_CHUNK = 65536


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
    """Run one process to completion or to its timeout, whichever is first.

    `argv` is an argument list (no shell) unless `shell=True`, in which case it is one string run
    by `/bin/sh -c`. stdin is closed when `stdin` is None. Output beyond `output_cap` bytes per
    stream is dropped (and `truncated` set). On timeout the whole process group is killed. The
    call returns within `timeout_s` plus a short grace whatever the process's children do with
    the pipes, and leaves no thread, descriptor or zombie behind.

    `on_output(stream, chunk)` ("stdout" or "stderr", raw bytes) sees every chunk as it
    arrives, cap or not, on the calling thread (logs and `-v` read it there).

    `guard=False` starts the child without the guard (a process group of its own, killed by
    `kill_running` all the same), and so unjournaled: for looprail's own short calls such as
    git, which a killed looprail cannot leave running for long and which a run makes dozens of.
    """
    if shell:
        if not isinstance(argv, str):
            raise TypeError("shell=True takes one command string")
        cmd: list[str] = ["/bin/sh", "-c", argv]
    else:
        if isinstance(argv, str):
            raise TypeError("argv must be a list of arguments unless shell=True")
        cmd = [str(a) for a in argv]
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
    status_r = status_w = -1
    proc: Any = None  # subprocess.Popen, or _Served (a guard forked by the guard server)
    try:
        # Ctrl-C/SIGTERM wait until the child is in `child.proc`: raised inside Popen (after
        # the fork), it would leave a process nobody knows about.
        with _stop_signals_deferred():
            if child.guarded:
                # Through the guard server (a fork of a running guard): no interpreter start
                # per child. None: there is no server, so this child gets a guard of its own.
                try:
                    proc = _SERVER.start(cmd, data is not None, cwd, env)
                except (OSError, ValueError) as exc:  # ValueError: a NUL byte, as Popen says
                    why = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
                    return ProcessResult(
                        shown, None, "", "", time.monotonic() - start, spawn_error=why
                    )
            if proc is None:
                if child.guarded:
                    status_r, status_w = os.pipe()
                    cmd = [*_guard_argv(status_w), "--", *cmd]
                try:
                    proc = subprocess.Popen(
                        cmd,
                        stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        cwd=str(cwd) if cwd is not None else None,
                        env=dict(env) if env is not None else None,
                        start_new_session=True,  # own process group: a timeout kills its tree
                        pass_fds=(status_w,) if child.guarded else (),
                    )
                except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv or env
                    why = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
                    _close_fds(status_r, status_w)
                    status_r = status_w = -1
                    return ProcessResult(
                        shown, None, "", "", time.monotonic() - start, spawn_error=why
                    )
            with _LIVE_LOCK:
                child.proc = proc
                cancelled = child.cancelled
        if status_w >= 0:
            os.close(status_w)
            status_w = -1
        if cancelled:  # `kill_running` came while it was being started
            _stop(child)
        if child.guarded:
            if isinstance(proc, _Served):
                spawned = proc.read_started(shown[0])
            else:
                fd, status_r = status_r, -1
                spawned = _read_guard_status(proc, fd, shown[0])
            if isinstance(spawned, str):
                _close_pipes(proc)
                proc.wait()
                return ProcessResult(
                    shown, None, "", "", time.monotonic() - start, spawn_error=spawned
                )
            with _LIVE_LOCK:
                child.spawned = spawned
                # A served guard's pid is known only now: a `kill_running` before this could
                # not signal it (see `_stop`), so it is stopped here.
                cancelled = child.cancelled and isinstance(proc, _Served)
            _notify(spawned)
            if cancelled:
                _stop(child)
        timed_out, out, err, truncated = _pump(
            child, data, start + timeout_s, output_cap, on_output
        )
    except BaseException:
        # Ctrl-C (or any bug) at any point once the child exists: it has its own session, so
        # nothing else will stop it. Stop its tree and reap it before unwinding.
        _close_fds(status_r, status_w)
        if proc is not None:
            if isinstance(proc, _Served) and not proc.pid and proc.returncode is None:
                # Interrupted before its guard said its pid: hear it out (the guard reports
                # right after it starts the child), so that the guard can be told to stop.
                with contextlib.suppress(BaseException), _stop_signals_deferred():
                    proc.read_started(shown[0])
            _stop(child)
            _close_pipes(proc)
            with contextlib.suppress(BaseException):
                proc.wait()
        raise
    assert proc is not None  # Popen returned: every path that did not returned above
    return ProcessResult(
        argv=shown,
        exit_code=None if timed_out else proc.returncode,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        truncated=truncated,
    )


def _pump(
    child: _Child,
    data: bytes | None,
    deadline: float,
    cap: int,
    on_output: Callable[[str, bytes], None] | None = None,
) -> tuple[bool, bytearray, bytearray, bool]:
    """Feed stdin and drain stdout/stderr from this thread with one selector, until the child
    has exited and the pipes are closed, or the deadline (then the group is killed), or a short
    grace after the child's exit (a grandchild holding a pipe). Returns (timed_out, stdout,
    stderr, truncated); the child is reaped and every pipe closed."""
    proc = child.proc
    assert proc is not None
    # Keyed by the pipe objects, which the selector hands back as `key.fileobj`.
    sinks: dict[Any, bytearray] = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    names: dict[Any, str] = {proc.stdout: "stdout", proc.stderr: "stderr"}
    truncated = False
    timed_out = False
    pending = memoryview(data) if data else memoryview(b"")
    stop_at: float | None = None  # set once the child has exited (or was killed)
    with selectors.DefaultSelector() as selector:
        for stream in sinks:
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
                    _stop(child)
                    proc.wait()
                    stop_at = now + _DRAIN_GRACE_S
                if stop_at is not None and now >= stop_at:
                    break
                wake = min(deadline if stop_at is None else stop_at, now + 0.1) - now
                for key, _events in selector.select(max(wake, 0)):
                    stream = key.fileobj
                    if stream is proc.stdin and stream is not None:
                        try:
                            written = os.write(key.fd, pending[: select.PIPE_BUF])
                        except OSError:  # the child closed its stdin: it need not read it
                            written = len(pending)
                        pending = pending[written:]
                        if not pending:
                            selector.unregister(stream)
                            with contextlib.suppress(OSError):
                                stream.close()
                        continue
                    chunk = os.read(key.fd, _CHUNK)
                    if not chunk:
                        selector.unregister(stream)
                        continue
                    if on_output is not None:
                        on_output(names[stream], chunk)
                    sink = sinks[stream]
                    room = cap - len(sink)
                    if room > 0:
                        sink.extend(chunk[:room])
                    if len(chunk) > max(room, 0):
                        truncated = True  # keep draining so the child never blocks on a full pipe
        finally:
            _close_pipes(proc)
    if proc.poll() is None:
        # The pipes closed before the child exited (it closed them itself): wait out the rest
        # of its time, then kill it.
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop(child)
            proc.wait()
    return timed_out, sinks[proc.stdout], sinks[proc.stderr], truncated


def _close_pipes(proc: Any) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


# Every child of run_bounded, from just before it is started until it is reaped, so that Ctrl-C
# can stop them all: each child has its own session (SIGINT from the terminal never reaches it),
# and worker threads would otherwise wait for their children's timeouts before the run can stop.
_LIVE: set[_Child] = set()
_LIVE_LOCK = threading.Lock()


class _Spawning:
    """What every `run_bounded` call reads: `refusing` > 0 while `stopping_children` blocks
    (no new child starts), and the one spawn listener (`set_spawn_listener`)."""

    refusing = 0
    listener: Callable[[Spawned], None] | None = None


_SPAWNING = _Spawning()


class _Child:
    """One run_bounded child. `proc` is None until Popen returned (`cancelled` then says a
    `kill_running` came meanwhile); `spawned` is set once the guard reported the real child."""

    __slots__ = ("cancelled", "guarded", "proc", "spawned")

    def __init__(self, guarded: bool):
        self.guarded = guarded
        self.proc: Any = None  # subprocess.Popen or _Served, once started
        self.spawned: Spawned | None = None
        self.cancelled = False


def kill_running() -> int:
    """Kill the process tree of every child `run_bounded` is running now (in any thread), and
    every child being started right now as soon as it exists; each of those calls then returns
    promptly. Returns how many were killed or cancelled."""
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
    """While looprail unwinds from Ctrl-C/SIGTERM: kill every child (`kill_running`) and start
    no new one (`run_bounded` returns a spawn error at once) until the block ends, so worker
    threads that go on to their next step or plan cannot start anything meanwhile."""
    with _LIVE_LOCK:
        _SPAWNING.refusing += 1
    try:
        kill_running()
        yield
    finally:
        with _LIVE_LOCK:
            _SPAWNING.refusing -= 1


def stopping() -> bool:
    """Is looprail unwinding from Ctrl-C/SIGTERM (`stopping_children`)? A worker thread that
    waits for a person (a checkpoint on the terminal) stops waiting then."""
    return _SPAWNING.refusing > 0


_STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextmanager
def _stop_signals_deferred() -> Iterator[None]:
    """In the main thread, hold back the Python handlers of SIGINT/SIGTERM/SIGHUP for the
    block and run each held-back one when it ends (so `KeyboardInterrupt` is raised there, not
    halfway through the block). Elsewhere nothing changes: Python runs signal handlers in the
    main thread only. Masking the signals (`pthread_sigmask`) would not do: another thread
    that does not block them receives them, and the main thread runs the handler anyway."""
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
    """Kill a child's whole tree. A guarded child is stopped through its guard, which kills the
    child's group and everything re-parented to it, then exits; that works even before the
    guard has reported the child's pid. A guard that does not exit in time is killed, and the
    child with it when it is known and still the same process."""
    proc = child.proc
    if proc is None:
        return
    if isinstance(proc, _Served) and (proc.returncode is not None or not proc.pid):
        # Its guard has reported its end (the pid may no longer be its own), or has not yet
        # said its pid: then the starting thread stops it once it has (`child.cancelled`).
        # Never signal pid 0: that is this process's own group.
        return
    if child.guarded:
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGTERM)  # not once it is reaped: its pid may be reused
        try:
            proc.wait(timeout=_GUARD_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            if child.spawned is not None:
                reap_spawned(replace(child.spawned, guard_pid=0))
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


# -- the process guard (Linux) ------------------------------------------------------------------


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
        return {
            "pid": self.pid,
            "start": self.start,
            "guard_pid": self.guard_pid,
            "guard_start": self.guard_start,
            "argv0": self.argv0,
        }


_GUARD = Path(__file__).with_name("guard.py")
_GUARD_GRACE_S = 2.0


def guard_available() -> bool:
    """Every child runs under the guard where the kernel offers what it needs (Linux prctl);
    `LOOPRAIL_NO_GUARD=1` turns it off (then children are process groups, as elsewhere)."""
    return (
        sys.platform.startswith("linux")
        and os.environ.get("LOOPRAIL_NO_GUARD") != "1"
        and bool(sys.executable)  # an embedding interpreter may have none to start the guard
        and _GUARD.is_file()
    )


def set_spawn_listener(listener: Callable[[Spawned], None] | None) -> None:
    """Call `listener` with every guarded child as it starts (the session journals them so a
    resume can reap what a killed looprail left behind). One listener; None removes it."""
    _SPAWNING.listener = listener


def _notify(spawned: Spawned) -> None:
    listener = _SPAWNING.listener
    if listener is not None:
        with contextlib.suppress(Exception):  # journaling must never break a step
            listener(spawned)


def _guard_argv(status_fd: int) -> list[str]:
    return [sys.executable, "-I", "-S", str(_GUARD), str(os.getpid()), str(status_fd)]


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
    return _parse_started(b"".join(chunks), proc.pid, argv0)


def _parse_started(raw: bytes, guard_pid: int, argv0: str) -> Spawned | str:
    text = raw.decode(errors="replace").strip()
    if text.startswith("P"):
        pid, start, guard_start = (int(x) for x in text[1:].split()[:3])
        return Spawned(pid, start, guard_pid, guard_start, argv0)
    return text[1:] if text.startswith("E") else "the process guard did not start"


# -- the guard server: one running guard interpreter forks a guard per child -------------------


class _Served:
    """A child started through the guard server, with what `run_bounded` uses of a `Popen`:
    the guard's pid (its own session and group), the pipes, `poll`, `wait` and `kill`. The exit
    status comes on the status channel (`X<code>`); the guard keeps its pid until this side
    closes the channel, so signalling `pid` before then never hits another process."""

    def __init__(self, args: list[str], status: Any, stdin: Any, stdout: Any, stderr: Any):
        self.args = args
        self.pid = 0
        self.returncode: int | None = None
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._status = status  # our end of the guard's status channel (a socket)
        self._buf = b""
        self._lock = threading.Lock()  # one reader of the channel at a time (as Popen's wait)

    def read_started(self, argv0: str) -> Spawned | str:
        while b"\n" not in self._buf:
            chunk = self._status.recv(4096)
            if not chunk:
                break
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        text = line.decode(errors="replace")
        if text.startswith("P") and len(text.split()) >= 4:
            self.pid = int(text.split()[3])
        spawned = _parse_started(line, self.pid, argv0)
        if isinstance(spawned, str):
            self.returncode = 127
            self._status.close()
        return spawned

    def poll(self) -> int | None:
        if self.returncode is not None or not self._lock.acquire(blocking=False):
            return self.returncode  # another thread is waiting: it will set it
        try:
            return self._wait(0, polling=True)
        finally:
            self._lock.release()

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        try:
            return self._wait(timeout)
        finally:
            self._lock.release()

    def _wait(self, timeout: float | None, polling: bool = False) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if b"\n" in self._buf:
                line, _, self._buf = self._buf.partition(b"\n")
                if line.startswith(b"X"):
                    self._finish(int(line[1:]))
                continue
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            ready, _, _ = select.select([self._status], [], [], left)
            if not ready:
                if polling:
                    return None
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            chunk = self._status.recv(4096)
            if not chunk:  # the guard died without a word (SIGKILL)
                self._finish(-signal.SIGKILL)
            self._buf += chunk
        return self.returncode

    def _finish(self, code: int) -> None:
        self.returncode = code
        self._status.close()  # the guard exits now

    def send_signal(self, signum: int) -> None:
        if self.returncode is None and self.pid:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _GuardServer:
    """The guard server of this process (see guard.py), started on first use from a thread
    that lives as long as it does (PR_SET_PDEATHSIG follows the parent *thread*)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: Any = None
        self._owner = 0  # the pid that started it: a forked child starts its own
        self._broken = False
        self._retired: list[Any] = []  # sockets of servers that died, closed at the next start

    def start(self, cmd: list[str], stdin: bool, cwd: Any, env: Any) -> _Served | None:
        """Start `cmd` under a served guard, or None when there is no server (then the caller
        starts a guard of its own)."""
        if self._broken or os.environ.get("LOOPRAIL_GUARD_SERVER") == "0":
            return None
        where = str(cwd) if cwd is not None else os.getcwd()
        environment = dict(env if env is not None else os.environ)
        # What Popen refuses before it starts anything, refused the same way.
        if any("\0" in text for text in (*cmd, where, *environment, *environment.values())):
            raise ValueError("embedded null byte")
        if any("=" in name or not name for name in environment):
            raise ValueError("illegal environment variable name")
        payload = marshal.dumps((cmd, where, environment))
        head = len(payload).to_bytes(4, "big")
        ours, theirs = socket.socketpair()
        in_r, in_w = os.pipe() if stdin else (os.open(os.devnull, os.O_RDONLY), -1)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        fds = [in_r, out_w, err_w, theirs.fileno()]
        big = -1
        try:
            if len(payload) > _INLINE_MAX:  # too big for one record: it goes in a memfd
                try:
                    big = os.memfd_create("looprail-request", os.MFD_CLOEXEC)
                    view = memoryview(payload)
                    while view:
                        view = view[os.write(big, view) :]
                except OSError:  # no memfd here: this child gets a guard of its own
                    raise _NoServer from None
                fds.append(big)
                payload = b""
            for attempt in (1, 2):
                sock = self._sock if self._owner == os.getpid() else None
                if sock is None:
                    with self._lock:
                        sock = self._server()
                    if sock is None:
                        raise _NoServer
                try:
                    # One record on a SOCK_SEQPACKET socket: atomic, so the wave's threads
                    # send at once, with no lock held across the send (a lock held while a
                    # thread waits to get the GIL back made every other start wait in line).
                    socket.send_fds(sock, [head, payload], fds)
                    break
                except OSError:  # it died: start another, once
                    with self._lock:
                        if self._sock is sock:
                            self._sock = None
                    if attempt == 2:
                        raise _NoServer from None
        except _NoServer:
            _close_fds(in_w, out_r, err_r)
            ours.close()
            return None
        finally:
            _close_fds(in_r, out_w, err_w, big)
            theirs.close()
        return _Served(
            cmd,
            ours,
            os.fdopen(in_w, "wb", buffering=0) if in_w >= 0 else None,
            os.fdopen(out_r, "rb", buffering=0),
            os.fdopen(err_r, "rb", buffering=0),
        )

    def _server(self) -> Any:
        if self._sock is not None and self._owner == os.getpid():
            return self._sock
        for old in self._retired:  # a sender that still held one has had its EPIPE
            old.close()
        self._retired.clear()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        started = threading.Event()
        failed: list[BaseException] = []

        def keep() -> None:
            try:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-I",
                        "-S",
                        str(_GUARD),
                        "--serve",
                        str(os.getpid()),
                        str(theirs.fileno()),
                        *_spares_arg(),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    pass_fds=(theirs.fileno(),),
                )
            except OSError as exc:
                failed.append(exc)
                return
            finally:
                theirs.close()
                started.set()
            proc.wait()  # this thread is the server's parent for as long as it runs
            # Shut down, not closed: a thread may be sending on it without the lock right
            # now; its descriptor number must not be reused under it. Closed with the next
            # server's start.
            with contextlib.suppress(OSError):
                ours.shutdown(socket.SHUT_RDWR)
            with self._lock:
                if self._sock is ours:
                    self._sock = None
                self._retired.append(ours)

        threading.Thread(target=keep, name="looprail-guard-server", daemon=True).start()
        started.wait()
        if failed:
            self._broken = True
            ours.close()
            return None
        self._sock, self._owner = ours, os.getpid()
        return ours


# A request up to this size is one record on the server's socket; a bigger one (a huge
# environment) goes in a memfd passed with it. guard.py reads records of up to this size.
_INLINE_MAX = 60000


def _spares_arg() -> list[str]:
    """How many spare guards the server keeps forked ahead (guard.py `SPARES` unless
    `LOOPRAIL_GUARD_SPARES` says, 0 to 64): a wave's starts take a spare each, no fork."""
    text = os.environ.get("LOOPRAIL_GUARD_SPARES", "").strip()
    return [str(min(int(text), 64))] if text.isdigit() else []


class _NoServer(Exception):
    pass


_SERVER = _GuardServer()


def prestart_guard_server() -> None:
    """Start this process's guard server now rather than at the first child, so that its
    interpreter boots while the caller does other work (`looprail run` imports the machine
    meanwhile) instead of while the first agent waits. A no-op where children get no guard or
    the server is off; a server that cannot start is left to the first child to report."""
    if not guard_available() or os.environ.get("LOOPRAIL_GUARD_SERVER") == "0":
        return
    with _SERVER._lock:
        _SERVER._server()


def _close_fds(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def start_ticks(pid: int, *, live_only: bool = False) -> int | None:
    """Field 22 of /proc/PID/stat (start time since boot), or None when there is no such
    process (or no /proc); with `live_only`, also None for a zombie (dead, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return None
    try:
        fields = text[text.rindex(b")") + 2 :].split()
        if live_only and fields[0] in (b"Z", b"X"):
            return None
        return int(fields[19])
    except (ValueError, IndexError):
        return None


def reap_spawned(spawned: Spawned) -> list[int]:
    """Kill what is left of a child started by an earlier looprail process: its guard and the
    child's process group, each only when its pid still names the very same process (same
    start time), never a process that merely reuses the number. Returns the pids killed."""
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


def confined_path_env(env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """`env` (or this process's environment) with every empty or relative `PATH` entry removed.

    An empty entry means "the current directory" to execvp and to `/bin/sh`, and the child's
    current directory is the project: a bare program name (a resolver's `binary`, a reviewer
    CLI, a word in a shell predicate) would then run a file the project ships. Returns `env`
    unchanged (None stays None) when `PATH` has nothing to remove."""
    base = os.environ if env is None else env
    path = base.get("PATH")
    if path is None:
        return env
    entries = path.split(os.pathsep)
    kept = [e for e in entries if e and os.path.isabs(e)]
    if kept == entries:
        return env
    confined = dict(base)
    confined["PATH"] = os.pathsep.join(kept) if kept else os.defpath
    return confined


def child_pwd_env(
    env: Mapping[str, str] | None, cwd: str | Path | None
) -> Mapping[str, str] | None:
    """`env` (or this process's environment) with `PWD` set to the child's working folder.

    A program that asks `$PWD` before `getcwd()` (OpenCode does, as shells and Node tools often
    do) must find the folder it runs in, not the folder looprail was started from: otherwise a
    task in a plan's worktree writes into the main tree. Unchanged when `cwd` is None."""
    if cwd is None:
        return env
    where = os.path.abspath(cwd)
    base = os.environ if env is None else env
    if base.get("PWD") == where:
        return env
    out = dict(base)
    out["PWD"] = where
    return out


def find_program(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """`shutil.which` over the confined `PATH` (absolute entries only, see `confined_path_env`):
    a bare name is never found in the current directory or the project."""
    base = os.environ if env is None else env
    confined = confined_path_env(base) or base
    path = confined.get("PATH", os.defpath)
    return shutil.which(name, path=path or os.defpath)


def signal_name(number: int) -> str:
    """A signal's name (`SIGKILL`), or `signal N` for a number that names none."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def tail(text: str, limit: int = 2000) -> str:
    """The last `limit` characters of `text` (stderr tails in error messages)."""
    return text if len(text) <= limit else text[-limit:]


def escape_untrusted(text: str) -> str:
    """Make untrusted text (a resolver's stderr, a manifest string) safe to put on one line:
    control characters and newlines become visible escapes (`looprail.textsafe.one_line`)."""
    return one_line(text)
