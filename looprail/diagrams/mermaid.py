"""The loop graph as Mermaid `flowchart TB` text, for markdown (the drawing rules: `drawing.py`)."""

from __future__ import annotations

import html

import networkx as nx

from looprail.diagrams.drawing import (
    CURRENT_FILL,
    GATE_FILL,
    GREEN,
    INK,
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


def _mm(text: str) -> str:
    """Text safe inside a quoted Mermaid label."""
    return html.escape(text, quote=False).replace('"', "#quot;")


def _mm_label(title: str, lines: list[str]) -> str:
    return '"' + "<br/>".join([f"<b>{_mm(title)}</b>", *(_mm(x) for x in lines)]) + '"'


_HOOK_SHAPES = {
    "step": ("[", "]"),
    "contribution": (">", "]"),
    "gate": ("{{", "}}"),
    "native": ("[[", "]]"),
}
_LINK_STYLES = {
    "visited": f"stroke:{GREEN},stroke-width:2.5px",
    "refused": f"stroke:{RED},stroke-width:3px",
    "hook": "stroke:#9ca3af,stroke-dasharray:3 3",
}
_CLASS_DEFS = {
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


def to_mermaid(graph: nx.MultiDiGraph) -> str:
    """Mermaid `flowchart TB` text for markdown (deterministic)."""
    out = ["---", f"title: {graph.graph.get('title') or 'looprail loop'}", "---", "flowchart TB"]
    classes: dict[str, list[str]] = {}  # class name → its nodes, in order
    _Scope(graph, out, classes).nodes(None, "  ")
    links = _links(graph)
    out += [line for line, _ in links]
    for name, style in _LINK_STYLES.items():
        ids = [str(i) for i, (_, s) in enumerate(links) if s == name]
        if ids:
            out.append(f"  linkStyle {','.join(ids)} {style}")
    out += [f"  classDef {name} {style}" for name, style in _CLASS_DEFS.items() if name in classes]
    out += [f"  class {','.join(nodes)} {name}" for name, nodes in classes.items()]
    return "\n".join(out) + "\n"


class _Scope:
    """Writes the node lines of the graph, scope by scope, into `out`, and each node's class."""

    def __init__(self, graph: nx.MultiDiGraph, out: list[str], classes: dict[str, list[str]]):
        self.graph, self.out, self.classes = graph, out, classes

    def cls(self, node: str, name: str) -> None:
        self.classes.setdefault(name, []).append(node)

    def nodes(self, parent: str | None, indent: str) -> None:
        """The nodes directly inside `parent` (None: top level), then its tasks by wave."""
        for n in children(self.graph, parent):
            d = self.graph.nodes[n]
            kind = d["kind"]
            if kind == "start":
                self.out.append(f"{indent}{n}(( ))")
                self.cls(n, "start")
            elif kind == "state" and d.get("compound"):
                self.out.append(f'{indent}subgraph {n} ["{_mm(compound_title(d))}"]')
                self.out.append(f"{indent}  direction TB")
                self.nodes(n, indent + "  ")
                self.out.append(f"{indent}end")
                self.cls(n, "visitedbox" if d.get("visited") else "box")
            elif kind == "state":
                title, detail = state_lines(d)
                shape = ("(((", ")))") if d.get("final") else ("(", ")")
                self.out.append(f"{indent}{n}{shape[0]}{_mm_label(title, detail)}{shape[1]}")
                current = "current" if d.get("current") else None
                self.cls(n, current or ("visited" if d.get("visited") else "state"))
            elif kind == "point":
                self.point(n, d["label"], d["point"], indent)
            elif kind == "note":
                self.out.append(f'{indent}{n}>"{_mm(" ".join(wrap(d["label"], 60, 3)))}"]')
                self.cls(n, "halt")
        if parent is not None:
            self.tasks(parent, indent)

    def point(self, n: str, label: str, point: str, indent: str) -> None:
        self.out.append(f'{indent}{n}(["{_mm(label)}"])')
        self.cls(n, "point")
        for h in hooks_at(self.graph, point):
            hd = self.graph.nodes[h]
            shape = _HOOK_SHAPES.get(hd["hook_kind"], ("[", "]"))
            label = _mm_label(hd["cap_id"], hook_lines(hd))
            self.out.append(f"{indent}{h}{shape[0]}{label}{shape[1]}")
            name = hd["hook_kind"]
            if name == "gate":
                name = "blocking" if hd["blocking"] else "advisory"
            if hd.get("outcome") in ("blocked", "failed", "error") or hd.get("refused"):
                name = "refusedhook"
            self.cls(h, name)

    def tasks(self, parent: str, indent: str) -> None:
        for wave, tasks in task_waves(self.graph, parent):
            wid = f"{parent}_wave_{wave}"
            self.out.append(f'{indent}subgraph {wid} ["wave {wave}"]')
            for t in tasks:
                td = self.graph.nodes[t]
                self.out.append(f'{indent}  {t}["{_mm(task_line(td))}"]')
                self.cls(t, f"task{td['status']}")
            self.out.append(f"{indent}end")
            self.cls(wid, "wavebox")


def _links(graph: nx.MultiDiGraph) -> list[tuple[str, str]]:
    """Every link line with its linkStyle name ("" for none), in order."""
    links: list[tuple[str, str]] = []
    for u, v, d in graph.edges(data=True):
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
            links += [(f"  {n} -.- {h}", "hook") for h in hooks_at(graph, d["point"])]
        if d.get("kind") == "note":
            source = next(iter(graph.predecessors(n)))
            links.append((f"  {source} -.- {n}", "refused"))
    return links
