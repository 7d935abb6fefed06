"""Options shared by every command that reads a project or loads capabilities."""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from pathlib import Path
    from typing import Any

FLAVORS = ("gsd", "msd", "ferrox")


def add_project_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project",
        default=".",
        metavar="DIR",
        help="project folder holding .planning/ and .looprail/ (default: current directory)",
    )
    parser.add_argument(
        "--capabilities",
        action="append",
        default=[],
        metavar="DIR",
        help="a first-party capability set (folders of <id>/capability.json); repeatable, "
        "searched before LOOPRAIL_CAPABILITIES and the overlays",
    )


def project_folder(value: str, *, resolve: bool = False) -> Path:
    """The `--project` folder, or a usage error (exit 2) naming it: the one check every command
    makes before it reads a project. A name is shown escaped and cut (it may be hostile)."""
    from pathlib import Path

    from looprail.errors import UsageError
    from looprail.runtime.process import escape_untrusted

    project = Path(value)
    try:
        is_dir = project.is_dir()
    except OSError:  # a name the OS refuses (too long, say) is no folder
        is_dir = False
    if resolve and is_dir:
        project = project.resolve()
    if not is_dir:
        shown = escape_untrusted(value if len(value) <= 200 else value[:200] + "…")
        raise UsageError(f"--project: {shown}: no such project folder")
    return project


def add_flavor_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--flavor",
        choices=FLAVORS,
        default="gsd",
        help="host flavor: skill-id prefix, host tool name, onError vocabulary (default: gsd)",
    )


def group(sub, name: str, help_text: str):
    """A command group (`looprail NAME SUBCOMMAND`) whose bare form prints its help."""
    parser = sub.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(group_parser=parser, handler=None)
    return parser, parser.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND")


def print_json(value: Any) -> None:
    """Compact, key-order-preserving JSON on one line (what hosts parse)."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")


def warn(message: str) -> None:
    print(f"looprail: warning: {message}", file=sys.stderr)
