"""`looprail loop render-hooks`: the active hooks at one point, as the envelope hosts read (the
dispatch contract). Hosts call it at every point of every loop; its one speed-up is the
capability set's cache (`hooks/compiled.py`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from looprail.cli._common import add_flavor_option, add_project_options, group, warning
from looprail.config import JSText, js_dump, load_project_config, unknown_keys
from looprail.hooks.capset import CapabilitySet
from looprail.hooks.resolve import InvalidPointError, active_cap, check_point, resolve
from looprail.layout import PHASES_DIR, phase_folders
from looprail.points import POINTS, points_text
from looprail.trust import load_compiled

if TYPE_CHECKING:
    from looprail.hooks.resolve import Envelope


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


def render_hooks(args: argparse.Namespace) -> int:
    if not args.point:  # the reference's wording; exit 2 like every other usage error
        print(
            "Error: loop render-hooks requires a <point> argument. Valid points: " + points_text(),
            file=sys.stderr,
        )
        return 2
    try:
        check_point(args.point)
    except InvalidPointError as exc:
        # The reference exits 1 here; an unknown point is a usage error (exit 2), like every
        # other bad argument (README.md, "Exit codes").
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    compiled = load_compiled(args.project, args.capabilities)
    config, config_warnings = load_project_config(args.project)
    for w in config_warnings:
        sys.stderr.write(warning(w))
    if config is not None:
        for key in unknown_keys(config, compiled.defaults):
            sys.stderr.write(
                warning(
                    f".planning/config.json: key {key!r} is not declared by any capability or "
                    "setting"
                )
            )
    return _write(args, compiled, config)


def _write(
    args: argparse.Namespace, compiled: CapabilitySet, config: Mapping[str, Any] | None
) -> int:
    """Write the call's answer; its exit code."""
    if args.active_cap is not None:
        active = active_cap(compiled, config, args.point, args.active_cap)
        sys.stdout.write("true\n" if active else "false\n")
        return 0
    # Streamed: the envelope is written piece by piece, so a fragment that many hooks name is
    # held once, not once per hook (and not again as the joined output and its bytes).
    envelope = resolve(compiled, config, args.point, streamed=True)
    if args.phase is not None:
        _add_context(envelope, args.project, args.phase)
    for w in envelope.get("warnings", ()):
        sys.stderr.write(warning(w))
    if args.raw:  # byte for byte the reference's `JSON.stringify(envelope, null, 2)`: no newline
        js_dump(envelope, sys.stdout.write, indent=2)
    else:
        rendered = envelope["rendered"]
        assert isinstance(rendered, JSText)  # resolve(streamed=True)
        for piece in rendered.pieces():
            sys.stdout.write(piece)
        sys.stdout.write("\n")
    return 1 if args.strict and envelope.get("warnings") else 0


def _add_context(envelope: Envelope, project: str, phase: str) -> None:
    """The typed phase context of the newest contract (gsd-core #4030): present only when
    `--phase` names exactly one phase folder; otherwise a warning says why not."""
    folders = phase_folders(project, phase)
    if len(folders) == 1:
        phase_dir = f"{PHASES_DIR}/{folders[0]}".replace("\\", "/")
        envelope["context"] = {"phase": phase, "phaseDir": phase_dir}
        return
    why = "no phase folder" if not folders else f"{len(folders)} phase folders"
    envelope.setdefault("warnings", []).append(
        f"--phase {phase}: {why} under {PHASES_DIR}; no context added"
    )
