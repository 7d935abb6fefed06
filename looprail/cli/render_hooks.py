"""`looprail loop render-hooks`: the hot path, with its own light entry.

Hosts call `render-hooks` at every point of every loop, so this module and what it imports
are the one place where start-up is budgeted (`tests/cli/test_render_hooks_entry.py`): only the
cached compiled registry, the pure resolver and the project config, no argparse, pydantic,
networkx, graphviz, statemachine or PyYAML on a cache hit. `looprail.cli.main` sends a plain
argv here (`parse_argv`); anything unusual (help, a typo, an unknown flag) goes through the
argparse definition in `looprail/cli/loop.py`, which `parse_argv` reads the same way (a test
checks the two agree).
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

from looprail.cli._common import FLAVORS, warning
from looprail.cli.render_memo import Recorder
from looprail.config import JSText, js_dump, load_project_config, unknown_keys
from looprail.fsutil import project_root
from looprail.hooks.resolve import InvalidPointError, active_cap, check_point, resolve
from looprail.hooks.sources import PROJECT
from looprail.layout import PHASES_DIR, phase_folders
from looprail.points import points_text
from looprail.trust import load_entry

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: this is the render-hooks hot path
    from collections.abc import Mapping
    from typing import Any

    from looprail.hooks.capset import CapabilitySet
    from looprail.hooks.resolve import Envelope

_VALUE_FLAGS = {
    "--active-cap": "active_cap",
    "--project": "project",
    "--flavor": "flavor",
    "--phase": "phase",
}
_BOOL_FLAGS = {"--raw": "raw", "--strict": "strict"}


def parse_argv(argv: list[str]) -> SimpleNamespace | None:
    """The arguments after `loop render-hooks`, or None when argv needs argparse (help, an
    unknown flag, a missing value, a bad flavor, two points)."""
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
        argv=list(argv),  # the memo's key (`render_memo`)
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
    # A call without --phase is memoised (`render_memo`): a repeat with nothing changed is
    # replayed from it. argparse's namespace has no argv: never memoised. Nor is a call from a
    # subfolder (the project found upward): a memo is keyed by the folder the call names.
    root = project_root(args.project)
    memo = getattr(args, "argv", None) if args.phase is None and root == args.project else None
    args.project = root
    rec = Recorder(memo, args.project, args.capabilities)
    compiled, entry = load_entry(args.project, args.capabilities)
    # consent is checked at every call: a set with project capabilities is never memoised
    project_caps = any(lc.origin == PROJECT for lc in compiled.capabilities.values())
    rec.rendering_from(None if project_caps else entry)
    config, config_warnings = load_project_config(args.project)
    for w in config_warnings:
        rec.err(warning(w))
    if config is not None:
        for key in unknown_keys(config, compiled.defaults):
            rec.err(
                warning(
                    f".planning/config.json: key {key!r} is not declared by any capability or "
                    "setting"
                )
            )
    return rec.finish(_write(args, rec, compiled, config))


def _write(args, rec: Recorder, compiled: CapabilitySet, config: Mapping[str, Any] | None) -> int:
    """Write the call's answer through `rec`; its exit code."""
    if args.active_cap is not None:
        active = active_cap(compiled, config, args.point, args.active_cap)
        rec.out("true\n" if active else "false\n")
        return 0
    # Streamed: the envelope is written piece by piece, so a fragment that many hooks name is
    # held once, not once per hook (and not again as the joined output and its bytes; the memo
    # keeps outputs up to `render_memo.MAX_OUTPUT`).
    envelope = resolve(compiled, config, args.point, streamed=True)
    if args.phase is not None:
        _add_context(envelope, args.project, args.phase)
    for w in envelope.get("warnings", ()):
        rec.err(warning(w))
    if args.raw:  # byte for byte the reference's `JSON.stringify(envelope, null, 2)`: no newline
        js_dump(envelope, rec.out, indent=2)
    else:
        rendered = envelope["rendered"]
        assert isinstance(rendered, JSText)  # resolve(streamed=True)
        for piece in rendered.pieces():
            rec.out(piece)
        rec.out("\n")
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
