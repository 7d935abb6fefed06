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

import contextlib
import ctypes
import os
import resource
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_RESET = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ)

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
    me = os.getpid()
    found: set[int] = set()
    try:
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as fh:
                found.update(int(p) for p in fh.read().split())
        return found
    except OSError:
        pass
    for entry in os.listdir("/proc"):  # kernels without the children file: scan for ppid
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
        with contextlib.suppress(OSError):
            os.killpg(_child, signal.SIGKILL)
    for pid in _children():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


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
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _report(fd, text):
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def main():
    global _child, _group
    parent, status_fd = int(sys.argv[1]), int(sys.argv[2])
    argv = sys.argv[4:]
    os.set_inheritable(status_fd, False)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    if os.getppid() != parent:  # looprail died before the death signal was armed
        _report(status_fd, "Elooprail exited before the process could start")
        os._exit(1)
    if _stopping:  # told to stop before the child was started: start nothing
        _report(status_fd, "Elooprail is stopping: the process was not started")
        os._exit(1)
    try:
        _child = os.posix_spawnp(argv[0], argv, os.environ, setpgroup=0, setsigdef=_RESET)
    except OSError as exc:
        _report(status_fd, f"E{exc.strerror or exc}")
        os._exit(127)
    _group = True
    if _stopping:  # told to stop while the child was being started
        _kill_tree()
    _report(status_fd, f"P{_child} {start_ticks(_child) or 0} {start_ticks(os.getpid()) or 0}\n")
    # The guard itself must not hold the child's pipes open: EOF belongs to the child's tree.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    # Wait for the child without reaping it: while it is a zombie its pid, and so its group id,
    # cannot be reused, so killing the group cannot hit an unrelated process.
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, _child, os.WEXITED | os.WNOWAIT)
    _kill_tree()
    status = 0
    with contextlib.suppress(ChildProcessError):
        _, status = os.waitpid(_child, 0)
    _group = False
    _drain()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
