"""The `looprail` command line's entry: every command goes through argparse
(`looprail/cli/app.py`), under one error policy.

Exit codes: 0 success; 1 the work was refused or failed (bad input, halted loop); 2 usage error;
3 paused at a checkpoint; 130 interrupted (Ctrl-C); 143 terminated (SIGTERM); 129 hung up
(SIGHUP). After 130/143/129 the run is journaled `halted` and resumes with `looprail run`.

Every command takes the global `-q/--quiet` and `-v/--verbose`, before or after its name.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from looprail.errors import LooprailError


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except Exception as exc:
        return _refused(exc)
    except KeyboardInterrupt as exc:
        # SIGTERM/SIGHUP during a run arrive as a KeyboardInterrupt carrying the signal.
        signum = getattr(exc, "signum", None)
        print(f"looprail: interrupted{f' (signal {signum})' if signum else ''}", file=sys.stderr)
        return 128 + signum if signum else 130


def _refused(exc: Exception) -> int:
    """The exit code of a call that raised `exc`, after one line saying why; anything but a
    looprail error, a closed pipe or an OS refusal is raised again (a bug: its traceback)."""
    if isinstance(exc, LooprailError):
        print(f"looprail: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, BrokenPipeError):
        # The reader went away (`looprail … | head`): not an error. Point stdout at /dev/null
        # so the interpreter's final flush does not fail again with a traceback.
        _silence_stdout()
        return 0
    if isinstance(exc, OSError):
        # A file or folder the user named that the OS refuses (permissions, a name too long,
        # a full disk): one line, like every other user error.
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"looprail: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    raise exc


def console() -> None:
    """The `looprail` console script: `main()`, then a fast exit.

    Interpreter teardown (garbage-collecting every module, pydantic's and statemachine's
    classes) costs CPU after all the work is done: a seventh of a `status` call
    (docs/scale.md). Once stdout and stderr are flushed and nothing is left running (no
    thread, no child process: runs close their journal, lock, executors and clusters before
    `main()` returns), nothing remains for teardown to do, so the process ends with
    `os._exit`. Otherwise (a library left a thread or child behind) it
    exits the normal way, atexit handlers and all. `main()` itself never exits: tests and
    embedders call it in process."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        _silence_stdout()
    except (OSError, ValueError):
        sys.exit(code)
    # No threading module loaded: no thread was ever started through it (and importing it
    # just to ask would cost `status` milliseconds).
    threading = sys.modules.get("threading")
    busy = threading is not None and any(
        t is not threading.current_thread() for t in threading.enumerate()
    )
    if not busy and "multiprocessing" in sys.modules:
        import multiprocessing  # already loaded (checked above): this only names it

        busy = bool(multiprocessing.active_children())
    if busy:
        sys.exit(code)
    os._exit(code)


def _dispatch(argv: list[str]) -> int:
    # The entry's imports are function-level on purpose: each path loads only its own modules.
    if argv == ["--version"]:
        # Fast: no parser built, nothing imported (scripts call this to probe).
        from looprail._version import __version__

        print(f"looprail {__version__}")
        raise SystemExit(0)  # as argparse's version action does
    from looprail.cli import app

    return app.dispatch(argv)


def _silence_stdout() -> None:
    # (OSError, ValueError): stdout is not a real file (captured in a test)
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    console()
