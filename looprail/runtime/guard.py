"""The process guard: every process looprail starts on Linux runs under one of these.

    python -I -S guard.py PARENT_PID STATUS_FD -- ARGV...

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
/proc/PID/stat), or why it could not start it, on STATUS_FD, then closes it.
"""

# Only the C modules underneath the stdlib's wrappers (`posix` under `os`, `_signal` under
# `signal`, `_ctypes` under `ctypes`), never the wrappers and what they import (enum, struct,
# collections, ...): the guard's start-up is paid for every process looprail starts, and this
# halves it.
import _ctypes
import _signal  # type: ignore[import-not-found]  # no stubs: typeshed has `signal` only
import posix
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

_child = 0
_group = False  # whether the child's pid still pins its process group id (not yet reaped)


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
    if _child and _group:
        try:  # noqa: SIM105 - contextlib is not built in
            posix.killpg(_child, _signal.SIGKILL)
        except OSError:
            pass
    for pid in _children():
        try:  # noqa: SIM105
            posix.kill(pid, _signal.SIGKILL)
        except OSError:
            pass


_stopping = False


def _on_signal(signum, frame):
    global _stopping
    _stopping = True
    _kill_tree()


def _drain():
    """Kill and reap until no child is left (killing one may re-parent its children to us)."""
    while True:
        _kill_tree()
        try:
            posix.waitpid(-1, 0)
        except ChildProcessError:
            return


def _report(fd, text):
    try:
        posix.write(fd, text.encode())
    finally:
        posix.close(fd)


def main():
    global _child, _group
    parent, status_fd = int(sys.argv[1]), int(sys.argv[2])
    argv = sys.argv[4:]
    posix.set_inheritable(status_fd, False)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, _signal.SIGTERM)
    for signum in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(signum, _on_signal)
    if posix.getppid() != parent:  # looprail died before the death signal was armed
        _report(status_fd, "Elooprail exited before the process could start")
        posix._exit(1)
    try:
        _child = posix.posix_spawnp(argv[0], argv, posix.environ, setpgroup=0, setsigdef=_RESET)
    except OSError as exc:
        _report(status_fd, f"E{exc.strerror or exc}")
        posix._exit(127)
    _group = True
    if _stopping:  # told to stop while the child was being started
        _kill_tree()
    _report(status_fd, f"P{_child} {start_ticks(_child) or 0} {start_ticks(posix.getpid()) or 0}\n")
    # The guard itself must not hold the child's pipes open: EOF belongs to the child's tree.
    null = posix.open("/dev/null", posix.O_RDWR)
    for fd in (0, 1, 2):
        posix.dup2(null, fd)
    posix.close(null)
    # Wait for the child without reaping it: while it is a zombie its pid, and so its group id,
    # cannot be reused, so killing the group cannot hit an unrelated process.
    try:  # noqa: SIM105
        posix.waitid(posix.P_PID, _child, posix.WEXITED | posix.WNOWAIT)
    except ChildProcessError:
        pass
    _kill_tree()
    status = 0
    try:  # noqa: SIM105
        _, status = posix.waitpid(_child, 0)
    except ChildProcessError:
        pass
    _group = False
    _drain()
    if posix.WIFSIGNALED(status):
        sig = posix.WTERMSIG(status)
        import resource  # only on this path: it is not built in

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig not in (_signal.SIGKILL, _signal.SIGSTOP):
            _signal.signal(sig, _signal.SIG_DFL)
            _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [sig])
        posix.kill(posix.getpid(), sig)
    posix._exit(posix.waitstatus_to_exitcode(status) if posix.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
