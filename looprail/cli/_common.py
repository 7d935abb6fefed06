"""Options shared by every command that reads a project or loads capabilities."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from looprail import fsutil
from looprail.layout import FLAVORS as FLAVORS
from looprail.layout import LOOPRAIL_DIR, normalize_phase_number
from looprail.textsafe import one_line, trusted, wants_escapes

JSON_HELP = "machine-readable output"


def add_project_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project",
        default=".",
        metavar="DIR",
        help=f"project folder holding .planning/ and {LOOPRAIL_DIR}/ (default: current directory)",
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
    """The `--project` folder, or a usage error (exit 2) naming it (`fsutil.project_folder`)."""
    return fsutil.project_folder(value, label="--project: ", resolve=resolve)


def add_flavor_option(parser: argparse.ArgumentParser, *, configured: bool = False) -> None:
    """`--flavor`; `configured`: None when not given, so `looprail.flavor` can say it
    (`gsd_sources`)."""
    parser.add_argument(
        "--flavor",
        choices=FLAVORS,
        default=None if configured else "gsd",
        help="host flavor: skill-id prefix, host tool name, onError vocabulary (default: "
        + ("looprail.flavor in .planning/config.json, else gsd)" if configured else "gsd)"),
    )


def group(sub, name: str, help_text: str):
    """A command group (`looprail NAME SUBCOMMAND`) whose bare form prints its help."""
    parser = sub.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(group_parser=parser, handler=None)
    return parser, parser.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND")


def command(
    cmds,
    name: str,
    handler,
    help_text: str,
    description: str | None = None,
    *,
    positional: bool = False,
    json: str | None = None,
    project: bool = True,
) -> argparse.ArgumentParser:
    """Subcommand NAME of `cmds` running `handler`: [PROJECT] (`positional`), --json (`json`:
    its help), then --project and --capabilities (unless `project=False`)."""
    p = cmds.add_parser(name, help=help_text, description=description)
    if positional:
        add_project_positional(p)
    if json:
        p.add_argument("--json", action="store_true", help=json)
    if project:
        add_project_options(p)
    p.set_defaults(handler=handler)
    return p


def print_json(value: object) -> None:
    """Compact, key-order-preserving JSON on one line (what hosts parse)."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")


def print_table(rows: list[tuple[str, ...]]) -> None:
    """`rows` (the first one the header) in columns two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())


def warning(message: str) -> str:
    """The line a warning is printed as."""
    return f"looprail: warning: {message}\n"


def warn(*messages: str) -> None:
    for message in messages:
        sys.stderr.write(warning(message))


def add_project_positional(parser: argparse.ArgumentParser) -> None:
    """`PROJECT` as an optional positional (beside --project, which stays for scripts)."""
    parser.add_argument(
        "project_pos",
        nargs="?",
        metavar="PROJECT",
        help="project folder (default: --project, else the current directory)",
    )


def project_of(args: argparse.Namespace) -> str:
    return getattr(args, "project_pos", None) or args.project


def phase_number(text: str) -> str:
    """argparse type of --phase: a phase number (1, 01, 2.1, 12A) or a usage error (exit 2)."""
    if normalize_phase_number(text) is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a phase number (such as 1, 02, 2.1 or 12A)"
        )
    return text


# Verdict words and their colour on a terminal.
STYLES = {
    "shipped": "bold green",
    **dict.fromkeys(("pass", "passed", "ok", "done"), "green"),
    **dict.fromkeys(("fail", "failed", "error", "blocked", "halted"), "bold red"),
    **dict.fromkeys(("paused", "warning"), "yellow"),
    "running": "cyan",
}


def paint(text: str, status: str, stream: object = None) -> str:
    """`text` in the colour of `status` (a key of STYLES) when `stream` shows colour, else
    `text` unchanged. rich is imported only when there is colour to draw."""
    style = STYLES.get(status)
    if style is None or not wants_escapes(stream if stream is not None else sys.stdout):
        return text
    # Here, not at the top: every command imports this module, and rich costs more than a
    # `render-hooks` call does; only colour on a terminal needs it.
    from rich.console import Console
    from rich.text import Text

    console = Console(force_terminal=True, color_system="standard", no_color=False)
    with console.capture() as cap:
        console.print(Text(one_line(text), style=style), end="", soft_wrap=True)
    return trusted(cap.get())
