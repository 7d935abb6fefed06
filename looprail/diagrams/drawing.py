"""What DOT (`render.py`) and Mermaid (`mermaid.py`) draw alike, so the pictures agree: the
palette, each transition routed through its points as segments, and the text of each node.

Drawing rules:
- phases top to bottom (a page-shaped picture, readable at page width), hooks beside their
  point; the looped step (`execute`) is a box (a cluster / subgraph) holding the
  wave loop `wave_ready → execute:wave:pre → wave_running → execute:wave:post → wave_ready`;
- a transition is drawn through the points it dispatches, in order: its event and plan-fact
  guards (`finish_plan [plans_ready]`) label the first segment, except where routes branch at a
  point (`finish_wave`): there each branch carries its own guard (`[more_waves]`, `[else]`);
  `hooks_allow` is not written, the gates drawn at the points are that guard;
- hooks hang off their point: steps are boxes, contributions are notes, gates are octagons with a
  red border when blocking and a dashed grey one when advisory; a capability that failed to load
  but declared a gate there is a dashed red box;
- a run overlay paints visited states and transitions green, the current state bold, a refused
  transition red up to the point where it was refused (with the hook that refused it), per-task
  status inside `execute`, and the halt reason as a note.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from looprail.diagrams.graph import children, point_id, transitions

FONT = "Helvetica"
MONO = "Courier"
INK = "#1f2937"
MUTED = "#6b7280"
GREEN = "#2e7d32"
RED = "#c62828"

# fill, border per node role
STATE_FILL, STATE_LINE = "#e8eef9", "#3b5b92"
POINT_FILL, POINT_LINE = "#fff8dc", "#b8962e"
STEP_FILL, STEP_LINE = "#e8f5e9", "#4c8c4a"
NOTE_FILL, NOTE_LINE = "#f3e8f7", "#8e5ea2"
GATE_FILL, GATE_LINE = "#fff1e0", "#b26a00"
VISITED_FILL = "#dcefd9"
CURRENT_FILL = "#a5d6a7"
TASK_FILLS = {"done": "#c8e6c9", "failed": "#ffcdd2", "running": "#ffe0b2", "pending": "#eceff1"}
TASK_MARKS = {"done": "✓", "failed": "✗", "running": "…", "pending": "○"}
OUTCOME_MARKS = {
    "ok": "✓ ok",
    "pass": "✓ pass",
    "blocked": "✗ blocked",
    "advisory": "! advisory",
    "failed": "✗ failed",
    "error": "✗ check error",
    "skipped": "– skipped",
}


@dataclass
class Segment:
    """One drawn edge of a transition's route (state → point → … → state)."""

    tail: str
    head: str
    labels: list[str] = field(default_factory=list)
    visited: bool = False
    refused: bool = False
    ltail: str | None = None  # compound the tail state stands for
    lhead: str | None = None
    back: bool = False  # goes back in the loop (drawn without pulling the layout)


def _member(graph: nx.MultiDiGraph, state: str, end: str) -> str:
    """The node a transition into (`end` "initial") or out of (`end` "final") `state` is drawn
    to or from: a compound's initial or final child."""
    if graph.nodes[state].get("compound"):
        return next(c for c in children(graph, state, "state") if graph.nodes[c][end])
    return state


