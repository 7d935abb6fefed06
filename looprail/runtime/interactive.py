"""An interactive session on the user's terminal (`run --interactive`'s discuss step): the
agent CLI's interactive mode, or `.looprail/agents/orchestrator` with the terminal as its stdin
(docs/agents.md, "An interactive discuss"). Ctrl-Z and `fg` work; SIGTERM and SIGHUP still stop
both; the artifact the step owed decides whether it is done."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from looprail.runtime.base import Outcome, Request
from looprail.runtime.childenv import child_pwd_env, confined_path_env
from looprail.runtime.owed import owed_problem
from looprail.runtime.process import Spawned, _notify, _why, exit_words, proc_state, start_ticks
from looprail.runtime.prompts import owed_file

NOT_CAPTURED = "not captured: an interactive session on the terminal"
_END_GRACE_S = 3.0  # after SIGTERM, before SIGKILL


def terminal_problem() -> str | None:
    """Why this process cannot hand its terminal to a child, or None: stdin and stdout must be
    a terminal, looprail in its foreground (a background job's child stops when it reads)."""
    fds = {}
    for name in ("stdin", "stdout"):
        fd = _fd(getattr(sys, name))
        if fd is None or not os.isatty(fd):
            return f"{name} is not a terminal"
        fds[name] = fd
    try:
        if os.tcgetpgrp(fds["stdin"]) != os.getpgrp():
            return "looprail runs in the background of its terminal"
    except OSError:
        return "stdin is not looprail's controlling terminal"
    return None


@dataclass(frozen=True)
class Session:
    exit_code: int | None  # negative: killed by that signal; None: not started or timed out
    duration_s: float
    timed_out: bool = False
    spawn_error: str | None = None

    def how(self) -> str:
        if self.spawn_error:
            return f"could not start: {self.spawn_error}"
        if self.timed_out:
            return "timed out and was stopped"
        return exit_words(self.exit_code)


def run_on_terminal(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float | None = None,
) -> Session:
    """Run `argv` with the terminal until it exits (or `timeout_s`), then put the terminal's
    modes back (a CLI killed in raw mode leaves them raw)."""
    fd_in, fd_out, fd_err = _fd(sys.stdin), _fd(sys.stdout), _fd(sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = _tty_modes(fd_in)
    start = time.monotonic()
    child_env = child_pwd_env(confined_path_env(env), cwd) or env
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=fd_in,
            stdout=fd_out,
            stderr=fd_err,
            cwd=str(cwd),
            env=dict(child_env),
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv or env
        return Session(None, time.monotonic() - start, spawn_error=_why(exc))
    # Journaled as every child is: a resume after a killed looprail stops what it left.
    _notify(Spawned(proc.pid, start_ticks(proc.pid) or 0, 0, 0, str(argv[0])))
    # Ctrl-C belongs to the session while it runs; ignored only now, after the exec: an
    # ignored signal would stay ignored in the child.
    ignored = _ignore_interrupts()
    try:
        code, timed_out = _wait(proc, start + timeout_s if timeout_s else None)
    except BaseException:
        _end(proc)
        raise
    finally:
        _restore_modes(fd_in, saved)
        for signum, handler in ignored.items():
            signal.signal(signum, handler)
    return Session(code, time.monotonic() - start, timed_out=timed_out)


def _ignore_interrupts() -> dict[int, Any]:
    """Ignore SIGINT and SIGQUIT (main thread only); returns the handlers to put back."""
    if not _main_thread():
        return {}
    return {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}


def _wait(proc: subprocess.Popen[Any], deadline: float | None) -> tuple[int | None, bool]:
    """Reap the session's process: `(exit code, timed out)`. A CLI that stops itself (Ctrl-Z
    in its raw-mode screen) stops looprail's whole job with it, so the shell gets the terminal
    back; `fg` continues both."""
    flags = os.WUNTRACED | (os.WNOHANG if deadline is not None else 0)
    while True:
        pid, status = os.waitpid(proc.pid, flags)
        if pid == 0:  # still running (only with a deadline)
            if time.monotonic() >= deadline:  # type: ignore[operator]
                _end(proc)
                return None, True
            time.sleep(0.05)
            continue
        if os.WIFSTOPPED(status):
            time.sleep(0.05)  # a Ctrl-Z of the whole job is continued by `fg` meanwhile
            if proc_state(proc.pid)[:1] in ([b"T"], [b"t"]):
                os.killpg(os.getpgrp(), signal.SIGTSTP)
            continue
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, False


def _end(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL after a grace, by pid (it shares looprail's process group)."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(OSError):
        proc.send_signal(signal.SIGCONT)  # a stopped process would not see the SIGTERM
        proc.terminate()
    try:
        proc.wait(timeout=_END_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(timeout=_END_GRACE_S)
    except BaseException:
        with contextlib.suppress(OSError):
            proc.kill()
        raise


def _fd(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None


def _tty_modes(fd: int | None) -> Any:
    with contextlib.suppress(Exception):  # termios.error: not a terminal
        return None if fd is None else termios.tcgetattr(fd)
    return None


def _restore_modes(fd: int | None, saved: Any) -> None:
    if fd is None or saved is None:
        return

    # A background process that sets the modes is sent SIGTTOU: looprail is in the foreground
    # here, but ignore it for the one call all the same.
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN) if _main_thread() else None
    try:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTTOU, previous)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def handover_line(who: str, shown: str, request: Request, project: Path) -> str:
    return (
        f"◆ {request.role or request.name}: {who} has the terminal ({shown}); the loop goes on "
        f"when you end the session with {owed_file(request, project)} written (the conversation "
        "is not captured)"
    )


def shown_argv(argv: Sequence[str], prompt: str) -> str:
    """The command line as printed and filed, the prompt as `<prompt>`."""
    out = []
    for a in argv:
        if a == prompt:
            out.append("<prompt>")
        elif prompt and a.endswith("=" + prompt):
            out.append(shlex.quote(a[: -len(prompt)]) + "<prompt>")
        else:
            out.append(shlex.quote(a))
    return " ".join(out)


def session_outcome(
    who: str, session: Session, request: Request, project: Path, **common: Any
) -> Outcome:
    """The artifact decides (an exit code after a conversation says little)."""
    if session.spawn_error:
        return Outcome.failed(f"{who}: could not start: {session.spawn_error}", **common)
    problem = owed_problem(request, project)
    if problem is None:
        return Outcome.succeeded(**common)
    code = session.exit_code if session.exit_code not in (0, None) else None
    return Outcome.failed(
        f"{request.role or who} did not deliver: {problem}: the interactive {who} session "
        f"{session.how()} without writing {owed_file(request, project)}",
        exit_code=code,
        timed_out=session.timed_out,
        **common,
    )


def write_meta(folder: Path, shown: str, session: Session, outcome: Outcome) -> None:
    meta = {
        "interactive": True,
        "argv": shown,
        "transcript": NOT_CAPTURED,
        "exitCode": session.exit_code,
        "timedOut": session.timed_out,
        "durationS": round(session.duration_s, 3),
        "ok": outcome.ok,
        "detail": outcome.detail,
    }
    with contextlib.suppress(OSError):
        (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
