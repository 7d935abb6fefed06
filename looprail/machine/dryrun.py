"""`looprail run --dry-run`: walk the machine in order and print what would be dispatched at
every point (and, where the phase already has plans, per wave and task), running
nothing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from looprail.hooks.gates import checks as C
from looprail.hooks.gates.checks import COMMAND_GRAMMAR
from looprail.hooks.native import load_native_hooks
from looprail.hooks.resolve import resolve
from looprail.layout import LOOPRAIL_DIR
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec
from looprail.plans import compute_waves, load_phase
from looprail.plans.taskchecks import checks_of
from looprail.runtime.hostcall import argument_values, query_args
from looprail.textsafe import plural
from looprail.trust import is_trusted

if TYPE_CHECKING:
    from looprail.hooks.capset import Hook
    from looprail.hooks.native.loading import NativeHookSet
    from looprail.machine.session.load import Loaded
    from looprail.plans import Phase, WavePlan


class HookPlan(TypedDict, total=False):
    """One active hook: `runs` for a step or a gate, `into`/`firstLine` for a contribution."""

    capId: str
    kind: str
    runs: str
    onError: str
    blocking: bool
    into: str | None
    firstLine: str


class NativePlan(TypedDict):
    """One native hook of a point."""

    ref: str
    description: str
    filter: dict[str, object]


class PointPlan(TypedDict):
    """One point crossed: its hooks, native hooks and warnings (`each`: "wave" or None)."""

    point: str
    each: str | None
    hooks: list[HookPlan]
    nativeHooks: list[NativePlan]
    warnings: list[str]


class TaskPlan(TypedDict):
    """One task of a wave (`checkpoint`: its gate, for a checkpoint task)."""

    id: str
    name: str
    trackerId: str | None
    checkpoint: str | None
    # The commands looprail runs as the task's checks once its executor returns (under
    # `bash -o pipefail -c`, docs/security.md), and why none, for an unchecked task.
    checks: list[str]
    unchecked: str | None


class WaveDoc(TypedDict):
    """One wave: its plans, whether it is still to run, its mode and its tasks."""

    number: int
    planIds: list[str]
    pending: bool
    parallel: bool
    overlapFiles: list[str]
    tasks: list[TaskPlan]


class RoleWork(TypedDict):
    """The role work of the step a transition enters, unless its artifact is done."""

    role: str
    step: str
    unless: str | None


class TransitionPlan(TypedDict):
    """One transition in order (`waves` for `start_wave` when the phase has plans)."""

    source: str
    target: str
    event: str
    guards: list[str]
    points: list[PointPlan]
    waves: list[WaveDoc] | None
    roleWork: RoleWork | None


class DryRunPlan(TypedDict):
    """What `run --dry-run --json` prints."""

    dryRun: bool
    project: str
    phase: str
    phaseDir: str
    flavor: str
    hostTool: str | None
    warnings: list[str]
    transitions: list[TransitionPlan]
    ran: bool


def _hook_plan(
    hook: Hook,
    flavor: str,
    phase: str,
    host_tool: str | None,
    point: str = "",
    project: Path | None = None,
    phase_dir: Path | None = None,
) -> HookPlan:
    """One active hook as the dry run shows it: its capability, kind, and what would run."""
    kind, cap = hook["kind"], hook["capId"]
    if kind == "step":
        ref = hook.get("ref") or {}
        if ref.get("skill"):
            what = f"skill {flavor}-{ref['skill']}"
        elif ref.get("agent"):
            what = f"agent {ref['agent']}"
        elif not isinstance(ref.get("command"), str) or not COMMAND_GRAMMAR.match(ref["command"]):
            # the dispatcher never runs it: say so instead of showing it as if it would run
            what = f"command {ref.get('command')!r} fails the grammar: never run"
        else:
            tool = f"{host_tool} " if host_tool else ""
            what = f"command {tool}{ref['command']} --phase {phase} --raw"
        return {"capId": cap, "kind": kind, "runs": what, "onError": hook.get("onError") or "skip"}
    if kind == "contribution":
        text = (hook.get("fragment") or {}).get("inline", "")
        first = text.strip().splitlines()[0] if text.strip() else ""
        return {"capId": cap, "kind": kind, "into": hook.get("into"), "firstLine": first[:60]}
    return {
        "capId": cap,
        "kind": kind,
        "runs": _gate_call(
            hook.get("check") or {}, cap, point, phase, project, phase_dir, host_tool
        ),
        "blocking": bool(hook.get("blocking")),
        "onError": hook.get("onError") or "skip",
    }


def _hook_line(h: HookPlan) -> str:
    cap = h["capId"]
    if h["kind"] == "step":
        return f"    step          {h['runs']}  ({cap}, onError {h['onError']})"
    if h["kind"] == "contribution":
        return f"    contribution  into {h['into']}: {h['firstLine']}  ({cap})"
    block = "blocking" if h["blocking"] else "advisory"
    return f"    gate          {h['runs']}; {block}, onError {h['onError']}  ({cap})"


def _gate_call(
    check: Mapping[str, Any],
    cap: str,
    point: str,
    phase: str,
    project: Path | None,
    phase_dir: Path | None,
    host_tool: str | None,
) -> str:
    """What the gate will run, as the dispatcher will run it (the per-point table of
    hooks.gates.checks)."""
    project = project if project is not None else Path(".")
    if (point, cap) in C.LEDGER_GATES:
        return f"ledger {C.LEDGER_PATH}" + (f" ({host_tool} windows status)" if host_tool else "")
    if "query" in check:
        query = check["query"]
        if not C.validate_query(query):
            return f"query {query!r} fails the grammar: never run"
        args = " ".join(
            json.dumps(a) if " " in a else a
            for a in argument_values(query_args(point), project, phase, phase_dir, "<req ids>")
        )
        words = query.split(" ")
        if host_tool:
            return f"query: {host_tool} check {query} {args} --raw"
        return f"query: {LOOPRAIL_DIR}/checks/{words[0]} {' '.join([*words[1:], args])}"
    if "predicate" in check and isinstance(check["predicate"], dict):
        kind = check["predicate"].get("kind")
        return f"predicate {kind}" + (f" ({host_tool} check predicate)" if host_tool else "")
    return next(iter(check), "?")


def dry_run_plan(
    loaded: Loaded,
    phase: str,
    *,
    flavor: str = "gsd",
    spec: LoopSpec = DEFAULT_LOOP,
    host_tool: str | None = None,
) -> DryRunPlan:
    """What a run of `phase` would do, as data (`run --dry-run --json`): every transition in
    order with the points it crosses and the hooks active at each, the waves, plans and tasks
    where the phase has plans, and the role work each step would do. Nothing runs."""
    ph = load_phase(loaded.project, phase)
    waves = compute_waves(ph.plans, root=loaded.project) if ph.plans else None
    native = load_native_hooks(loaded.project, trusted=is_trusted)

    def point(p: str, each: str | None = None) -> PointPlan:
        return _point_plan(loaded, ph, native, flavor, host_tool, p, each)

    transitions: list[TransitionPlan] = []
    for t in spec.transitions():
        if t.event == "finish_wave" and t.target == "waves_done":
            continue  # the same points as the other finish_wave branch
        step: TransitionPlan = {
            "source": t.source,
            "target": t.target,
            "event": t.event,
            "guards": list(t.guards),
            "points": [],
            "waves": None,
            "roleWork": None,
        }
        transitions.append(step)
        if t.event == "start_wave":
            step["waves"] = _waves_plan(waves, ph) if waves is not None else None
            step["points"].append(point(t.points[0], "wave"))
            continue
        step["points"] = [point(p) for p in t.points]
        step["roleWork"] = _role_work(spec, t.target)
    return {
        "dryRun": True,
        "project": str(loaded.project),
        "phase": ph.number,
        "phaseDir": ph.dir.name,
        "flavor": flavor,
        "hostTool": host_tool,
        "warnings": list(native.warnings),
        "transitions": transitions,
        "ran": False,
    }


def _point_plan(
    loaded: Loaded,
    ph: Phase,
    native: NativeHookSet,
    flavor: str,
    host_tool: str | None,
    p: str,
    each: str | None,
) -> PointPlan:
    """One point as the dry run shows it: its active hooks, native hooks and warnings."""
    env = resolve(loaded.compiled, loaded.config, p)
    return {
        "point": p,
        "each": each,
        "hooks": [
            _hook_plan(h, flavor, ph.number, host_tool, p, loaded.project, ph.dir)
            for h in env["activeHooks"]
        ],
        "nativeHooks": [
            {
                "ref": h.ref,
                "description": h.entry.description,
                "filter": dict(h.entry.filter or {}),
            }
            for h in native.for_event(p)
        ],
        "warnings": list(env.get("warnings", ())),
    }


def _waves_plan(waves: WavePlan, ph: Phase) -> list[WaveDoc]:
    """The phase's waves as the dry run shows them: plans, mode and tasks."""
    return [
        {
            "number": w.number,
            "planIds": list(w.plan_ids),
            "pending": bool(w.pending),
            "parallel": bool(w.parallel_safe),
            "overlapFiles": list(w.overlap_files),
            "tasks": [
                {
                    "id": task.id,
                    "name": task.name or "",
                    "trackerId": task.tracker_id,
                    "checkpoint": (task.gate or "pauses") if task.is_checkpoint else None,
                    "checks": checks_of(task).commands,
                    "unchecked": checks_of(task).reason,
                }
                for pid in w.plan_ids
                for task in ph.plan(pid).tasks
            ],
        }
        for w in waves.waves
    ]


