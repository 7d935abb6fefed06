"""The process guard, between looprail and every child it starts on Linux, so that nothing a
step starts can outlive looprail:

    python -I -S guard.py PARENT_PID STATUS_FD -- ARGV...

`PR_SET_PDEATHSIG`: when looprail dies (even by SIGKILL) the guard gets SIGTERM.
`PR_SET_CHILD_SUBREAPER`: a grandchild that double-forks and `setsid`s is re-parented to the
guard, not to init. When the child exits (or the guard gets SIGTERM/SIGINT/SIGHUP), the guard
SIGKILLs the child's group and every process re-parented to it until none is left, then exits
with the child's status. It reports `P<pid> <start> <guard start> <guard pid>` (start: field 22
of /proc/PID/stat) or `E<why>` on STATUS_FD."""

# Only the C modules under the stdlib's wrappers (`posix`, `_signal`, `_ctypes`), never what the
# wrappers import: the guard's start-up is paid for every process looprail starts.
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


class _G:
    """The guard's state, shared with its signal handler."""

    child = 0
    group = False  # whether the child's pid still pins its process group id (not yet reaped)
    stopping = False  # a death signal came: start nothing, stop what runs


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


def _report(fd, text):
    try:
        posix.write(fd, text.encode())
    finally:
        posix.close(fd)


def main():
    """Start the child, and stand by until it and all it started are gone. Never returns."""
    parent, status_fd = int(sys.argv[1]), int(sys.argv[2])
    posix.set_inheritable(status_fd, False)
    _spawn(sys.argv[4:], status_fd, parent)
    me = posix.getpid()
    _report(status_fd, f"P{_G.child} {start_ticks(_G.child) or 0} {start_ticks(me) or 0} {me}\n")
    # The guard itself must not hold the child's pipes open: EOF belongs to the child's tree.
    null = posix.open("/dev/null", posix.O_RDWR)
    for fd in (0, 1, 2):
        posix.dup2(null, fd)
    posix.close(null)
    _exit_as(_outlive())


def _spawn(argv, status_fd, parent):
    """Start the child in a group of its own, or report why not and exit."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, _signal.SIGTERM)
    for signum in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(signum, _on_signal)
    if posix.getppid() != parent:  # looprail died before the death signal was armed
        _report(status_fd, "Elooprail exited before the process could start")
        posix._exit(1)
    if _G.stopping:  # told to stop before the child was started: start nothing
        _report(status_fd, "Elooprail is stopping: the process was not started")
        posix._exit(1)
    try:
        _G.child = posix.posix_spawnp(argv[0], argv, posix.environ, setpgroup=0, setsigdef=_RESET)
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


if __name__ == "__main__":
    main()
