"""`looprail loop`: the argparse definition of `render-hooks` (its handler, and the light argv
reader hosts' plain calls take, are `looprail/cli/render_hooks.py`)."""

from __future__ import annotations

from looprail.cli._common import add_flavor_option, add_project_options, group
from looprail.cli.render_hooks import render_hooks
from looprail.points import POINTS, points_text


def register(sub) -> None:
    _, cmds = group(sub, "loop", "resolve loop hooks (the dispatch contract)")
    p = cmds.add_parser(
        "render-hooks",
        help=f"print the active hooks at one of the {len(POINTS)} points",
        description="Resolve the active hooks at POINT and print the envelope "
        f"{{point, activeHooks, rendered, warnings?}}. Points: {points_text()}.",
    )
    p.add_argument("point", nargs="?", help=f"one of the {len(POINTS)} loop points")
    p.add_argument("--raw", action="store_true", help="print the JSON envelope (for hosts)")
    p.add_argument(
        "--active-cap",
        metavar="CAP_ID",
        help="print only true/false: does CAP_ID have an active hook at POINT?",
    )
    p.add_argument(
        "--strict", action="store_true", help="exit non-zero when the envelope carries warnings"
    )
    p.add_argument(
        "--phase",
        metavar="N",
        help="add context {phase, phaseDir} for the phase this invocation is about (a warning "
        "when N does not name exactly one phase folder)",
    )
    add_project_options(p)
    add_flavor_option(p)
    p.set_defaults(handler=render_hooks)
