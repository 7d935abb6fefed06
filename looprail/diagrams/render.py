"""Render the loop graph (`graph.build_graph`) as Graphviz DOT, SVG, PNG, or Mermaid text.

Drawing rules (the same for DOT and Mermaid, so the pictures agree):

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

DOT and Mermaid text are deterministic (built in the graph's loop order, no time, no path); SVG
and PNG come from Graphviz's `dot`, which must be installed (`require_dot`).
"""

from __future__ import annotations

import html
import itertools
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import graphviz
import networkx as nx

from looprail.diagrams.graph import START, children, hooks_at, point_id, transitions
from looprail.errors import GraphvizMissingError, LooprailError, UsageError
from looprail.runtime.process import find_program, run_bounded

FORMATS = ("svg", "png", "dot", "mermaid")
INSTALL_HINT = GraphvizMissingError.INSTALL_HINT

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


def require_dot() -> str:
    """The path of Graphviz's `dot`, or GraphvizMissingError (one line saying how to install)."""
    found = find_program("dot")
    if found is None:
        raise GraphvizMissingError()
    return found


def render(graph: nx.MultiDiGraph, fmt: str) -> bytes:
    """The picture in `fmt` (svg | png | dot | mermaid) as bytes."""
    if fmt == "dot":
        return to_dot(graph).encode()
    if fmt == "mermaid":
        return to_mermaid(graph).encode()
    if fmt not in ("svg", "png"):
        raise LooprailError(f"unknown diagram format {fmt!r} (known: {', '.join(FORMATS)})")
    return pipe_dot(to_dot(graph), fmt)


def pipe_dot(source: str, fmt: str) -> bytes:
    """Run `dot -T<fmt>` on DOT `source` (bounded, no shell). dot writes to a temporary file:
    PNG is binary and `run_bounded` reads text."""
    dot = require_dot()
    with tempfile.TemporaryDirectory(prefix="looprail-diagram-") as tmp:
        target = Path(tmp) / f"out.{fmt}"
        # PNG at 130 dpi (not Graphviz's 96): the page-shaped loop comes out about 1000 px
        # wide, so it is sharp at page width instead of scaled up.
        dpi = ["-Gdpi=130"] if fmt == "png" else []
        result = run_bounded([dot, f"-T{fmt}", *dpi, "-o", str(target)], stdin=source, timeout_s=60)
        if result.spawn_error:
            raise GraphvizMissingError()
        if result.exit_code != 0 or result.timed_out or not target.exists():
            why = "timed out" if result.timed_out else f"exited {result.exit_code}"
            raise LooprailError(f"graphviz `dot -T{fmt}` {why}: {result.stderr.strip()[:300]}")
        return target.read_bytes()


# --------------------------------------------------------------------------- segments


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


def _entry(graph: nx.MultiDiGraph, state: str) -> str:
    """The node a transition into `state` is drawn to: a compound's initial child."""
    if graph.nodes[state].get("compound"):
        return next(c for c in children(graph, state, "state") if graph.nodes[c]["initial"])
    return state


def _exit(graph: nx.MultiDiGraph, state: str) -> str:
    """The node a transition out of `state` is drawn from: a compound's final child."""
    if graph.nodes[state].get("compound"):
        return next(c for c in children(graph, state, "state") if graph.nodes[c]["final"])
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
                    seg.tail, seg.ltail = _exit(graph, a), a
                if graph.nodes[b].get("compound"):
                    seg.head, seg.lhead = _entry(graph, b), b
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


# --------------------------------------------------------------------------- labels


def _wrap(text: str, width: int = 36, lines: int = 4) -> list[str]:
    wrapped = textwrap.wrap(" ".join(text.split()), width) or [""]
    if len(wrapped) > lines:
        wrapped = [*wrapped[: lines - 1], wrapped[lines - 1][: width - 1] + "…"]
    return wrapped


def _state_lines(d: dict[str, Any]) -> tuple[str, list[str]]:
    """(title, detail lines) of a state."""
    detail = []
    if d.get("role") and not d.get("compound"):
        work = f"{d['role']} → {d['artifact']}" if d.get("artifact") else d["role"]
        detail.append(work)
    return d["label"], detail


def _compound_title(d: dict[str, Any]) -> str:
    work = f"{d['role']} per task → {d['artifact']}" if d.get("artifact") else d.get("role") or ""
    return f"{d['label']}: waves → plans → tasks  ({work})"


def _hook_lines(d: dict[str, Any]) -> list[str]:
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
            lines += _wrap(d["message"], 34, 3)
    return lines


