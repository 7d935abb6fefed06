"""What a command uses when nothing else was named: the config's `looprail.capabilities`,
`host_tool` and `flavor`, else GSD where it is installed (`runtime/gsd_install.py`), and the
lines that say so. The commands that load a project's capabilities (`run`, `lint`, `doctor`,
`capability`) use it; `loop render-hooks` takes what it is given."""

from __future__ import annotations

import argparse
from pathlib import Path

from looprail.errors import ConfigError, RefusedToStart
from looprail.layout import PROJECT_CONFIG_FILE
from looprail.runtime.gsd_install import Sources, sources


def gsd_sources(args: argparse.Namespace, project: str | Path) -> Sources:
    """What the command uses when its flags do not say (`runtime.gsd_install.sources`: the
    config's `looprail.capabilities`, `host_tool` and `flavor`, else a GSD install), set on
    `args`; the `Sources`, to say it. A config value it cannot use refuses (exit 1)."""
    try:
        found = sources(
            project,
            capabilities=args.capabilities,
            host_tool=getattr(args, "host_tool", None),
            flavor=getattr(args, "flavor", None),
        )
    except ConfigError as exc:  # a value it cannot use: refused, as `run` refuses a config
        raise RefusedToStart(str(exc), path=exc.path, field=exc.field) from None
    args.capabilities = list(found.capabilities)
    args.host_tool, args.flavor = found.host_tool, found.flavor
    return found


def sources_json(found: Sources) -> dict[str, object]:
    """The `Sources` in `--json` output."""
    return {
        "capabilities": found.where,
        "hostTool": found.host_tool,
        "flavor": found.flavor,
        "notes": list(found.notes),
        "problems": list(found.problems),
    }


def no_capabilities(found: Sources) -> str:
    """What is said when a command goes on with no capability loaded at all."""
    why = "; ".join(found.problems) if found.problems else found.where
    return (
        f"no capabilities loaded ({why}): no hook or gate will run; install GSD, or name them "
        f"with --capabilities DIR or looprail.capabilities in {PROJECT_CONFIG_FILE}"
    )
