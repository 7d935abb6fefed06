"""looprail's side of the process guard (guard.py, Linux): who a started child is (`Spawned`),
the guard's one report, and the guard server, one running guard interpreter that forks a guard
per child so that no child pays for an interpreter start."""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
GUARD_GRACE_S = 2.0


def guard_available() -> bool:
    """Every child runs under the guard where the kernel offers what it needs (Linux prctl);
    `LOOPRAIL_NO_GUARD=1` turns it off (then children are process groups, as elsewhere)."""
    return (
        sys.platform.startswith("linux")
        and os.environ.get("LOOPRAIL_NO_GUARD") != "1"
        and bool(sys.executable)  # an embedding interpreter may have none to start the guard
        and _GUARD.is_file()
    )


def guard_argv(status_fd: int) -> list[str]:
    return [sys.executable, "-I", "-S", str(_GUARD), str(os.getpid()), str(status_fd)]


def parse_started(raw: bytes, guard_pid: int, argv0: str) -> Spawned | str:
    text = raw.decode(errors="replace").strip()
    if text.startswith("P"):
        pid, start, guard_start = (int(x) for x in text[1:].split()[:3])
        return Spawned(pid, start, guard_pid, guard_start, argv0)
    return text[1:] if text.startswith("E") else "the process guard did not start"


class Served:
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
        spawned = parse_started(line, self.pid, argv0)
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


class GuardServer:
    """The guard server of this process (see guard.py), started on first use from a thread
    that lives as long as it does (PR_SET_PDEATHSIG follows the parent *thread*)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: Any = None
        self._owner = 0  # the pid that started it: a forked child starts its own
        self._broken = False
        self._retired: list[Any] = []  # sockets of servers that died, closed at the next start

    def start(self, cmd: list[str], stdin: bool, cwd: Any, env: Any) -> Served | None:
        """Start `cmd` under a served guard, or None when there is no server (then the caller
        starts a guard of its own)."""
        if self._broken or os.environ.get("LOOPRAIL_GUARD_SERVER") == "0":
            return None
        payload = _request(cmd, cwd, env)
        head = len(payload).to_bytes(4, "big")
        ours, theirs = socket.socketpair()
        in_r, in_w = os.pipe() if stdin else (os.open(os.devnull, os.O_RDONLY), -1)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        fds = [in_r, out_w, err_w, theirs.fileno()]
        big = -1
        try:
            if len(payload) > _INLINE_MAX:  # too big for one record: it goes in a memfd
                big = _memfd(payload)
                fds.append(big)
                payload = b""
            self._send(head, payload, fds)
        except _NoServer:
            close_fds(in_w, out_r, err_r)
            ours.close()
            return None
        finally:
            close_fds(in_r, out_w, err_w, big)
            theirs.close()
        return Served(
            cmd,
            ours,
            os.fdopen(in_w, "wb", buffering=0) if in_w >= 0 else None,
            os.fdopen(out_r, "rb", buffering=0),
            os.fdopen(err_r, "rb", buffering=0),
        )

    def _send(self, head: bytes, payload: bytes, fds: list[int]) -> None:
        for attempt in (1, 2):
            sock = self._sock if self._owner == os.getpid() else None
            if sock is None:
                with self._lock:
                    sock = self._server()
                if sock is None:
                    raise _NoServer
            try:
                # One record on a SOCK_SEQPACKET socket: atomic, so the wave's threads send at
                # once, with no lock held across the send (a lock held while a thread waits to
                # get the GIL back made every other start wait in line).
                socket.send_fds(sock, [head, payload], fds)
                return
            except OSError:  # it died: start another, once
                with self._lock:
                    if self._sock is sock:
                        self._sock = None
                if attempt == 2:
                    raise _NoServer from None

    def _server(self) -> Any:
        if self._sock is not None and self._owner == os.getpid():
            return self._sock
        for old in self._retired:  # a sender that still held one has had its EPIPE
            old.close()
        self._retired.clear()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        started = threading.Event()
        failed: list[BaseException] = []
        threading.Thread(
            target=self._keep,
            args=(ours, theirs, started, failed),
            name="looprail-guard-server",
            daemon=True,
        ).start()
        started.wait()
        if failed:
            self._broken = True
            ours.close()
            return None
        self._sock, self._owner = ours, os.getpid()
        return ours

    def _keep(
        self, ours: Any, theirs: Any, started: threading.Event, failed: list[BaseException]
    ) -> None:
        """The server's parent thread, for as long as the server runs."""
        argv = [sys.executable, "-I", "-S", str(_GUARD), "--serve", str(os.getpid())]
        try:
            proc = subprocess.Popen(
                [*argv, str(theirs.fileno()), *_spares_arg()],
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
        proc.wait()
        # Shut down, not closed: a thread may be sending on it without the lock right now; its
        # descriptor number must not be reused under it. Closed with the next server's start.
        with contextlib.suppress(OSError):
            ours.shutdown(socket.SHUT_RDWR)
        with self._lock:
            if self._sock is ours:
                self._sock = None
            self._retired.append(ours)


def _request(cmd: list[str], cwd: Any, env: Any) -> bytes:
    """What the server is sent: argv, folder and environment, refused as Popen refuses them
    before it starts anything."""
    where = str(cwd) if cwd is not None else os.getcwd()
    environment = dict(env if env is not None else os.environ)
    if any("\0" in text for text in (*cmd, where, *environment, *environment.values())):
        raise ValueError("embedded null byte")
    if any("=" in name or not name for name in environment):
        raise ValueError("illegal environment variable name")
    return marshal.dumps((cmd, where, environment))


def _memfd(payload: bytes) -> int:
    try:
        big = os.memfd_create("looprail-request", os.MFD_CLOEXEC)
        view = memoryview(payload)
        while view:
            view = view[os.write(big, view) :]
    except OSError:  # no memfd here: this child gets a guard of its own
        raise _NoServer from None
    return big


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


SERVER = GuardServer()


def prestart_guard_server() -> None:
    """Start this process's guard server now rather than at the first child, so that its
    interpreter boots while the caller does other work (`looprail run` imports the machine
    meanwhile) instead of while the first agent waits. A no-op where children get no guard or
    the server is off; a server that cannot start is left to the first child to report."""
    if not guard_available() or os.environ.get("LOOPRAIL_GUARD_SERVER") == "0":
        return
    with SERVER._lock:
        SERVER._server()


def close_fds(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def proc_state(pid: int) -> list[bytes]:
    """The fields of /proc/PID/stat after the command name, the state first; [] when there is
    no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
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
