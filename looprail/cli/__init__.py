"""The `looprail` command line: parse, call one function, print, exit.

Each command group lives in its own module here and exposes `register(subparsers)`; handlers
import what they need lazily so that `looprail loop render-hooks` (called many times per loop by
hosts) never pays for networkx, graphviz or statemachine.

Exit codes: 0 success; 1 the work was refused or failed (bad input, halted loop); 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from looprail.errors import LooprailError

# Command-group modules, in the order `looprail --help` lists them.
_GROUPS = (
    "run",
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="looprail",
        description="Declarative state-machine orchestrator for the discuss → plan → execute → "
        "verify → ship loop.",
    )
    from looprail import __version__

    parser.add_argument("--version", action="version", version=f"looprail {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _GROUPS:
        importlib.import_module(f"looprail.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        # A group without its subcommand: show that group's help.
        (getattr(args, "group_parser", None) or parser).print_help(sys.stderr)
        return 2
    try:
        return int(handler(args) or 0)
    except LooprailError as exc:
        print(f"looprail: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("looprail: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
