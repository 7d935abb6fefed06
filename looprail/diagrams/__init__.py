"""Pictures of the loop (`diagram(project, hooks=True, fmt="svg")`): the compiled machine with a
project's active hooks and, when asked, one journaled run, as SVG, PNG, DOT or Mermaid text.
`graph.py` builds the networkx model (pure), `render.py` draws it; this module loads the
capabilities, config and journal. networkx and graphviz are never imported by `looprail` itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprail.config import load_project_config
from looprail.diagrams.graph import RunEvent, RunTask, RunView, build_graph, envelopes_for
from looprail.diagrams.render import render
from looprail.errors import LooprailError
from looprail.fsutil import project_folder
from looprail.journal import Journal
from looprail.layout import CAPABILITIES_DIR, LOOPRAIL_DIR, PLANNING_DIR
from looprail.machine.spec import DEFAULT_LOOP
from looprail.trust import load_compiled

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

    from looprail.hooks.resolve import Envelope
    from looprail.journal import RunRow
    from looprail.machine.spec import LoopSpec

__all__ = ["diagram", "is_project", "load_envelopes", "load_graph", "load_run", "run_view"]


# Why `--hooks` drew none, said on stderr and in the picture.
NO_CAPABILITIES = (
    "no capabilities loaded (none given with --capabilities or LOOPRAIL_CAPABILITIES, none "
    f"under ~/{LOOPRAIL_DIR}/{CAPABILITIES_DIR} or the project's "
    f"{LOOPRAIL_DIR}/{CAPABILITIES_DIR}): no hooks to draw"
)


def is_project(path: str | Path) -> bool:
    """A folder with `.planning/` (what `looprail run` accepts)."""
    return (Path(path) / PLANNING_DIR).is_dir()


def load_envelopes(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    *,
    spec: LoopSpec | None = None,
    env: Mapping[str, str] | None = None,
    home: str | Path | None = None,
    use_cache: bool = True,
) -> tuple[dict[str, Envelope], list[str]]:
    """`({point: envelope}, warnings)` for the project's capabilities under its config;
    `env`/`home` pin the search path (the docs diagrams must not see a developer's overlay)."""
    config, warnings = load_project_config(project)
    compiled = load_compiled(project, capability_dirs, env=env, home=home, use_cache=use_cache)
    warnings += list(compiled.warnings)
    envelopes = envelopes_for(compiled, config, spec or DEFAULT_LOOP)
    if not compiled.capabilities:
        warnings.append(NO_CAPABILITIES)
    elif not any(e["activeHooks"] for e in envelopes.values()):
        warnings.append(
            f"{len(compiled.capabilities)} capabilities loaded, and none has a hook active "
            "under this project's config: no hooks to draw"
        )
    return envelopes, warnings


def load_run(project: str | Path, ref: str) -> RunView:
    """One run of the project's journal (`ref`: an id, a unique prefix, or `latest`)."""
    with Journal.open(project, create=False) as journal:
        if ref == "latest":
            run = journal.latest_run()
            if run is None:
                raise LooprailError(f"{journal.path}: no run recorded yet")
        else:
            run = journal.find_run(ref)
        return run_view(journal, run)


def run_view(journal: Journal, run: RunRow) -> RunView:
    """The overlay's view of `run`, read from an open journal (read-only is enough)."""
    events = journal.events(run.id, kinds=["transition", "hook", "halted", "native_hook"])
    return RunView(
        run_id=run.id,
        phase=run.phase,
        status=run.status,
        state=tuple(run.state),
        halt_reason=run.halt_reason,
        events=tuple(RunEvent(**_same_fields(RunEvent, e)) for e in events),
        tasks=tuple(RunTask(**_same_fields(RunTask, t)) for t in journal.tasks(run.id)),
    )


def _same_fields(cls: type[RunEvent | RunTask], row: object) -> dict[str, Any]:
    """The values of `row`'s attributes named as `cls`'s fields (a journal row has them all)."""
    return {f.name: getattr(row, f.name) for f in fields(cls)}


def load_graph(
    project: str | Path | None = None,
    capability_dirs: Sequence[str | Path] = (),
    *,
    hooks: bool = False,
    run: str | None = None,
    title: str | None = None,
    flavor: str = "gsd",
    spec: LoopSpec | None = None,
    env: Mapping[str, str] | None = None,
    home: str | Path | None = None,
    use_cache: bool = True,
) -> tuple[nx.MultiDiGraph, list[str]]:
    """The loop graph of `project` (None: the default loop alone) and warnings for people."""
    spec = spec or DEFAULT_LOOP
    warnings: list[str] = []
    envelopes = None
    view = None
    name = None
    if project is not None:
        root = project_folder(project)
        if not is_project(root):
            if run is not None:
                raise LooprailError(
                    f"{project}: not a project (no .planning/ folder); --run needs one"
                )
            if hooks:
                warnings.append(
                    f"{project}: not a project (no .planning/ folder); drawing the default loop "
                    "without hooks"
                )
        else:
            name = root.resolve().name
            if hooks:
                envelopes, more = load_envelopes(
                    root, capability_dirs, spec=spec, env=env, home=home, use_cache=use_cache
                )
                warnings += more
            if run is not None:
                view = load_run(root, run)
    if title is None:
        title = "looprail loop" + (f" · {name}" if name else "")
    graph = build_graph(spec, envelopes=envelopes, run=view, title=title, flavor=flavor)
    if envelopes is not None and not any(e["activeHooks"] for e in envelopes.values()):
        graph.graph["no_hooks"] = warnings[-1] if warnings else "no hooks to draw"
    return graph, warnings


def diagram(
    project: str | Path | None = None,
    capability_dirs: Sequence[str | Path] = (),
    *,
    fmt: str = "svg",
    hooks: bool = False,
    run: str | None = None,
    flavor: str = "gsd",
) -> bytes:
    """The picture of the loop (see `load_graph`) in `fmt`: svg | png | dot | mermaid."""
    graph, _ = load_graph(project, capability_dirs, hooks=hooks, run=run, flavor=flavor)
    return render(graph, fmt)