def segments(graph: nx.MultiDiGraph) -> list[Segment]:
    """Every transition routed through its point nodes, shared segments merged, in order."""
    out: dict[tuple[str, str], Segment] = {}
    branches: dict[str, int] = {}
    for _, _, _, d in transitions(graph):
        last = point_id(d["points"][-1]) if d["points"] else None
        if last:
            branches[last] = branches.get(last, 0) + 1
    order = {n: i for i, n in enumerate(graph.nodes)}
    for u, v, _, d in transitions(graph):
        route = [u, *(point_id(p) for p in d["points"]), v]
        refused_upto = (
            route.index(point_id(d["refused_at"]))
            if d.get("refused") and d.get("refused_at")
            else -1
        )
        guards = [g for g in d["guards"] if g != "hooks_allow"]
        for i, (a, b) in enumerate(itertools.pairwise(route)):
            seg = out.get((a, b))
            if seg is None:
                seg = out[(a, b)] = Segment(a, b)
                if graph.nodes[a].get("compound"):
                    seg.tail, seg.ltail = _member(graph, a, "final"), a
                if graph.nodes[b].get("compound"):
                    seg.head, seg.lhead = _member(graph, b, "initial"), b
                seg.back = graph.nodes[b].get("kind") == "state" and order[b] < order[u]
            # The event names the first segment; the plan-fact guards go with it, unless the
            # route branches at its last point (finish_wave), where each branch shows its own.
            branching = branches.get(route[-2], 0) > 1
            labels = []
            if i == 0:
                labels.append(d["event"])
            if guards and (i == len(route) - 2 if branching else i == 0):
                labels.append("[" + ", ".join(guards) + "]")
            elif branching and not guards and i == len(route) - 2:
                labels.append("[else]")
            for label in labels:
                if label not in seg.labels:
                    seg.labels.append(label)
            seg.visited |= d.get("visited", False)
            if 0 <= i < refused_upto:
                seg.refused = True
                if i == refused_upto - 1:
                    seg.labels.append(f"✗ refused by {d['refused_by']}")
    return list(out.values())


def wrap(text: str, width: int = 36, lines: int = 4) -> list[str]:
    """`text` in at most `lines` lines of `width`, the last one cut with `…`."""
    wrapped = textwrap.wrap(" ".join(text.split()), width) or [""]
    if len(wrapped) > lines:
        wrapped = [*wrapped[: lines - 1], wrapped[lines - 1][: width - 1] + "…"]
    return wrapped


def state_lines(d: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(title, detail lines) of a state."""
    detail = []
    if d.get("role") and not d.get("compound"):
        work = f"{d['role']} → {d['artifact']}" if d.get("artifact") else d["role"]
        detail.append(work)
    return d["label"], detail


def compound_title(d: Mapping[str, Any]) -> str:
    """The title of the looped step's box."""
    work = f"{d['role']} per task → {d['artifact']}" if d.get("artifact") else d.get("role") or ""
    return f"{d['label']}: waves → plans → tasks  ({work})"


def hook_lines(d: Mapping[str, Any]) -> list[str]:
    """The lines under a hook's capId."""
    lines = [d["summary"]] if d.get("summary") else []
    if d["hook_kind"] == "gate":
        lines.append(
            ("blocking" if d["blocking"] else "advisory") + f" · onError {d['on_error'] or 'skip'}"
        )
    elif d["hook_kind"] == "step" and d.get("on_error"):
        lines.append(f"onError {d['on_error']}")
    if d.get("when"):
        lines.append(f"when {d['when']}")
    if d.get("outcome"):
        lines.append(OUTCOME_MARKS.get(d["outcome"], d["outcome"]))
        if d.get("message") and d["outcome"] not in ("ok", "pass"):
            lines += wrap(d["message"], 34, 3)
    return lines


def task_line(d: Mapping[str, Any]) -> str:
    """A task of the overlaid run: its status mark, key and attempt."""
    again = f" (attempt {d['attempt']})" if d.get("attempt", 0) > 1 else ""
    return f"{TASK_MARKS[d['status']]} {d['task_key']}{again}"


def task_waves(graph: nx.MultiDiGraph, compound: str) -> list[tuple[int | None, list[str]]]:
    """The overlaid run's task nodes inside `compound`, grouped by wave in order."""
    out: dict[int | None, list[str]] = {}
    for n in children(graph, compound, "task"):
        out.setdefault(graph.nodes[n]["wave"], []).append(n)
    return list(out.items())