# What a step's `done_guard` asks of its artifact, where more than that it exists.
_DONE_WHEN = {"verify_done": "reports status: passed"}  # a VERIFICATION.md that did not pass


def _role_work(spec: LoopSpec, target: str) -> RoleWork | None:
    """The role work of the step a transition enters, unless its artifact is done."""
    step = next((s for s in spec.steps if s.name == target), None)
    if step is None or step.name == spec.looped:
        return None
    unless = None
    if step.artifact:
        unless = f"{step.artifact} {_DONE_WHEN.get(step.done_guard or '', 'exists')}"
    return {"role": step.role, "step": step.name, "unless": unless}


def dry_run(
    loaded: Loaded,
    phase: str,
    *,
    flavor: str = "gsd",
    spec: LoopSpec = DEFAULT_LOOP,
    host_tool: str | None = None,
) -> str:
    """The dry run for people: `dry_run_plan`, one line per transition, point, hook and task."""
    doc = dry_run_plan(loaded, phase, flavor=flavor, spec=spec, host_tool=host_tool)
    out = [f"dry run: phase {doc['phase']} ({doc['phaseDir']}) of {doc['project']}", ""]
    out.extend(f"  ! {w}" for w in doc["warnings"])

    def point(p: PointPlan) -> None:
        hooks, natives = p["hooks"], p["nativeHooks"]
        counts = [plural(len(hooks), "active hook")] if hooks else []
        counts += [plural(len(natives), "native hook")] if natives else []
        suffix = f" (each {p['each']})" if p["each"] else ""
        out.append(f"  {p['point']}{suffix}: {', '.join(counts) or 'no active hooks'}")
        out.extend(_hook_line(h) for h in hooks)
        out.extend(f"    ! {w}" for w in p["warnings"])
        for h in natives:  # the user's own hooks.json entries, after the above
            only = f"  (filter {json.dumps(h['filter'])})" if h["filter"] else ""
            out.append(f"    native        {h['ref']}: {h['description']}{only}")

    for t in doc["transitions"]:
        out.append(
            f"{t['source']} → {t['target']}  [{t['event']}; guards: {', '.join(t['guards'])}]"
        )
        if t["event"] == "start_wave":
            out.extend(_wave_lines(t["waves"]))
        for p in t["points"]:
            point(p)
        work = t["roleWork"]
        if work is not None:
            unless = f" (unless {work['unless']})" if work["unless"] else ""
            out.append(f"  then {work['role']} does the {work['step']} work{unless}")
    out.append("")
    out.append("nothing was run")
    return "\n".join(out) + "\n"


def _wave_lines(waves: list[WaveDoc] | None) -> list[str]:
    if waves is None:
        return ["  (no plans yet: the planner writes them; waves are known after plan)"]
    out = []
    for w in waves:
        state = "to run" if w["pending"] else "done"
        mode = "parallel" if w["parallel"] else f"sequential ({', '.join(w['overlapFiles'])})"
        out.append(f"  wave {w['number']}: {', '.join(w['planIds'])} [{state}, {mode}]")
        for task in w["tasks"]:
            extra = []
            if task["trackerId"]:
                extra.append(f"execute:task resolver for {task['trackerId']}")
            if task["checkpoint"]:
                extra.append(f"checkpoint ({task['checkpoint']})")
            note = f"  [{'; '.join(extra)}]" if extra else ""
            out.append(f"    task {task['id']} {task['name']}{note}")
            out.extend(f"      check (SHELL) {command}" for command in task["checks"])
            if task["unchecked"]:
                out.append(f"      unverified: no automated check ({task['unchecked']})")
    return out
