"""`looprail lint`: what can be known about a project before running it."""

from __future__ import annotations

import argparse
import sys

from looprail.cli._common import (
    add_flavor_option,
    add_project_options,
    add_project_positional,
    phase_number,
    print_json,
    warn,
)
from looprail.cli.sources import gsd_sources, no_capabilities, sources_json
from looprail.layout import LOOPRAIL_DIR
from looprail.lint import LintReport, lint, load_input, render_text

DESCRIPTION = f"""\
Check PROJECT without running anything: capability manifests (every issue), artifacts consumed
before anything produces them or produced twice at one point, gates that can never run or never
pass (a `when` that is never true, a query failing the grammar or with no {LOOPRAIL_DIR}/checks/
executable, a predicate command that is not installed), steps whose skill, agent or command is
missing under {LOOPRAIL_DIR}/, and the plans of every phase (invalid PLAN.md, dangling depends_on,
cycles, waves that must run sequentially, tracker-ids without exactly one resolver).

Without --capabilities, lint reads what .planning/config.json names (looprail.capabilities,
looprail.host_tool, looprail.flavor), else GSD's own capabilities and gsd-tools where GSD is
installed, and says which on its first line.

Each finding has a severity (error, warning, info), the file and field, and a fix. Exit 1 when
there is an error, 0 otherwise. With -q: errors and warnings only, no notes and no count.
"""


def register(sub) -> None:
    p = sub.add_parser(
        "lint",
        help="check a project's capabilities, gates and plans before running (exit 1 on errors)",
        description=DESCRIPTION,
        epilog='--json prints {"findings": [{severity, code, file, path, message, fix}], '
        '"errors": N, "warnings": N, "sources": {capabilities, hostTool, flavor, notes, problems}}',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_project_positional(p)
    p.add_argument(
        "--phase", metavar="N", type=phase_number, help="lint only phase N (default: every phase)"
    )
    p.add_argument(
        "--host-tool",
        metavar="TOOL",
        help="step commands and query checks go to this host tool (e.g. gsd_run): check it is "
        f"on PATH instead of {LOOPRAIL_DIR}/commands and {LOOPRAIL_DIR}/checks",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output (stable shape)")
    add_project_options(p)
    add_flavor_option(p, configured=True)
    p.set_defaults(handler=run)


def run(args) -> int:
    project = args.project_pos or args.project
    found = gsd_sources(args, project)
    data = load_input(
        project, args.capabilities, phase=args.phase, flavor=args.flavor, host_tool=args.host_tool
    )
    report = LintReport(findings=lint(data))
    if not data.compiled.capabilities:  # said whatever `-q` says
        warn(no_capabilities(found))
    if args.json:
        print_json({**report.to_json(), "sources": sources_json(found)})
        return report.exit_code
    if not args.quiet:
        print(found.line())
        for note in found.notes:
            print(f"  note: {note}")
        for problem in found.problems:
            print(f"  problem: {problem}")
    sys.stdout.write(render_text(report, quiet=args.quiet))
    return report.exit_code
