"""The loop as one networkx graph (`build_graph`): the compiled chart's states and transitions,
the points each transition fires, the hooks active at each point, and what one run did.

Nodes (`kind`): `start` (the initial pseudo-state); `state` (`parent`: the compound holding it,
`final`, `compound`: the looped step whose waves are its children); `point` (`parent`: the
compound every transition crossing it stays in); `hook` (`hook_kind` step | contribution | gate
| native | failed: a capability that failed to load but declared a gate there); `task` (a task
of the overlaid run); `note` (why the run halted).

Edges (`kind`): `initial` (start → initial state, compound → first child); `transition` (keyed
`event:target`, with `event`, `guards` and the `points` it dispatches in order); `fires` (point
→ hook, in dispatch order); `note` (state → note).

Built in loop order (deterministic), with no absolute path and no time. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import networkx as nx

from looprail.hooks.resolve import resolve
from looprail.machine.chart import compile_loop
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec, TransitionSpec

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet
    from looprail.hooks.resolve import Envelope

START = "__start__"
HOOK_KINDS = ("step", "contribution", "gate", "native", "failed")
TASK_STATUSES = ("pending", "running", "done", "failed")
# Journal outcomes of a hook that refused its transition (a blocking verdict, a halting failure).
REFUSING_OUTCOMES = ("blocked", "failed", "error", "block")


@dataclass(frozen=True)
class RunEvent:
    """The journal event fields the overlay reads (a `store.EventRow` has all of them)."""

    kind: str
    point: str | None = None
    cap_id: str | None = None
    hook_kind: str | None = None
    outcome: str | None = None
    message: str | None = None
    wave: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunTask:
    """The journal task fields the overlay reads (a `store.TaskRow` has all of them)."""

    task_key: str
    status: str
    plan_id: str | None = None
    wave: int | None = None
    attempt: int = 0


@dataclass(frozen=True)
class RunView:
    """One journaled run, as plain values: what the overlay draws."""

    run_id: str
    phase: str
    status: str
    state: tuple[str, ...]
    halt_reason: str | None = None
    events: tuple[RunEvent, ...] = ()
    tasks: tuple[RunTask, ...] = ()


def point_id(point: str) -> str:
    """A node id safe in DOT and Mermaid without quoting: `plan:post` → `pt_plan_post`."""
    return "pt_" + re.sub(r"\W", "_", point)


def envelopes_for(
    compiled: CapabilitySet, config: Mapping[str, Any] | None, spec: LoopSpec = DEFAULT_LOOP
) -> dict[str, Envelope]:
    """`{point: envelope}` for every point the loop crosses, from the one resolver."""
    return {p: resolve(compiled, config, p) for p in crossed_points(spec)}


def crossed_points(spec: LoopSpec = DEFAULT_LOOP) -> list[str]:
    """The points in the order the loop first crosses them."""
    return list(dict.fromkeys(p for t in spec.transitions() for p in t.points))


def hook_summary(hook: Mapping[str, Any], flavor: str = "gsd") -> str:
    """What a hook does, in a few words (`skill gsd-plan-lint`, `query ui plan-gate`)."""
    kind = hook.get("kind")
    if kind == "step":
        ref = hook.get("ref") or {}
        if ref.get("skill"):
            return f"skill {flavor}-{ref['skill']}"
        if ref.get("agent"):
            return f"agent {ref['agent']}"
        if ref.get("command") is not None:
            return f"command {ref['command']}"
        return "step (no ref)"
    if kind == "contribution":
        return f"into {hook.get('into') or '(unset)'}"
    if kind == "gate":
        check = hook.get("check") or {}
        if "query" in check:
            return f"query {check['query']}"
        if "predicate" in check:
            pred = check["predicate"]
            return f"predicate {pred.get('kind') if isinstance(pred, Mapping) else '?'}"
        if "agentVerdict" in check:
            av = check["agentVerdict"]
            return f"agentVerdict {av.get('ref') if isinstance(av, Mapping) else '?'}"
        return "check (none)"
    return str(kind)


def build_graph(
    spec: LoopSpec = DEFAULT_LOOP,
    *,
    envelopes: Mapping[str, Mapping[str, Any]] | None = None,
    run: RunView | None = None,
    title: str = "looprail loop",
    flavor: str = "gsd",
) -> nx.MultiDiGraph:
    """The loop graph of `spec`'s compiled chart, with the hooks of `envelopes` (as
    `envelopes_for` returns them) and the overlay of `run`."""
    graph = nx.MultiDiGraph(
        title=title,
        hooks_shown=envelopes is not None,
        run_id=run.run_id if run else None,
        run_status=run.status if run else None,
        run_phase=run.phase if run else None,
    )
    _add_chart(graph, spec)
    if envelopes is not None:
        _add_hooks(graph, spec, envelopes, flavor)
    if run is not None:
        _overlay(graph, spec, run)
    return graph


def _add_chart(graph: nx.MultiDiGraph, spec: LoopSpec) -> None:
    """States and transitions read from the compiled chart, joined with the spec's points.
    Nodes are added in the order the loop reaches them (a stable layout and stable text)."""
    chart = compile_loop(spec)
    states = _state_attrs(chart, spec)
    graph.add_node(START, kind="start", label="", parent=None)

    def add_state(name: str) -> None:
        if name not in graph:
            parent = states[name]["parent"]
            if parent is not None:
                add_state(parent)
            graph.add_node(name, **states[name])

    spec_transitions = spec.transitions()
    for t in spec_transitions:
        add_state(t.source)
        for p in t.points:
            if point_id(p) not in graph:
                graph.add_node(point_id(p), kind="point", label=p, point=p, parent=None, hooks=0)
        add_state(t.target)
    for name in states:
        add_state(name)
    _add_edges(graph, chart, spec_transitions)
    for p in crossed_points(spec):
        graph.nodes[point_id(p)]["parent"] = _inside(graph, p)


class _Hook(NamedTuple):
    """The attributes of a hook node that come from the hook (or the warning) it draws."""

    hook_kind: str
    cap_id: str
    summary: str
    blocking: bool = False
    on_error: str | None = None
    when: str | None = None


def _state_attrs(chart: Any, spec: LoopSpec) -> dict[str, dict[str, Any]]:
    """The node attributes of every state of the compiled chart (the module docstring's)."""
    steps = {s.name: s for s in spec.steps}
    states: dict[str, dict[str, Any]] = {}
    for state in chart.states_map.values():
        parent = state.parent.id if state.parent is not None else None
        step = steps.get(state.id)
        states[state.id] = dict(
            kind="state",
            label=state.id if parent is None else str(state.name),
            parent=parent,
            compound=bool(state.states),
            initial=bool(state.initial),
            final=bool(state.final),
            role=step.role if step else None,
            artifact=step.artifact if step else None,
            description=step.description if step else "",
            visited=False,
            current=False,
        )
    return states


def _add_edges(
    graph: nx.MultiDiGraph, chart: Any, spec_transitions: Sequence[TransitionSpec]
) -> None:
    """The initial edges, then the chart's transitions in loop order (their guards from the
    chart, their points from the spec)."""
    for state in chart.states_map.values():
        if state.initial and state.parent is None:
            graph.add_edge(START, state.id, key="initial", kind="initial")
        for tr in state.transitions:
            if tr.initial or not tr.events:  # the compound's implicit entry into its first child
                for target in tr.targets:
                    graph.add_edge(state.id, target.id, key="initial", kind="initial")
    for t in spec_transitions:
        tr = _chart_transition(chart, t.event, t.source, t.target)
        graph.add_edge(
            t.source,
            t.target,
            key=f"{t.event}:{t.target}",
            kind="transition",
            event=t.event,
            guards=[str(c) for c in tr.cond],
            points=list(t.points),
            label=t.label,
            visited=False,
            refused=False,
        )


def _chart_transition(chart: Any, event: str, source: str, target: str) -> Any:
    """The compiled chart's transition for a spec transition (the chart is the authority on
    guards; the spec adds the points)."""
    for tr in chart.states_map[source].transitions:
        if event in {str(e) for e in tr.events} and target in [t.id for t in tr.targets]:
            return tr
    raise LookupError(f"compiled chart has no transition {event} {source} → {target}")


def transitions(graph: nx.MultiDiGraph) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The transition edges `(source, target, key, attrs)` in loop order."""
    return [
        (u, v, k, d)
        for u, v, k, d in graph.edges(keys=True, data=True)
        if d.get("kind") == "transition"
    ]


def _inside(graph: nx.MultiDiGraph, point: str) -> str | None:
    """The compound a point is drawn inside: the one holding both ends of every transition
    crossing it, if any."""
    parents = set()
    for u, v, _, d in transitions(graph):
        if point in d["points"]:
            parents.add(graph.nodes[u].get("parent"))
            parents.add(graph.nodes[v].get("parent"))
    return parents.pop() if len(parents) == 1 else None


def _add_hooks(
    graph: nx.MultiDiGraph, spec: LoopSpec, envelopes: Mapping[str, Mapping[str, Any]], flavor: str
) -> None:
    for point in crossed_points(spec):
        env = envelopes.get(point) or {}
        hooks = [_hook_of(hook, flavor) for hook in env.get("activeHooks") or ()]
        hooks += [_failed_hook(warning) for warning in env.get("warnings") or ()]
        for index, hook in enumerate(hooks):
            _add_hook(graph, point, index, hook)


def _hook_of(hook: Mapping[str, Any], flavor: str) -> _Hook:
    when = hook.get("when")
    return _Hook(
        str(hook.get("kind")),
        str(hook.get("capId")),
        hook_summary(hook, flavor),
        hook.get("blocking") is True,
        hook.get("onError"),
        when if isinstance(when, str) else None,
    )


def _failed_hook(warning: str) -> _Hook:
    # The fail-open warning's shape (hooks/resolve.py point_warnings); a withheld invalid id
    # shows as "?".
    match = re.match(r'capability "([^"]+)"', warning)
    cap_id = match.group(1) if match else "?"
    return _Hook("failed", cap_id, "failed to load: its gate here is not evaluated")


def _add_hook(graph: nx.MultiDiGraph, point: str, index: int, attrs: _Hook) -> str:
    pid = point_id(point)
    node = f"hk_{re.sub(r'[^0-9A-Za-z]', '_', point)}_{index}"
    graph.add_node(
        node,
        kind="hook",
        point=point,
        order=index,
        parent=graph.nodes[pid]["parent"],
        outcome=None,
        message=None,
        **attrs._asdict(),
    )
    graph.add_edge(pid, node, key="fires", kind="fires", order=index)
    graph.nodes[pid]["hooks"] += 1
    return node


def _overlay(graph: nx.MultiDiGraph, spec: LoopSpec, run: RunView) -> None:
    edges = transitions(graph)
    for event in run.events:
        if event.kind != "transition":
            continue
        name = event.data.get("event")
        source = list(event.data.get("source") or ())
        target = list(event.data.get("target") or ())
        for state in (*source, *target):
            if state in graph and graph.nodes[state].get("kind") == "state":
                graph.nodes[state]["visited"] = True
        for u, v, _, d in edges:
            if d["event"] == name and u in source and v in target:
                d["visited"] = True
    if run.events and any(e.kind == "transition" for e in run.events):
        graph.nodes[START]["visited"] = True
    current = [s for s in run.state if s in graph]
    for state in current:
        graph.nodes[state]["current"] = True
        graph.nodes[state]["visited"] = True
    _hook_outcomes(graph, run)
    if run.status in ("halted", "paused", "failed"):
        _refusal(graph, run, current)
    _tasks(graph, spec, run)


def _hook_outcomes(graph: nx.MultiDiGraph, run: RunView) -> None:
    """The last outcome of each drawn hook in the run (a wave point fires once per wave)."""
    hooks = {
        (d["point"], d["cap_id"], d["hook_kind"]): n
        for n, d in graph.nodes(data=True)
        if d.get("kind") == "hook"
    }
    for event in run.events:
        if event.kind != "hook":
            continue
        node = hooks.get((event.point, event.cap_id, event.hook_kind))
        if node is not None:
            graph.nodes[node]["outcome"] = event.outcome
            graph.nodes[node]["message"] = event.message


def _refusal(graph: nx.MultiDiGraph, run: RunView, current: Sequence[str]) -> None:
    halted = next((e for e in reversed(run.events) if e.kind == "halted"), None)
    # The note hangs on what stopped the run: the hook that refused at a drawn point (a run
    # refused at verify:pre still stands in `execute`, but the note belongs by the gate), else
    # the state it stands in (a native task hook halts at its event, `task_call`, not at one of
    # the drawn points: then only the note says why).
    at = current[-1] if current else None
    if halted is not None and halted.point and halted.cap_id and point_id(halted.point) in graph:
        # The refused transition: the one leaving the current state through the halted point.
        for u, _, _, d in transitions(graph):
            if u in current and halted.point in d["points"]:
                d["refused"] = True
                d["refused_by"] = halted.cap_id
                d["refused_at"] = halted.point
        at = _refusing_hook(graph, run, halted.point, halted.cap_id)
        graph.nodes[at]["refused"] = True
    reason = run.halt_reason or (halted.message if halted else None)
    if at is not None:
        verb = {"paused": "paused", "failed": "failed"}.get(run.status, "halted")
        graph.add_node(
            "halt_note",
            kind="note",
            label=f"{verb}: {reason}" if reason else verb,
            status=run.status,
            parent=graph.nodes[at].get("parent"),
        )
        graph.add_edge(at, "halt_note", key="note", kind="note")


def _refusing_hook(graph: nx.MultiDiGraph, run: RunView, point: str, cap_id: str) -> str:
    """The node of the hook that refused at `point`: the last one of that capability whose
    outcome refuses (a capability may have a step and a gate at one point), drawn now if the
    hooks are not."""
    hook_event = next(
        (
            e
            for e in reversed(run.events)
            if e.kind in ("hook", "native_hook")
            and e.point == point
            and e.cap_id == cap_id
            and e.outcome in REFUSING_OUTCOMES
        ),
        None,
    )
    kind = (hook_event.hook_kind if hook_event else None) or "gate"
    wanted = (point, cap_id, kind)
    for n, d in graph.nodes(data=True):
        if d.get("kind") == "hook" and (d["point"], d["cap_id"], d["hook_kind"]) == wanted:
            return str(n)
    data = hook_event.data if hook_event else {}
    kind = kind if kind in HOOK_KINDS else "step"
    hook = _Hook(
        kind, cap_id, data.get("label") or "", bool(data.get("blocking")), data.get("onError")
    )
    node = _add_hook(graph, point, graph.nodes[point_id(point)]["hooks"], hook)
    if hook_event is not None:
        graph.nodes[node]["outcome"] = hook_event.outcome
        graph.nodes[node]["message"] = hook_event.message
    return node


def _tasks(graph: nx.MultiDiGraph, spec: LoopSpec, run: RunView) -> None:
    for index, task in enumerate(run.tasks):
        graph.add_node(
            f"tk_{index}",
            kind="task",
            label=task.task_key,
            task_key=task.task_key,
            plan_id=task.plan_id,
            wave=task.wave,
            status=task.status if task.status in TASK_STATUSES else "pending",
            attempt=task.attempt,
            parent=spec.looped,
        )


def children(graph: nx.MultiDiGraph, parent: str | None, kind: str | None = None) -> list[str]:
    """Nodes directly inside `parent` (None: top level), optionally of one kind, in order."""
    return [
        n
        for n, d in graph.nodes(data=True)
        if d.get("parent") == parent and (kind is None or d.get("kind") == kind)
    ]


def hooks_at(graph: nx.MultiDiGraph, point: str) -> list[str]:
    """The hook nodes fired at `point`, in dispatch order."""
    pid = point_id(point)
    return [v for _, v, d in sorted(graph.out_edges(pid, data=True), key=lambda e: e[2]["order"])]
