"""The process guard: every process looprail starts on Linux runs under one of these.

    python -I -S guard.py PARENT_PID STATUS_FD -- ARGV...      # one guard for one child
    python -I -S guard.py --serve PARENT_PID SOCKET_FD         # the guard server (below)

It is a tiny stdlib-only program (run without site-packages, so it starts in milliseconds) that
stands between looprail and the real child, so that nothing a step starts can outlive it:

- `PR_SET_PDEATHSIG`: when looprail dies (even by SIGKILL) the kernel sends the guard SIGTERM;
- `PR_SET_CHILD_SUBREAPER`: a grandchild that double-forks and calls `setsid` to leave the
  process group is re-parented to the guard, not to init, so the guard still sees it;
- when the child exits (or the guard gets SIGTERM/SIGINT/SIGHUP), the guard SIGKILLs the child's
  process group and every process re-parented to it, repeatedly, until it has no children left,
  then exits with the child's own status (a signal death is passed on as the same signal).

The child runs in its own process group (so that group can be killed without the guard) with
default signal dispositions. The guard reports the child's pid and start time (field 22 of
/proc/PID/stat), its own start time and pid (`P<pid> <start> <guard start> <guard pid>`), or
why it could not start it (`E<why>`), on STATUS_FD, then closes it. A guard forked by the guard
server reports the child's exit status there too (`X<code>`) and exits only when looprail
closes the channel.
"""

# Only the C modules underneath the stdlib's wrappers (`posix` under `os`, `_signal` under
# `signal`, `_ctypes` under `ctypes`), never the wrappers and what they import (enum, struct,
# collections, ...): the guard's start-up is paid for every process looprail starts, and this
# halves it.
import _ctypes
import _signal  # type: ignore[import-not-found]  # no stubs: typeshed has `signal` only
import marshal
import os
import posix
import select
import socket
import sys


class _CInt(_ctypes._SimpleCData):
    _type_ = "i"


class _CFunc(_ctypes.CFuncPtr):
    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = _CInt


class _Libc:  # what `ctypes.CDLL(None)` is: the symbols of the running process
    _handle = _ctypes.dlopen(None)  # type: ignore[arg-type]  # dlopen(NULL)


def _prctl(option, value):
    return _CFunc(("prctl", _Libc))(option, value, 0, 0, 0)  # type: ignore[arg-type]


PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_RESET = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGPIPE, _signal.SIGXFSZ)


class _G:
    """The guard's state, shared with its signal handler."""

    child = 0
    group = False  # whether the child's pid still pins its process group id (not yet reaped)
    stopping = False  # a death signal came: start nothing, stop what runs
    reported = False  # served guards: the exit status has been reported, only EOF is awaited
    idle = False  # a spare guard waiting for its request: it has nothing to stop, it just goes
    armed = False  # death signal and handlers set (`_arm`)


def start_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2 :].split()
    return int(fields[19])  # field 22 of the whole line: start time in clock ticks since boot


def _children() -> set[int]:
    me = posix.getpid()
    found: set[int] = set()
    try:
        for tid in posix.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as fh:
                found.update(int(p) for p in fh.read().split())
        return found
    except OSError:
        pass
    for entry in posix.listdir("/proc"):  # kernels without the children file: scan for ppid
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                text = fh.read()
        except OSError:
            continue
        if int(text[text.rindex(b")") + 2 :].split()[1]) == me:
            found.add(int(entry))
    return found


def _kill_tree():
    if _G.child and _G.group:
        try:  # noqa: SIM105 - contextlib is not built in
            posix.killpg(_G.child, _signal.SIGKILL)
        except OSError:
            pass
    for pid in _children():
        try:  # noqa: SIM105
            posix.kill(pid, _signal.SIGKILL)
        except OSError:
            pass


def _on_signal(signum, frame):
    if _G.reported or _G.idle:
        posix._exit(0)
    _G.stopping = True
    _kill_tree()


def _drain():
    """Kill and reap until no child is left (killing one may re-parent its children to us)."""
    while True:
        _kill_tree()
        try:
            posix.waitpid(-1, 0)
        except ChildProcessError:
            return


def _report(fd, text, close=True):
    try:
        posix.write(fd, text.encode())
    finally:
        if close:
            posix.close(fd)


def main():
    if sys.argv[1] == "--serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), *(int(n) for n in sys.argv[4:5]))
    parent, status_fd = int(sys.argv[1]), int(sys.argv[2])
    posix.set_inheritable(status_fd, False)
    guard(sys.argv[4:], status_fd, parent, posix.environ, served=False)


