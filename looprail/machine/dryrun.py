"""`looprail run --dry-run`: what would be dispatched at every point (and per wave and task
where the phase has plans), running nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from looprail.errors import PlanError
from looprail.hooks.gates import checks as C
from looprail.hooks.gates.checks import COMMAND_GRAMMAR
from looprail.hooks.native import load_native_hooks
from looprail.hooks.resolve import resolve
from looprail.layout import LOOPRAIL_DIR, normalize_phase_number
from looprail.machine.project import (
    ProjectPhase,
    new_folder,
    pending,
    project_phases,
    through_number,
    upto,
)
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec
from looprail.plans import compute_waves, load_phase
from looprail.plans.plancheck import check_phase_plans, warning_lines
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
    """One task of a wave (`checkpoint`: its gate; `unchecked`: why no check)."""

    id: str
    name: str
    trackerId: str | None
    checkpoint: str | None
    checks: list[str]
    unchecked: str | None


class WaveDoc(TypedDict):
    number: int
    planIds: list[str]
    pending: bool
    parallel: bool
    overlapFiles: list[str]
    tasks: list[TaskPlan]


class RoleWork(TypedDict):
    """The role work of the step a transition enters: the artifact it `writes`, `unless` done."""

    role: str
    step: str
    writes: str | None
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
    phaseDirExists: bool
    flavor: str
    hostTool: str | None
    warnings: list[str]
    transitions: list[TransitionPlan]
    ran: bool


@dataclass(frozen=True)
class _Where:
    """The phase a dry run is of, and how it would be run."""

    project: Path
    phase: str
    phase_dir: Path
    flavor: str
    host_tool: str | None


def _hook_plan(hook: Hook, point: str, at: _Where) -> HookPlan:
    kind, cap, host_tool = hook["kind"], hook["capId"], at.host_tool
    if kind == "step":
        ref = hook.get("ref") or {}
        if ref.get("skill"):
            what = f"skill {at.flavor}-{ref['skill']}"
        elif ref.get("agent"):
            what = f"agent {ref['agent']}"
        elif not isinstance(ref.get("command"), str) or not COMMAND_GRAMMAR.match(ref["command"]):
            # the dispatcher never runs it: say so instead of showing it as if it would run
            what = f"command {ref.get('command')!r} fails the grammar: never run"
        else:
            tool = f"{host_tool} " if host_tool else ""
            what = f"command {tool}{ref['command']} --phase {at.phase} --raw"
        return {"capId": cap, "kind": kind, "runs": what, "onError": hook.get("onError") or "skip"}
    if kind == "contribution":
        text = (hook.get("fragment") or {}).get("inline", "")
        first = text.strip().splitlines()[0] if text.strip() else ""
        return {"capId": cap, "kind": kind, "into": hook.get("into"), "firstLine": first[:60]}
    return {
        "capId": cap,
        "kind": kind,
        "runs": _gate_call(hook.get("check") or {}, cap, point, at),
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


def _gate_call(check: Mapping[str, Any], cap: str, point: str, at: _Where) -> str:
    """What the gate will run, as the dispatcher will run it."""
    host_tool = at.host_tool
    if (point, cap) in C.LEDGER_GATES:
        return f"ledger {C.LEDGER_PATH}" + (f" ({host_tool} windows status)" if host_tool else "")
    if "query" in check:
        query = check["query"]
        if not C.validate_query(query):
            return f"query {query!r} fails the grammar: never run"
        values = argument_values(query_args(point), at.project, at.phase, at.phase_dir, "<req ids>")
        args = " ".join(json.dumps(a) if " " in a else a for a in values)
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
    """What a run of `phase` would do, as data (`run --dry-run --json`); a phase the ROADMAP
    names with no folder yet is planned in the folder a run would create. Nothing runs."""
    number, phase_dir, ph = _the_phase(loaded.project, phase)
    waves = compute_waves(ph.plans, root=loaded.project) if ph is not None and ph.plans else None
    native = load_native_hooks(loaded.project, trusted=is_trusted)
    at = _Where(loaded.project, number, phase_dir, flavor, host_tool)
    warnings = warning_lines(check_phase_plans(loaded.project, ph)) if ph is not None else []
    point = partial(_point_plan, loaded, native, at)
    return {
        "dryRun": True,
        "project": str(loaded.project),
        "phase": number,
        "phaseDir": phase_dir.name,
        "phaseDirExists": ph is not None,
        "flavor": flavor,
        "hostTool": host_tool,
        "warnings": [*native.warnings, *warnings],
        "transitions": _transitions_plan(spec, point, waves, ph),
        "ran": False,
    }


def _transitions_plan(
    spec: LoopSpec, point: Callable[..., PointPlan], waves: WavePlan | None, ph: Phase | None
) -> list[TransitionPlan]:
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
            step["waves"] = _waves_plan(waves, ph) if waves is not None and ph else None
            step["points"].append(point(t.points[0], "wave"))
            continue
        step["points"] = [point(p) for p in t.points]
        step["roleWork"] = _role_work(spec, t.target, started=ph is not None)
    return transitions


def _the_phase(project: Path, phase: str) -> tuple[str, Path, Phase | None]:
    """The phase's number, folder and plans (a phase the ROADMAP names with no folder yet: the
    folder a run would create, no plans)."""
    try:
        ph = load_phase(project, phase)
    except PlanError:
        wanted = normalize_phase_number(phase)
        named = [p for p in project_phases(project) if p.number == wanted and p.dir is None]
        if not named:
            raise
        return named[0].number, new_folder(Path(project), named[0]), None
    return ph.number, ph.dir, ph


def _point_plan(
    loaded: Loaded, native: NativeHookSet, at: _Where, p: str, each: str | None = None
) -> PointPlan:
    env = resolve(loaded.compiled, loaded.config, p)
    return {
        "point": p,
        "each": each,
        "hooks": [_hook_plan(h, p, at) for h in env["activeHooks"]],
        "nativeHooks": [
            {"ref": h.ref, "description": h.entry.description, "filter": dict(h.entry.filter or {})}
            for h in native.for_event(p)
        ],
        "warnings": list(env.get("warnings", ())),
    }


def _waves_plan(waves: WavePlan, ph: Phase) -> list[WaveDoc]:
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


def _role_work(spec: LoopSpec, target: str, *, started: bool = True) -> RoleWork | None:
    """The role work of the step a transition enters (a phase not `started` has none done)."""
    step = next((s for s in spec.steps if s.name == target), None)
    if step is None or step.name == spec.looped:
        return None
    unless = None
    if step.artifact and started:
        unless = f"{step.artifact} {_DONE_WHEN.get(step.done_guard or '', 'exists')}"
    return {"role": step.role, "step": step.name, "writes": step.artifact, "unless": unless}


def dry_run(doc: DryRunPlan) -> str:
    """A `dry_run_plan` for people: one line per transition, point, hook and task."""
    folder = doc["phaseDir"] + ("" if doc["phaseDirExists"] else ": no folder yet, a run makes it")
    out = [f"dry run: phase {doc['phase']} ({folder}) of {doc['project']}", ""]
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
            note = f" (unless {work['unless']})" if work["unless"] else ""
            if not doc["phaseDirExists"] and work["writes"]:
                note = f": nothing there yet, it writes {work['writes']}"
            out.append(f"  then {work['role']} does the {work['step']} work{note}")
    out += ["", "nothing was run"]
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


class LoopPhase(TypedDict):
    phase: str
    name: str
    phaseDir: str
    phaseDirExists: bool
    status: str
    why: str


class LoopDryRun(TypedDict):
    """What `run --dry-run --all` / `--through N` prints with `--json`."""

    dryRun: bool
    project: str
    loop: str
    through: str | None
    phases: list[LoopPhase]
    finishedBefore: list[str]
    first: DryRunPlan | None
    ran: bool


def unfinished_reason(p: ProjectPhase) -> str:
    """Why the project loop counts `p` as unfinished, in words."""
    if p.run_status in ("running", "paused", "halted"):
        return p.why
    if p.dir is None:
        return "not started, no folder yet: a run makes it"
    if not p.plans:
        return "discussed; no plan yet" if p.status == "discussed" else "no CONTEXT.md or plan yet"
    if p.summaries < p.plans:
        return f"{p.summaries} of {p.plans} plans have a SUMMARY"
    said = (
        "no VERIFICATION.md has a status"
        if p.verification is None
        else f"VERIFICATION.md says status: {p.verification}"
    )
    return f"every plan has a SUMMARY, but {said}, and ROADMAP.md does not mark it done"


def loop_dry_run_plan(
    loaded: Loaded,
    *,
    through: str | None = None,
    runs: Mapping[str, tuple[str, str]] | None = None,
    flavor: str = "gsd",
    spec: LoopSpec = DEFAULT_LOOP,
    host_tool: str | None = None,
) -> LoopDryRun:
    """What `run --all` (or `--through N`) would do, as data: the unfinished phases in order,
    each with why, and the first one's `dry_run_plan` (`runs`: `project.latest_runs`)."""
    phases = project_phases(loaded.project, runs)
    limit = through_number(phases, through) if through is not None else None
    todo = pending(phases, limit)
    return {
        "dryRun": True,
        "project": str(loaded.project),
        "loop": "all" if through is None else "through",
        "through": limit,
        "phases": [
            {
                "phase": p.number,
                "name": p.name,
                "phaseDir": (p.dir or new_folder(loaded.project, p)).name,
                "phaseDirExists": p.dir is not None,
                "status": p.status,
                "why": unfinished_reason(p),
            }
            for p in todo
        ],
        "finishedBefore": [p.number for p in upto(phases, limit) if p.finished],
        "first": (
            dry_run_plan(loaded, todo[0].number, flavor=flavor, spec=spec, host_tool=host_tool)
            if todo
            else None
        ),
        "ran": False,
    }


def loop_dry_run(doc: LoopDryRun) -> str:
    """A `loop_dry_run_plan` for people: the phases in order, then the first one in full."""
    which = "--all" if doc["through"] is None else f"--through {doc['through']}"
    phases, done = doc["phases"], doc["finishedBefore"]
    if not phases:
        return f"dry run of `run {which}`: every phase is finished; nothing would run\n"
    out = [
        f"dry run of `run {which}` in {doc['project']}: {plural(len(phases), 'phase')} would "
        "run, in this order, each once the one before ships:"
    ]
    for i, p in enumerate(phases, 1):
        out.append(f"  {i}. phase {p['phase']}: {p['name']} ({p['phaseDir']}): {p['why']}")
    if done:
        out.append(f"finished already, not run: {', '.join(done)}")
    out += [
        "",
        f"phase {phases[0]['phase']}, the first, in full (the others cross the same points):",
    ]
    assert doc["first"] is not None  # the first of `phases`
    return "\n".join(out) + "\n" + dry_run(doc["first"])
