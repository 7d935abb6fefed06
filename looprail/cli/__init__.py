"""The `looprail` command line: parse, call one function, print, exit.

Each command group lives in its own module here and exposes `register(subparsers)`; handlers
import what they need lazily so that `looprail loop render-hooks` (called many times per loop by
hosts) never pays for networkx, graphviz or statemachine.

Exit codes: 0 success; 1 the work was refused or failed (bad input, halted loop); 2 usage error;
3 paused at a checkpoint; 130 interrupted (Ctrl-C); 143 terminated (SIGTERM); 129 hung up
(SIGHUP). After 130/143/129 the run is journaled `halted` and resumes with `looprail run`.

Every command takes the global `-q/--quiet` and `-v/--verbose`, before or after its name.
"""

from __future__ import annotations

import importlib
import sys

from looprail.errors import LooprailError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

# Command-group modules, in the order `looprail --help` lists them.
_GROUPS = (
    "run",
    "answer",
    "agents",
    "journal",
    "loop",
    "capability",
    "phase",
    "check",
    "task",
    "hooks",
    "trust",
    "review_lane",
    "diagram",
    "lint",
    "schema",
    "completion",
    "ui",
)


# Top-level commands that live in a group module under another name.
_COMMAND_MODULE = {
    "status": "journal",
    "history": "journal",
    "report": "journal",
    "resume": "run",
    "init": "agents",
    "doctor": "agents",
    "review-lane": "review_lane",
    "trust": "trust",
    "revoke": "trust",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (with `only`) just the one command group argv names: a host calls
    `loop render-hooks` many times per loop, and building every subparser costs milliseconds."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="looprail",
        description="Declarative state-machine orchestrator for the discuss → plan → execute → "
        "verify → ship loop.",
    )
    from looprail._version import __version__

    parser.add_argument("--version", action="version", version=f"looprail {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _GROUPS if only is None else (only,):
        importlib.import_module(f"looprail.cli.{name}").register(sub)
    _add_globals(parser)
    return parser


def _add_globals(parser: argparse.ArgumentParser) -> None:
    """-q/-v on this parser and every subcommand under it. Defaults are SUPPRESS so that
    `looprail -q run` and `looprail run -q` both count (a subcommand's default would otherwise
    overwrite the flag given before it); `_dispatch` fills in the defaults after parsing."""
    import argparse

    known = parser._option_string_actions
    if "-q" in known:
        known["-q"].default = argparse.SUPPRESS
    else:
        parser.add_argument(
            "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="say less"
        )
    if "-v" not in known:
        parser.add_argument(
            "-v",
            "--verbose",
            action="count",
            default=argparse.SUPPRESS,
            help="say more (repeatable); run and resume stream what every step, check and "
            "agent prints while it runs",
        )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _add_globals(child)


def _group_of(argv: Sequence[str]) -> str | None:
    if not argv or argv[0].startswith("-"):
        return None
    name = _COMMAND_MODULE.get(argv[0], argv[0].replace("-", "_"))
    return name if name in _GROUPS else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything printed from data goes through one filter (no escape sequences, ever); the
    # render-hooks envelope is JSON (control characters already escaped) and stays byte-exact.
    saved = None
    if argv[:2] != ["loop", "render-hooks"]:
        from looprail import textsafe

        saved = textsafe.install()
    try:
        return _main(argv)
    finally:
        if saved is not None:
            textsafe.restore(saved)


def _main(argv: list[str]) -> int:
    try:
        return _dispatch(argv)
    except LooprailError as exc:
        print(f"looprail: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # The reader went away (`looprail … | head`): not an error. Point stdout at /dev/null
        # so the interpreter's final flush does not fail again with a traceback.
        _silence_stdout()
        return 0
    except OSError as exc:
        # A file or folder the user named that the OS refuses (permissions, a name too long,
        # a full disk): one line, like every other user error.
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"looprail: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        # SIGTERM/SIGHUP during a run arrive as a KeyboardInterrupt carrying the signal.
        signum = getattr(exc, "signum", None)
        print(f"looprail: interrupted{f' (signal {signum})' if signum else ''}", file=sys.stderr)
        return 128 + signum if signum else 130


def console() -> None:
    """The `looprail` console script: `main()`, then a fast exit.

    Interpreter teardown (garbage-collecting every module, pydantic's and statemachine's
    classes) costs ~0.1 s of CPU after all the work is done. Once stdout and stderr are flushed
    and nothing is left running (no thread, no child process: runs close their journal, lock,
    executors and clusters before `main()` returns), nothing remains for teardown to do, so
    the process ends with `os._exit`. Otherwise (a library left a thread or child behind) it
    exits the normal way, atexit handlers and all. `main()` itself never exits: tests and
    embedders call it in process."""
    import os

    from looprail import gcpause

    gcpause.pause()  # resumed before a handler runs, or by run/resume when the loop starts
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        _silence_stdout()
    except (OSError, ValueError):
        sys.exit(code)
    # No threading module loaded: no thread was ever started through it (and importing it
    # just to ask would cost `status` milliseconds). The guard server's keeper thread does not
    # count: no guard is running by now, and the server dies with this process
    # (PR_SET_PDEATHSIG), as designed.
    threading = sys.modules.get("threading")
    busy = threading is not None and any(
        t is not threading.current_thread() and t.name != "looprail-guard-server"
        for t in threading.enumerate()
    )
    if not busy and "multiprocessing" in sys.modules:
        import multiprocessing

        busy = bool(multiprocessing.active_children())
    if busy:
        sys.exit(code)
    os._exit(code)


def _dispatch(argv: list[str]) -> int:
    if argv == ["--version"]:
        # Fast: no subparsers built, nothing imported (scripts call this to probe).
        from looprail._version import __version__

        print(f"looprail {__version__}")
        raise SystemExit(0)  # as argparse's version action does
    args = None
    if argv[:2] == ["loop", "render-hooks"]:
        # The hot path: a plain argv is read without argparse (~10 ms of imports and setup);
        # anything unusual (help, a typo, an unknown flag) goes through argparse below.
        from looprail.cli.loop import fast_render_hooks_args

        args = fast_render_hooks_args(argv[2:])
    elif argv[:1] in (["status"], ["history"], ["report"]):
        # Read often (hosts poll status): a plain argv skips argparse the same way.
        from looprail.cli.journal import fast_args

        args = fast_args(argv)
    elif argv[:1] in (["run"], ["resume"]):
        # Every run pays for its start-up: a plain argv skips argparse too.
        from looprail.cli.run import fast_args as fast_run_args

        args = fast_run_args(argv)
    if args is None:
        parser = build_parser(_group_of(argv))
        args = parser.parse_args(argv)
    from looprail.cli import _common

    if getattr(args, "project_pos", None) and hasattr(args, "project"):
        args.project = args.project_pos  # `looprail CMD PROJECT` is `--project PROJECT`
    args.quiet = bool(getattr(args, "quiet", False))
    args.verbose = int(getattr(args, "verbose", 0) or 0)
    _common.VERBOSITY = -1 if args.quiet else args.verbose
    if argv[:1] not in (["run"], ["resume"]) and argv[:2] != ["loop", "render-hooks"]:
        # Only these resume the collector themselves (at the loop's start) or are short.
        from looprail import gcpause

        gcpause.resume()
    handler = getattr(args, "handler", None)
    if handler is None:
        # A group without its subcommand: show that group's help.
        (getattr(args, "group_parser", None) or build_parser()).print_help(sys.stderr)
        return 2
    return int(handler(args) or 0)


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (captured in a test)
        pass


if __name__ == "__main__":  # pragma: no cover
    console()