def _arm():
    """The guard's death signal and signal handlers (a spare guard arms before it waits)."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, _signal.SIGTERM)
    for signum in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(signum, _on_signal)
    _G.armed = True


def guard(argv, status_fd, parent, env, served):
    """Start `argv` and stand between it and looprail until it and everything it started are
    gone (see the module docstring). Never returns. `served`: forked by the guard server, so
    the exit status goes on `status_fd` (`X<code>`), and the guard then waits for looprail to
    close that channel before it exits (its pid stays its own until looprail is done)."""
    _spawn(argv, status_fd, parent, env)
    me = posix.getpid()
    started = f"P{_G.child} {start_ticks(_G.child) or 0} {start_ticks(me) or 0} {me}\n"
    _report(status_fd, started, close=not served)
    # The guard itself must not hold the child's pipes open: EOF belongs to the child's tree.
    null = posix.open("/dev/null", posix.O_RDWR)
    for fd in (0, 1, 2):
        posix.dup2(null, fd)
    posix.close(null)
    status = _outlive()
    if served:
        _G.reported = True
        try:
            _report(status_fd, f"X{posix.waitstatus_to_exitcode(status)}\n", close=False)
            while posix.read(status_fd, 4096):  # until looprail closes its end
                pass
        except OSError:
            pass
        posix._exit(0)
    _exit_as(status)


def _spawn(argv, status_fd, parent, env):
    """Start the child in a group of its own, or report why not and exit."""
    if not _G.armed:
        _arm()
    if posix.getppid() != parent:  # looprail died before the death signal was armed
        _report(status_fd, "Elooprail exited before the process could start")
        posix._exit(1)
    if _G.stopping:  # told to stop before the child was started: start nothing
        _report(status_fd, "Elooprail is stopping: the process was not started")
        posix._exit(1)
    try:
        _G.child = posix.posix_spawnp(argv[0], argv, env, setpgroup=0, setsigdef=_RESET)
    except (OSError, ValueError) as exc:
        _report(status_fd, f"E{getattr(exc, 'strerror', None) or exc}")
        posix._exit(127)
    _G.group = True
    if _G.stopping:  # told to stop while the child was being started
        _kill_tree()


def _outlive():
    """Wait for the child, kill its tree, reap it: its wait status."""
    # Wait for the child without reaping it: while it is a zombie its pid, and so its group id,
    # cannot be reused, so killing the group cannot hit an unrelated process.
    try:  # noqa: SIM105
        posix.waitid(posix.P_PID, _G.child, posix.WEXITED | posix.WNOWAIT)
    except ChildProcessError:
        pass
    _kill_tree()
    status = 0
    try:  # noqa: SIM105
        _, status = posix.waitpid(_G.child, 0)
    except ChildProcessError:
        pass
    _G.group = False
    _drain()
    return status


def _exit_as(status):
    """Exit with the child's own status: a signal death is passed on as the same signal."""
    if posix.WIFSIGNALED(status):
        sig = posix.WTERMSIG(status)
        import resource  # only on this path: it is not built in

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig not in (_signal.SIGKILL, _signal.SIGSTOP):
            _signal.signal(sig, _signal.SIG_DFL)
            _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [sig])
        posix.kill(posix.getpid(), sig)
    posix._exit(posix.waitstatus_to_exitcode(status) if posix.WIFEXITED(status) else 1)


# -- the guard server ----------------------------------------------------------------------------
#
#     python -I -S guard.py --serve PARENT_PID SOCKET_FD [SPARES]
#
# One per looprail process, started once: it forks a guard for each process looprail starts
# (a fork of this small, already started interpreter instead of a new one per process). A
# request is one record on the socket (SOCK_SEQPACKET: looprail's threads send at once, no
# lock): a 4-byte length and a marshalled (argv, cwd, env), with four descriptors attached: the
# child's stdin, stdout and stderr, and the guard's status channel (a request too big for one
# record comes in a memfd, a fifth descriptor).
# The server dies with looprail (PR_SET_PDEATHSIG, or EOF on the socket), and each guard dies
# with the server (its own PR_SET_PDEATHSIG), killing its tree: the chain is as strong as one
# guard per process.
#
# Spares: the server keeps up to SPARES guards forked ahead of time (default 8), each already in
# its own session with its death signal armed, waiting on a channel of its own. A request goes
# to a spare (the server forwards it, no fork on the way), or, when none is left, to a guard
# forked for it as before. Spares are forked again only after a moment without requests, so
# the forks never compete with a burst of starts (a wave's plans). An idle spare exits when the
# server dies (its death signal, or EOF on its channel) and starts nothing.