def _task_line(d: dict[str, Any]) -> str:
    again = f" (attempt {d['attempt']})" if d.get("attempt", 0) > 1 else ""
    return f"{TASK_MARKS[d['status']]} {d['task_key']}{again}"


def _waves(graph: nx.MultiDiGraph, compound: str) -> list[tuple[int | None, list[str]]]:
    out: dict[int | None, list[str]] = {}
    for n in children(graph, compound, "task"):
        out.setdefault(graph.nodes[n]["wave"], []).append(n)
    return list(out.items())


# --------------------------------------------------------------------------- DOT


# Graphviz refuses an HTML label longer than 16384 characters (a syntax error for the whole
# graph), and labels come from third-party manifests: every line is clipped, the task table is
# cut short with a count of what is left out.
LINE_MAX = 120
TABLE_MAX = 12_000


def _clip(text: str, limit: int = LINE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _html(title: str, lines: list[str], *, mono_title: bool = False, size: int = 10) -> str:
    face = MONO if mono_title else FONT
    parts = [f'<font face="{face}"><b>{html.escape(_clip(title))}</b></font>']
    parts += [f'<font point-size="{size}">{html.escape(_clip(line))}</font>' for line in lines]
    return "<" + "<br/>".join(parts) + ">"


def to_dot(graph: nx.MultiDiGraph) -> str:
    """The Graphviz DOT source (deterministic)."""
    g = graphviz.Digraph("looprail")
    title = graph.graph.get("title") or "looprail loop"
    g.attr(
        # Top to bottom: left to right the loop is ~16:1 and its text unreadable at page width.
        rankdir="TB",
        compound="true",
        newrank="true",
        nodesep="0.25",
        ranksep="0.35",
        fontname=FONT,
        fontsize="20",
        labelloc="t",
        label=_html(title, _caption(graph), size=12),
        bgcolor="white",
        pad="0.3",
    )
    g.attr("node", fontname=FONT, fontsize="11", color=INK, fontcolor=INK)
    g.attr("edge", fontname=FONT, fontsize="10", color="#4b5563", fontcolor=MUTED, arrowsize="0.7")

    _dot_scope(graph, g, None)
    for seg in segments(graph):
        attrs: dict[str, str] = {}
        if seg.labels:
            attrs["label"] = "\n".join(seg.labels)
        if seg.ltail:
            attrs["ltail"] = f"cluster_{seg.ltail}"
        if seg.lhead:
            attrs["lhead"] = f"cluster_{seg.lhead}"
        if seg.refused:
            attrs.update(color=RED, fontcolor=RED, penwidth="2.5")
        elif seg.visited:
            attrs.update(color=GREEN, penwidth="2.2")
        if seg.back:
            attrs["constraint"] = "false"
        g.edge(seg.tail, seg.head, **attrs)
    for u, v, k, d in graph.edges(keys=True, data=True):
        if d["kind"] == "initial" and u == START:
            visited = graph.nodes[START].get("visited")
            g.edge(u, v, **({"color": GREEN, "penwidth": "2.2"} if visited else {}))
        elif d["kind"] == "note":
            g.edge(u, v, style="dashed", color=RED, arrowhead="none")
        del k
    return g.source


def _caption(graph: nx.MultiDiGraph) -> list[str]:
    lines = []
    if graph.graph.get("run_id"):
        lines.append(
            f"run {graph.graph['run_id']} · phase {graph.graph['run_phase']} · "
            f"{graph.graph['run_status']}"
        )
    if graph.graph.get("hooks_shown"):
        lines.append(
            "box: step · note: contribution · octagon: gate (red border: blocking, "
            "dashed: advisory)"
        )
    return lines


def _dot_scope(graph: nx.MultiDiGraph, g: Any, parent: str | None) -> None:
    """Nodes directly inside `parent` (None: top level), then its compound children as
    clusters."""
    for n in children(graph, parent):
        d = graph.nodes[n]
        kind = d["kind"]
        if kind == "start":
            fill = GREEN if d.get("visited") else INK
            g.node(
                n,
                label="",
                shape="circle",
                style="filled",
                fillcolor=fill,
                color=fill,
                width="0.18",
            )
        elif kind == "state" and d.get("compound"):
            with g.subgraph(name=f"cluster_{n}") as c:
                visited = d.get("visited")
                c.attr(
                    label=_html(_compound_title(d), [], size=10),
                    style="rounded,filled",
                    fillcolor="#f4f7fc" if not visited else "#eef7ec",
                    color=STATE_LINE if not visited else GREEN,
                    penwidth="1.6",
                    fontsize="12",
                    margin="14",
                )
                _dot_scope(graph, c, n)
        elif kind == "state":
            g.node(n, **_dot_state(d))
        elif kind == "point":
            _dot_point(graph, g, n, d)
        elif kind == "note":
            # beside the state it is about (same rank: the dashed link stays short)
            with g.subgraph() as s:
                s.attr(rank="same")
                s.node(next(iter(graph.predecessors(n))))
                _dot_note(s, n, d)
    if parent is not None:
        _dot_tasks(graph, g, parent)


def _dot_note(g: Any, n: str, d: dict[str, Any]) -> None:
    paused = d.get("status") == "paused"  # waiting for a human, not broken
    g.node(
        n,
        label="\n".join(_wrap(d["label"], 38, 5)),
        shape="note",
        style="filled",
        fillcolor=GATE_FILL if paused else "#ffebee",
        color=GATE_LINE if paused else RED,
        fontcolor=GATE_LINE if paused else RED,
        fontsize="10",
    )


def _dot_tasks(graph: nx.MultiDiGraph, g: Any, compound: str) -> None:
    """The overlaid run's tasks as one table under the wave loop: a row per wave."""
    waves = _waves(graph, compound)
    if not waves:
        return
    rows: list[str] = []
    size = 0
    for index, (wave, tasks) in enumerate(waves):
        cells = [
            f'<td bgcolor="{TASK_FILLS[graph.nodes[t]["status"]]}">'
            f'<font face="{MONO}" point-size="9">'
            f"{html.escape(_clip(_task_line(graph.nodes[t]), 60))}</font>"
            "</td>"
            for t in tasks
        ]
        kept = cells
        while kept and size + sum(map(len, kept)) + 300 > TABLE_MAX:  # 300: the row around
            kept = kept[: len(kept) // 2]
        if len(kept) < len(cells):
            kept = [*kept, f'<td><font point-size="9">… {len(cells) - len(kept)} more</font></td>']
        head = f"wave {wave}" if wave is not None else "tasks"
        row = f'<tr><td align="left"><font point-size="9">{head}</font></td>{"".join(kept)}</tr>'
        if size + len(row) > TABLE_MAX:
            rest = len(waves) - index
            rows.append(
                f'<tr><td align="left"><font point-size="9">… {rest} more waves</font></td></tr>'
            )
            break
        rows.append(row)
        size += len(row)
    table = (
        '<<table border="0" cellborder="1" cellspacing="2" cellpadding="3" color="#9ca3af">'
        + "".join(rows)
        + "</table>>"
    )
    node = f"tasks_{compound}"
    running = next(
        (
            c
            for c in children(graph, compound, "state")
            if not graph.nodes[c]["initial"] and not graph.nodes[c]["final"]
        ),
        None,
    )
    with g.subgraph() as s:
        s.attr(rank="same")
        s.node(node, label=table, shape="plain")
        if running is not None:
            s.edge(running, node, style="invis")


def _dot_state(d: dict[str, Any]) -> dict[str, str]:
    title, detail = _state_lines(d)
    attrs = {
        "label": _html(title, detail, size=9),
        "shape": "box",
        "style": "rounded,filled",
        "fillcolor": STATE_FILL,
        "color": STATE_LINE,
        "penwidth": "1.4",
        "fontsize": "14",
        "margin": "0.15,0.06",
    }
    if d.get("final"):
        attrs.update(shape="doublecircle", style="filled", margin="0", width="0.5")
        words = [html.escape(w) for w in title.split()]
        attrs["label"] = "<<b>" + "<br/>".join(words) + "</b>>"
        attrs["fontsize"] = "10"
    if d.get("visited"):
        attrs.update(fillcolor=VISITED_FILL, color=GREEN)
    if d.get("current"):
        attrs.update(fillcolor=CURRENT_FILL, color="#1b5e20", penwidth="3.2")
    return attrs


def _dot_point(graph: nx.MultiDiGraph, g: Any, n: str, d: dict[str, Any]) -> None:
    hooks = hooks_at(graph, d["point"])
    with g.subgraph() as s:
        s.attr(rank="same")
        s.node(
            n,
            label=d["label"],
            shape="box",
            style="rounded,filled",
            fillcolor=POINT_FILL,
            color=POINT_LINE,
            fontname=MONO,
            fontsize="10",
            height="0.28",
            margin="0.08,0.03",
        )
        for h in hooks:
            s.node(h, **_dot_hook(graph.nodes[h]))
        previous = n
        for h in hooks:
            s.edge(previous, h, style="dashed", color="#9ca3af", arrowhead="none", weight="5")
            previous = h


def _dot_hook(d: dict[str, Any]) -> dict[str, str]:
    kind = d["hook_kind"]
    attrs = {"label": _html(d["cap_id"], _hook_lines(d), size=9), "fontsize": "10"}
    if kind == "step":
        attrs.update(shape="box", style="filled", fillcolor=STEP_FILL, color=STEP_LINE)
    elif kind == "contribution":
        attrs.update(shape="note", style="filled", fillcolor=NOTE_FILL, color=NOTE_LINE)
    elif kind == "native":
        attrs.update(shape="component", style="filled", fillcolor=STEP_FILL, color=STEP_LINE)
    elif kind == "gate":
        attrs.update(
            shape="octagon", style="filled", fillcolor=GATE_FILL, color=GATE_LINE, margin="0,0"
        )
        if d["blocking"]:
            attrs.update(color=RED, penwidth="2.2")
        else:
            attrs.update(style="filled,dashed", color=MUTED)
    else:  # a capability that failed to load
        attrs.update(shape="box", style="filled,dashed", fillcolor="#ffebee", color=RED)
    outcome = d.get("outcome")
    if outcome in ("ok", "pass"):
        attrs["fillcolor"] = VISITED_FILL
    elif outcome in ("blocked", "failed", "error") or d.get("refused"):
        attrs.update(fillcolor="#ffcdd2", color=RED, penwidth="2.6")
    return attrs


# --------------------------------------------------------------------------- Mermaid


def _mm(text: str) -> str:
    """Text safe inside a quoted Mermaid label."""
    return html.escape(text, quote=False).replace('"', "#quot;")


def _mm_label(title: str, lines: list[str]) -> str:
    return '"' + "<br/>".join([f"<b>{_mm(title)}</b>", *(_mm(x) for x in lines)]) + '"'


def to_mermaid(graph: nx.MultiDiGraph) -> str:
    """Mermaid `flowchart TB` text for markdown (deterministic)."""
    out = ["---", f"title: {graph.graph.get('title') or 'looprail loop'}", "---", "flowchart TB"]
    classes: dict[str, list[str]] = {}

    def cls(node: str, name: str) -> None:
        classes.setdefault(name, []).append(node)

    def scope(parent: str | None, indent: str) -> None:
        for n in children(graph, parent):
            d = graph.nodes[n]
            kind = d["kind"]
            if kind == "start":
                out.append(f"{indent}{n}(( ))")
                cls(n, "start")
            elif kind == "state" and d.get("compound"):
                out.append(f'{indent}subgraph {n} ["{_mm(_compound_title(d))}"]')
                out.append(f"{indent}  direction TB")
                scope(n, indent + "  ")
                out.append(f"{indent}end")
                cls(n, "visitedbox" if d.get("visited") else "box")
            elif kind == "state":
                title, detail = _state_lines(d)
                shape = ("(((", ")))") if d.get("final") else ("(", ")")
                out.append(f"{indent}{n}{shape[0]}{_mm_label(title, detail)}{shape[1]}")
                cls(
                    n, "current" if d.get("current") else "visited" if d.get("visited") else "state"
                )
            elif kind == "point":
                out.append(f'{indent}{n}(["{_mm(d["label"])}"])')
                cls(n, "point")
                for h in hooks_at(graph, d["point"]):
                    hd = graph.nodes[h]
                    label = _mm_label(hd["cap_id"], _hook_lines(hd))
                    shape = {
                        "step": ("[", "]"),
                        "contribution": (">", "]"),
                        "gate": ("{{", "}}"),
                        "native": ("[[", "]]"),
                    }.get(hd["hook_kind"], ("[", "]"))
                    out.append(f"{indent}{h}{shape[0]}{label}{shape[1]}")
                    name = hd["hook_kind"]
                    if name == "gate":
                        name = "blocking" if hd["blocking"] else "advisory"
                    if hd.get("outcome") in ("blocked", "failed", "error") or hd.get("refused"):
                        name = "refusedhook"
                    cls(h, name)
            elif kind == "note":
                out.append(f'{indent}{n}>"{_mm(" ".join(_wrap(d["label"], 60, 3)))}"]')
                cls(n, "halt")
        if parent is not None:
            for wave, tasks in _waves(graph, parent):
                wid = f"{parent}_wave_{wave}"
                out.append(f'{indent}subgraph {wid} ["wave {wave}"]')
                for t in tasks:
                    td = graph.nodes[t]
                    out.append(f'{indent}  {t}["{_mm(_task_line(td))}"]')
                    cls(t, f"task{td['status']}")
                out.append(f"{indent}end")
                cls(wid, "wavebox")

    scope(None, "  ")
    links: list[tuple[str, str]] = []  # (line, linkStyle)

    for u, v, _, d in graph.edges(keys=True, data=True):
        if d["kind"] == "initial" and u == START:
            links.append((f"  {u} --> {v}", "visited" if graph.nodes[u].get("visited") else ""))
    for seg in segments(graph):
        tail = seg.ltail or seg.tail
        head = seg.lhead or seg.head
        arrow = f' -- "{_mm(" ".join(seg.labels))}" --> ' if seg.labels else " --> "
        style = "refused" if seg.refused else "visited" if seg.visited else ""
        links.append((f"  {tail}{arrow}{head}", style))
    for n, d in graph.nodes(data=True):
        if d.get("kind") == "point":
            # each hook on its own link to the point: dagre stacks them in one column
            for h in hooks_at(graph, d["point"]):
                links.append((f"  {n} -.- {h}", "hook"))
        if d.get("kind") == "note":
            source = next(iter(graph.predecessors(n)))
            links.append((f"  {source} -.- {n}", "refused"))
    out += [line for line, _ in links]
    styles = {
        "visited": f"stroke:{GREEN},stroke-width:2.5px",
        "refused": f"stroke:{RED},stroke-width:3px",
        "hook": "stroke:#9ca3af,stroke-dasharray:3 3",
    }
    for name, style in styles.items():
        ids = [str(i) for i, (_, s) in enumerate(links) if s == name]
        if ids:
            out.append(f"  linkStyle {','.join(ids)} {style}")
    defs = {
        "start": f"fill:{INK},stroke:{INK}",
        "state": f"fill:{STATE_FILL},stroke:{STATE_LINE},color:{INK}",
        "visited": f"fill:{VISITED_FILL},stroke:{GREEN},color:{INK}",
        "current": f"fill:{CURRENT_FILL},stroke:#1b5e20,stroke-width:3px,color:{INK}",
        "box": f"fill:#f4f7fc,stroke:{STATE_LINE}",
        "visitedbox": f"fill:#eef7ec,stroke:{GREEN}",
        "wavebox": f"fill:#fafafa,stroke:{MUTED},stroke-dasharray:4 3",
        "point": f"fill:{POINT_FILL},stroke:{POINT_LINE},color:{INK},font-family:monospace",
        "step": f"fill:{STEP_FILL},stroke:{STEP_LINE},color:{INK}",
        "contribution": f"fill:{NOTE_FILL},stroke:{NOTE_LINE},color:{INK}",
        "native": f"fill:{STEP_FILL},stroke:{STEP_LINE},color:{INK}",
        "blocking": f"fill:{GATE_FILL},stroke:{RED},stroke-width:2.5px,color:{INK}",
        "advisory": f"fill:{GATE_FILL},stroke:{MUTED},stroke-dasharray:4 3,color:{INK}",
        "failed": f"fill:#ffebee,stroke:{RED},stroke-dasharray:4 3,color:{INK}",
        "refusedhook": f"fill:#ffcdd2,stroke:{RED},stroke-width:3px,color:{INK}",
        "halt": f"fill:#ffebee,stroke:{RED},color:{RED}",
        **{f"task{s}": f"fill:{fill},stroke:{MUTED},color:{INK}" for s, fill in TASK_FILLS.items()},
    }
    for name, style in defs.items():
        if name in classes:
            out.append(f"  classDef {name} {style}")
    for name, nodes in classes.items():
        out.append(f"  class {','.join(nodes)} {name}")
    return "\n".join(out) + "\n"


SUFFIXES = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot", ".mmd": "mermaid"}


def format_for(fmt: str | None, output: str | None) -> str:
    """The format asked for: `--format`, else the output file's suffix, else svg. An output file
    with another suffix (`x.jpg`) and no --format is a usage error, not an SVG by that name."""
    if fmt:
        return fmt
    if not output:
        return "svg"
    for suffix, name in SUFFIXES.items():
        if output.lower().endswith(suffix):
            return name

    known = ", ".join(SUFFIXES)
    raise UsageError(
        f"{output}: unknown diagram suffix (known: {known}); or give --format svg|png|dot|mermaid"
    )
