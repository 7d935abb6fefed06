"""Render the loop graph (`graph.build_graph`) as Graphviz DOT, SVG, PNG, or Mermaid text (the
drawing rules: `drawing.py`). DOT and Mermaid text are deterministic (built in the graph's loop
order, no time, no path); SVG and PNG come from Graphviz's `dot` (`require_dot`).
"""

from __future__ import annotations

import html
import itertools
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import graphviz
import networkx as nx

from looprail.diagrams.drawing import (
    CURRENT_FILL,
    FONT,
    GATE_FILL,
    GATE_LINE,
    GREEN,
    INK,
    MONO,
    MUTED,
    NOTE_FILL,
    NOTE_LINE,
    POINT_FILL,
    POINT_LINE,
    RED,
    STATE_FILL,
    STATE_LINE,
    STEP_FILL,
    STEP_LINE,
    TASK_FILLS,
    VISITED_FILL,
    compound_title,
    hook_lines,
    segments,
    state_lines,
    task_line,
    task_waves,
    wrap,
)
from looprail.diagrams.graph import START, children, hooks_at
from looprail.diagrams.mermaid import to_mermaid
from looprail.errors import GraphvizMissingError, LooprailError, UsageError
from looprail.runtime.process import find_program, run_bounded

FORMATS = ("svg", "png", "dot", "mermaid")


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


# Graphviz refuses an HTML label longer than 16384 characters (a syntax error for the whole
# graph), and labels come from third-party manifests: every line is clipped, the task table is
# cut short with a count of what is left out.
LINE_MAX = 120
TABLE_MAX = 12_000


def _clip(text: str, limit: int = LINE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _html(title: str, lines: list[str], *, size: int = 10) -> str:
    parts = [f'<font face="{FONT}"><b>{html.escape(_clip(title))}</b></font>']
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
        else:
            attrs["weight"] = "8"  # the loop's spine stays straight beside wrapped hooks
        g.edge(seg.tail, seg.head, **attrs)
        below = _last_hook_row(graph, seg.tail)
        if below and not seg.back:  # the next step starts under the point's last row of hooks
            g.edge(below, seg.head, style="invis", weight="0")
    for u, v, d in graph.edges(data=True):
        if d["kind"] == "initial" and u == START:
            visited = graph.nodes[START].get("visited")
            g.edge(u, v, **({"color": GREEN, "penwidth": "2.2"} if visited else {}))
        elif d["kind"] == "note":
            g.edge(u, v, style="dashed", color=RED, arrowhead="none")
    return g.source


def _caption(graph: nx.MultiDiGraph) -> list[str]:
    lines = []
    if graph.graph.get("run_id"):
        lines.append(
            f"run {graph.graph['run_id']} · phase {graph.graph['run_phase']} · "
            f"{graph.graph['run_status']}"
        )
    if graph.graph.get("no_hooks"):  # --hooks drew none: the picture says why
        lines += wrap(graph.graph["no_hooks"], 90, 3)
    elif graph.graph.get("hooks_shown"):
        lines.append(
            "box: step · note: contribution · octagon: gate (red border: blocking, "
            "dashed: advisory)"
        )
    return lines


def _dot_scope(graph: nx.MultiDiGraph, g: Any, parent: str | None) -> None:
    """Nodes directly inside `parent` (None: top level); compound children as clusters."""
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
                    label=_html(compound_title(d), [], size=10),
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


def _dot_note(g: Any, n: str, d: Mapping[str, Any]) -> None:
    paused = d.get("status") == "paused"  # waiting for a human, not broken
    g.node(
        n,
        label="\n".join(wrap(d["label"], 38, 5)),
        shape="note",
        style="filled",
        fillcolor=GATE_FILL if paused else "#ffebee",
        color=GATE_LINE if paused else RED,
        fontcolor=GATE_LINE if paused else RED,
        fontsize="10",
    )


def _dot_tasks(graph: nx.MultiDiGraph, g: Any, compound: str) -> None:
    """The overlaid run's tasks as one table under the wave loop: a row per wave."""
    waves = task_waves(graph, compound)
    if not waves:
        return
    rows: list[str] = []
    size = 0
    for index, (wave, tasks) in enumerate(waves):
        cells = [
            f'<td bgcolor="{TASK_FILLS[graph.nodes[t]["status"]]}">'
            f'<font face="{MONO}" point-size="9">'
            f"{html.escape(_clip(task_line(graph.nodes[t]), 60))}</font>"
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
    table = '<<table border="0" cellborder="1" cellspacing="2" cellpadding="3" color="#9ca3af">'
    table += "".join(rows) + "</table>>"
    node = f"tasks_{compound}"
    inner = [c for c in children(graph, compound, "state") if not graph.nodes[c]["initial"]]
    running = [c for c in inner if not graph.nodes[c]["final"]]  # the state the waves run in
    with g.subgraph() as s:
        s.attr(rank="same")
        s.node(node, label=table, shape="plain")
        if running:
            s.edge(running[0], node, style="invis")


def _dot_state(d: Mapping[str, Any]) -> dict[str, str]:
    title, detail = state_lines(d)
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


# Hooks of one point per row: more wrap onto rows below, so ten hooks at `plan:pre` make a
# block of 4 × 3 beside the loop rather than one row four times wider than the loop.
HOOKS_PER_ROW = 4


def _hook_rows(graph: nx.MultiDiGraph, point: str) -> list[list[str]]:
    hooks = hooks_at(graph, point)
    return [hooks[i : i + HOOKS_PER_ROW] for i in range(0, len(hooks), HOOKS_PER_ROW)]


def _last_hook_row(graph: nx.MultiDiGraph, node: str) -> str | None:
    """The first hook of a point node's last row when its hooks take more than one row."""
    d = graph.nodes[node]
    if d["kind"] != "point":
        return None
    rows = _hook_rows(graph, d["point"])
    return rows[-1][0] if len(rows) > 1 else None


def _dot_point(graph: nx.MultiDiGraph, g: Any, n: str, d: Mapping[str, Any]) -> None:
    rows = _hook_rows(graph, d["point"])
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
        first = rows[0] if rows else []
        for h in first:
            s.node(h, **_dot_hook(graph.nodes[h]))
        for left, right in itertools.pairwise([n, *first]):
            s.edge(left, right, style="dashed", color="#9ca3af", arrowhead="none", weight="5")
    for above, row in itertools.pairwise(rows):
        with g.subgraph() as s:  # the next row, each hook under the one above it
            s.attr(rank="same")
            for h in row:
                s.node(h, **_dot_hook(graph.nodes[h]))
            for left, right in itertools.pairwise(row):
                s.edge(left, right, style="invis", weight="5")
        for top, under in zip(above, row, strict=False):
            g.edge(top, under, style="invis", weight="10")


def _dot_hook(d: Mapping[str, Any]) -> dict[str, str]:
    kind = d["hook_kind"]
    attrs = {"label": _html(d["cap_id"], hook_lines(d), size=9), "fontsize": "10"}
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
