"""The `looprail` command line: parse, call one function, print, exit.

Each command group lives in its own module here and exposes `register(subparsers)`; handlers
import what they need lazily so that `looprail loop render-hooks` (called many times per loop by
hosts) never pays for networkx, graphviz or statemachine.

Exit codes: 0 success; 1 the work was refused or failed (bad input, halted loop); 2 usage error;
3 paused at a checkpoint; 130 interrupted (Ctrl-C); 143 terminated (SIGTERM); 129 hung up
(SIGHUP). After 130/143/129 the run is journaled `halted` and resumes with `looprail run`.
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
    from looprail import __version__

    parser.add_argument("--version", action="version", version=f"looprail {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _GROUPS if only is None else (only,):
        importlib.import_module(f"looprail.cli.{name}").register(sub)
    return parser


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


def _dispatch(argv: list[str]) -> int:
    args = None
    if argv[:2] == ["loop", "render-hooks"]:
        # The hot path: a plain argv is read without argparse (~10 ms of imports and setup);
        # anything unusual (help, a typo, an unknown flag) goes through argparse below.
        from looprail.cli.loop import fast_render_hooks_args

        args = fast_render_hooks_args(argv[2:])
    if args is None:
        parser = build_parser(_group_of(argv))
        args = parser.parse_args(argv)
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
    sys.exit(main())
