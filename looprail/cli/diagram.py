"""`looprail diagram`: draw the loop (and a project's hooks, and a run) as SVG, PNG, DOT or
Mermaid."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from looprail.cli._common import (
    add_flavor_option,
    add_project_options,
    add_project_positional,
    warn,
)
from looprail.diagrams import is_project, load_graph
from looprail.diagrams.regenerate import main
from looprail.diagrams.render import format_for, render, require_dot
from looprail.errors import LooprailError, UsageError
from looprail.fsutil import atomic_write

DESCRIPTION = """\
Draw the loop: the compiled state machine (discuss → plan → execute{waves} → verify → ship),
top to bottom, every transition drawn through the points it dispatches. With --hooks, the active
hooks of PROJECT hang off the points where they fire (steps as boxes, contributions as notes,
gates as octagons, red-bordered when blocking). With --run, one journaled run is painted on top:
visited states and transitions, the current state, a refused transition in red with the hook
that refused it, and each task's status inside execute. Without a project (a folder with
.planning/), the default loop is drawn alone.

svg and png need Graphviz's `dot` program; dot and mermaid are plain text and need nothing.
"""

EPILOG = """\
examples:
  looprail diagram -o loop.svg
  looprail diagram examples/hello-loop --hooks --capabilities examples/capabilities -o hello.png
  looprail diagram . --run latest --format mermaid > run.mmd
  looprail diagram --regenerate-docs        (rewrite the repository's diagrams/ folder)
"""


def register(sub) -> None:
    p = sub.add_parser(
        "diagram",
        help="draw the loop, a project's hooks and a run (svg, png, dot, mermaid)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_project_positional(p)
    p.add_argument(
        "--hooks",
        action="store_true",
        help="draw the project's active hooks at each point (under its .planning/config.json)",
    )
    p.add_argument(
        "--run", metavar="RUN", help="overlay a journaled run: its id, a unique prefix, or `latest`"
    )
    p.add_argument(
        "--format",
        choices=("svg", "png", "dot", "mermaid"),
        help="output format (default: from -o's suffix .svg/.png/.dot/.gv/.mmd, else svg)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write to FILE (default: standard output; png needs -o unless stdout is a pipe)",
    )
    p.add_argument(
        "--regenerate-docs",
        action="store_true",
        help="rewrite the repository's diagrams/ folder (default loop + the example project) "
        "and exit",
    )
    add_project_options(p)
    add_flavor_option(p)
    p.set_defaults(handler=run)


def run(args) -> int:
    if args.regenerate_docs:
        return main()

    fmt = format_for(args.format, args.output)
    if fmt in ("svg", "png"):
        require_dot()  # one clear line before any loading
    if fmt == "png" and not args.output and sys.stdout.isatty():
        raise UsageError("png is binary: give -o FILE (or pipe the output)")
    project = args.project_pos or args.project
    explicit = args.project_pos is not None or args.project != "."
    if not explicit and not is_project(project):
        project = None  # no project here: the default loop alone
        if args.hooks or args.run:
            raise LooprailError(
                "--hooks and --run need a project: no .planning/ folder in the current "
                "directory (give PROJECT)"
            )
    graph, warnings = load_graph(
        project, args.capabilities, hooks=args.hooks, run=args.run, flavor=args.flavor
    )
    warn(*warnings)
    blob = render(graph, fmt)
    if args.output:
        target = Path(args.output)
        if target.is_dir():
            raise UsageError(f"{args.output}: is a folder, not a file")
        if not target.parent.is_dir():
            raise UsageError(f"{args.output}: folder {target.parent} does not exist")
        atomic_write(target, blob)
        return 0
    sys.stdout.buffer.write(blob)
    sys.stdout.flush()
    return 0
