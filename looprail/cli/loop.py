"""`looprail loop render-hooks`: the envelope of active hooks at one point.

This is the hot path hosts call many times per loop: only the cached capability set and the
pure resolver are loaded here (no pydantic, networkx, graphviz or statemachine on a cache hit).
"""

from __future__ import annotations

import sys

from looprail.cli._common import add_flavor_option, add_project_options, group, warn
from looprail.points import POINTS, points_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: this is the render-hooks hot path
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


_VALUE_FLAGS = {
    "--active-cap": "active_cap",
    "--project": "project",
    "--flavor": "flavor",
    "--phase": "phase",
}
_BOOL_FLAGS = {"--raw": "raw", "--strict": "strict"}


def fast_render_hooks_args(argv: list[str]):
    """`loop render-hooks` arguments read without argparse, or None when argv needs argparse
    (help, an unknown flag, a missing value, a bad flavor, two points). Same meaning as the
    argparse definition above; a test checks the two agree."""
    from types import SimpleNamespace

    from looprail.cli._common import FLAVORS

    ns = SimpleNamespace(
        point=None,
        raw=False,
        strict=False,
        active_cap=None,
        project=".",
        capabilities=[],
        flavor="gsd",
        phase=None,
        handler=render_hooks,
    )
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in _VALUE_FLAGS or name == "--capabilities":
            if not eq:
                if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                    return None
                value = argv[i + 1]
                i += 1
            if name == "--capabilities":
                ns.capabilities.append(value)
            else:
                setattr(ns, _VALUE_FLAGS[name], value)
        elif arg in _BOOL_FLAGS:
            setattr(ns, _BOOL_FLAGS[arg], True)
        elif arg.startswith("-") or ns.point is not None:
            return None
        else:
            ns.point = arg
        i += 1
    if ns.flavor not in FLAVORS:
        return None
    return ns


def render_hooks(args) -> int:
    from looprail.config import load_project_config
    from looprail.hooks.resolve import InvalidPointError, active_cap, check_point, resolve
    from looprail.trust import load_compiled

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
        warn(w)
    if config is not None:
        from looprail.config import unknown_keys

        for key in unknown_keys(config, compiled.defaults):
            warn(f".planning/config.json: key {key!r} is not declared by any capability or setting")
    if args.active_cap is not None:
        print("true" if active_cap(compiled, config, args.point, args.active_cap) else "false")
        return 0
    # Streamed: the envelope is written piece by piece, so a fragment that many hooks name is
    # held once, not once per hook (and not again as the joined output and its bytes).
    envelope = resolve(compiled, config, args.point, streamed=True)
    if args.phase is not None:
        _add_context(envelope, args.project, args.phase)
    for w in envelope.get("warnings", ()):
        warn(w)
    if args.raw:  # byte for byte the reference's `JSON.stringify(envelope, null, 2)`: no newline
        from looprail.config import js_dump

        js_dump(envelope, sys.stdout.write, indent=2)
    else:
        from looprail.config import JSText

        rendered = envelope["rendered"]
        assert isinstance(rendered, JSText)  # resolve(streamed=True)
        for piece in rendered.pieces():
            sys.stdout.write(piece)
        sys.stdout.write("\n")
    return 1 if args.strict and envelope.get("warnings") else 0


def _add_context(envelope: Envelope, project: str, phase: str) -> None:
    """The typed phase context of the newest contract (gsd-core #4030): present only when
    `--phase` names exactly one phase folder; otherwise a warning says why not."""
    from looprail.layout import PHASES_DIR, phase_folders

    folders = phase_folders(project, phase)
    if len(folders) == 1:
        phase_dir = f"{PHASES_DIR}/{folders[0]}".replace("\\", "/")
        envelope["context"] = {"phase": phase, "phaseDir": phase_dir}
        return
    why = "no phase folder" if not folders else f"{len(folders)} phase folders"
    envelope.setdefault("warnings", []).append(
        f"--phase {phase}: {why} under {PHASES_DIR}; no context added"
    )