SPARES = 8
_RECORD_MAX = 4 + 60000  # guard_client.py's _INLINE_MAX: a bigger request comes in a memfd
_REFILL_S = 0.02  # quiet time before one more spare is forked


def serve(parent, sock_fd, spares=SPARES):
    _prctl(PR_SET_PDEATHSIG, _signal.SIGTERM)
    if posix.getppid() != parent:
        posix._exit(1)
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # guards are reaped by the kernel
    server = posix.getpid()
    sock = socket.socket(fileno=sock_fd)
    idle: list = []  # our ends of the spares' channels (sockets), oldest first

    while True:
        if len(idle) < spares and not select.select([sock], [], [], _REFILL_S)[0]:
            spare = _fork_spare(sock, idle, server)
            if spare is not None:
                idle.append(spare)
            continue
        record, fds, flags, _addr = socket.recv_fds(sock, _RECORD_MAX, 5)
        if not record:
            posix._exit(0)  # looprail closed the socket (or died)
        payload = _payload(record, fds, flags)
        if payload is None:
            for fd in fds:
                posix.close(fd)
            continue
        while idle:
            channel = idle.pop(0)
            try:
                socket.send_fds(channel, [len(payload).to_bytes(4, "big")], fds)
                channel.sendall(payload)
                break
            except OSError:  # that spare is gone (killed): the next one, or a fork
                continue
            finally:
                channel.close()
        else:
            if posix.fork() == 0:
                sock.close()
                for channel in idle:
                    channel.close()
                _become_guard(fds, marshal.loads(payload), server, setup=True)
        for fd in fds:
            posix.close(fd)


def _payload(record, fds, flags):
    """The marshalled request of one record (a 4-byte length, then the request, or with a
    fifth descriptor, a memfd holding it), or None for a record that is not a request."""
    if flags & 0x20 or len(record) < 4 or len(fds) not in (4, 5):  # 0x20: MSG_TRUNC
        return None
    size = int.from_bytes(record[:4], "big")
    if len(fds) == 4:
        return record[4:] if len(record) == 4 + size else None
    big = fds.pop()
    try:
        chunks, got = [], 0
        while got < size:
            chunk = posix.pread(big, size - got, got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    finally:
        posix.close(big)
    return b"".join(chunks) if got == size else None


def _exactly(sock, n, first=b""):
    data = first
    while len(data) < n:
        more = sock.recv(n - len(data))
        if not more:
            posix._exit(0)  # the other end is closed (looprail, or for a spare the server)
        data += more
    return data


def _setup():
    """What a forked guard does before anything else: its own session and group (as a guard
    started by looprail has), default SIGCHLD, the death signal and handlers armed."""
    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
    posix.setsid()
    _arm()


def _fork_spare(sock, idle, server):
    """Fork a spare guard; returns our end of its channel (None if the fork failed)."""
    try:
        ours, theirs = socket.socketpair()
        pid = posix.fork()
    except OSError:
        return None
    if pid:
        theirs.close()
        return ours
    _G.idle = True  # until its request: a death signal just ends it
    sock.close()
    for channel in (*idle, ours):
        channel.close()
    _setup()
    if posix.getppid() != server:  # the server died before the death signal was armed
        posix._exit(0)
    head, fds, _flags, _addr = socket.recv_fds(theirs, 4, 4)
    if not head or len(fds) != 4:
        posix._exit(0)
    payload = _exactly(theirs, int.from_bytes(_exactly(theirs, 4, head), "big"))
    _G.idle = False  # from here on a death signal stops (or refuses) its child
    theirs.close()
    _become_guard(fds, marshal.loads(payload), server, setup=False)


def _become_guard(fds, request, server, setup):
    """Serve one request: `fds` become stdin, stdout and stderr, then `guard` (never returns)."""
    argv, cwd, env = request
    if setup:
        _setup()
    for target, fd in enumerate(fds[:3]):
        posix.dup2(fd, target)
        posix.close(fd)
    status_fd = fds[3]
    # Received descriptors are inheritable: the child must not get the status channel (it
    # could write `X0` on it and pass for a success whatever it exits with).
    posix.set_inheritable(status_fd, False)
    try:
        posix.chdir(cwd)
    except OSError as exc:
        _report(status_fd, f"E{exc.strerror or exc}")
        posix._exit(127)
    if "/" not in argv[0]:  # posix_spawnp looks a bare name up on this process's PATH
        os.environ.clear()  # putenv
        os.environ.update(env)
    guard(argv, status_fd, server, env, served=True)


if __name__ == "__main__":
    main()
