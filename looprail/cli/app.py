"""The argparse command line: every command is parsed here and dispatched to its handler.

Each command group lives in its own module of this package and exposes `register(subparsers)`;
only the group argv names is imported and built (a group module imports what its handlers use
at its top, so `looprail status` does not pay for the run machinery).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Sequence

from looprail import textsafe
from looprail._version import __version__
from looprail.fsutil import project_root

# Command-group modules, in the order `looprail --help` lists them.
GROUPS = (
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
    "revoke": "trust",
}


# More choices than this and a wrong one is answered with "did you mean", not the whole list.
_LISTED_CHOICES = 8


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors that help: a mistyped command or option gets "did you mean"
    (difflib), and an option the command does not know is reported by that command's parser
    (`looprail run: error: …`, its own usage), not the top level's."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        # argparse's one check of a value against `choices`, written from the choices
        # themselves: its own message changed form in Python 3.12.8 and 3.13.1 (no quotes).
        if action.choices is not None and value not in action.choices:
            known = [str(choice) for choice in action.choices]
            raise argparse.ArgumentError(action, _invalid_choice(str(value), known, self.prog))

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            # the innermost command parsed (its defaults are laid over its parents')
            owner: argparse.ArgumentParser = getattr(parsed, "usage_parser", self)
            owner.error(f"unrecognized arguments: {' '.join(extras)}{_suggest(owner, extras)}")
        return parsed


def _invalid_choice(given: str, known: list[str], prog: str) -> str:
    close = difflib.get_close_matches(given, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    if len(known) <= _LISTED_CHOICES:
        hint += f" (choose from {', '.join(map(repr, known))})"
    elif not close:
        hint = f" (`{prog} --help` lists them)"
    return f"invalid choice: {given!r}{hint}"


def _suggest(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """The hint `(did you mean --phase?)` for the first unknown option close to a known one."""
    known = [o for o in parser._option_string_actions if o.startswith("--")]
    for extra in extras:
        if extra.startswith("--"):
            close = difflib.get_close_matches(extra.split("=", 1)[0], known, n=1)
            if close:
                return f" (did you mean {close[0]}?)"
    return ""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (with `only`) just the one command group argv names."""
    parser = Parser(
        prog="looprail",
        description="Declarative state-machine orchestrator for the discuss → plan → execute → "
        "verify → ship loop.",
    )
    parser.add_argument("--version", action="version", version=f"looprail {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in GROUPS if only is None else (only,):
        importlib.import_module(f"looprail.cli.{name}").register(sub)
    _add_globals(parser)
    return parser


def _add_globals(parser: argparse.ArgumentParser) -> None:
    """-q/-v on this parser and every subcommand under it. Defaults are SUPPRESS so that
    `looprail -q run` and `looprail run -q` both count (a subcommand's default would otherwise
    overwrite the flag given before it); `dispatch` fills in the defaults after parsing. Each
    parser also names itself (`usage_parser`), so an unknown option is reported by the
    innermost command that was parsed."""
    parser.set_defaults(usage_parser=parser)
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
    return name if name in GROUPS else None


def dispatch(argv: list[str]) -> int:
    """Parse argv with argparse and run its handler. Everything printed from data goes through
    one filter (no escape sequences, ever); the render-hooks envelope is JSON (control
    characters already escaped) and stays byte-exact."""
    saved = textsafe.install() if argv[:2] != ["loop", "render-hooks"] else None
    try:
        return run_handler(build_parser(_group_of(argv)).parse_args(argv))
    finally:
        if saved is not None:
            textsafe.restore(saved)


def run_handler(args: argparse.Namespace) -> int:
    if getattr(args, "project_pos", None) and hasattr(args, "project"):
        args.project = args.project_pos  # `looprail CMD PROJECT` is `--project PROJECT`
    if isinstance(getattr(args, "project", None), str):
        # From a subfolder, the project it is in (found upward, as git finds its repository):
        # every command that reads a project reads that one.
        args.project = project_root(args.project)
        if getattr(args, "project_pos", None):
            args.project_pos = args.project
    args.quiet = bool(getattr(args, "quiet", False))
    args.verbose = int(getattr(args, "verbose", 0) or 0)
    handler = getattr(args, "handler", None)
    if handler is None:
        # A group without its subcommand: show that group's help.
        (getattr(args, "group_parser", None) or build_parser()).print_help(sys.stderr)
        return 2
    return int(handler(args) or 0)
