"""`looprail run --dry-run`: walk the machine in order and print what would be dispatched at
every point (and, where the phase already has plans, per wave and task), running
nothing."""

from __future__ import annotations

import json
from typing import Any

from looprail.hooks.checks import COMMAND_GRAMMAR
from looprail.hooks.resolve import resolve
from looprail.layout import LOOPRAIL_DIR
from looprail.machine.progress import plural
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec


def _hook_line(
    hook: dict[str, Any],
    flavor: str,
    phase: str,
    host_tool: str | None,
    point: str = "",
    project: Any = None,
    phase_dir: Any = None,
) -> str:
    kind = hook["kind"]
    cap = hook["capId"]
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
        return f"    step          {what}  ({cap}, onError {hook.get('onError') or 'skip'})"
    if kind == "contribution":
        text = (hook.get("fragment") or {}).get("inline", "")
        first = text.strip().splitlines()[0] if text.strip() else ""
        return f"    contribution  into {hook.get('into')}: {first[:60]}  ({cap})"
    check = hook.get("check") or {}
    what = _gate_call(check, cap, point, phase, project, phase_dir, host_tool)
    block = "blocking" if hook.get("blocking") else "advisory"
    return f"    gate          {what}; {block}, onError {hook.get('onError') or 'skip'}  ({cap})"


def _gate_call(
    check: dict[str, Any],
    cap: str,
    point: str,
    phase: str,
    project: Any,
    phase_dir: Any,
    host_tool: str | None,
) -> str:
    """What the gate will run, as the dispatcher will run it (hooks.checks' per-point table)."""
    from pathlib import Path

    from looprail.hooks import checks as C
    from looprail.hostcall import argument_values, query_args

    project = Path(project) if project is not None else Path(".")
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


def dry_run(
    loaded: Any,
    phase: str,
    *,
    flavor: str = "gsd",
    spec: LoopSpec = DEFAULT_LOOP,
    host_tool: str | None = None,
) -> str:
    from looprail.hooks.native import load_native_hooks
    from looprail.plans import compute_waves, load_phase
    from looprail.trust import is_trusted

    ph = load_phase(loaded.project, phase)
    waves = compute_waves(ph.plans, root=loaded.project) if ph.plans else None
    native = load_native_hooks(loaded.project, trusted=is_trusted)
    out = [f"dry run: phase {ph.number} ({ph.dir.name}) of {loaded.project}", ""]
    out.extend(f"  ! {w}" for w in native.warnings)

    def point(p: str, suffix: str = "") -> None:
        env = resolve(loaded.compiled, loaded.config, p)
        hooks = env["activeHooks"]
        natives = native.for_event(p)
        counts = [plural(n, noun) for n, noun in ((len(hooks), "active hook"),) if n]
        counts += [plural(len(natives), "native hook")] if natives else []
        out.append(f"  {p}{suffix}: {', '.join(counts) or 'no active hooks'}")
        out.extend(
            _hook_line(h, flavor, ph.number, host_tool, p, loaded.project, ph.dir) for h in hooks
        )
        out.extend(f"    ! {w}" for w in env.get("warnings", ()))
        for h in natives:  # the user's own hooks.json entries, after the above
            shown = json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in h.filter})
            only = f"  (filter {shown})" if h.filter else ""
            out.append(f"    native        {h.ref}: {h.description}{only}")

    for t in spec.transitions():
        if t.event == "finish_wave" and t.target == "waves_done":
            continue  # the same points as the other finish_wave branch
        out.append(f"{t.source} → {t.target}  [{t.event}; guards: {', '.join(t.guards)}]")
        if t.event == "start_wave":
            if waves is None:
                out.append("  (no plans yet: the planner writes them; waves are known after plan)")
                point(t.points[0], " (each wave)")
            else:
                for w in waves.waves:
                    state = "to run" if w.pending else "done"
                    mode = (
                        "parallel"
                        if w.parallel_safe
                        else f"sequential ({', '.join(w.overlap_files)})"
                    )
                    out.append(f"  wave {w.number}: {', '.join(w.plan_ids)} [{state}, {mode}]")
                    for pid in w.plan_ids:
                        plan = ph.plan(pid)
                        for task in plan.tasks:
                            extra = []
                            if task.tracker_id:
                                extra.append(f"execute:task resolver for {task.tracker_id}")
                            if task.is_checkpoint:
                                extra.append(f"checkpoint ({task.gate or 'pauses'})")
                            note = f"  [{'; '.join(extra)}]" if extra else ""
                            out.append(f"    task {task.id} {task.name or ''}{note}")
                point(t.points[0], " (each wave)")
            continue
        for p in t.points:
            point(p)
        role_step = spec.step(t.target) if t.target in {s.name for s in spec.steps} else None
        if role_step is not None and role_step.name != spec.looped:
            unless = f" (unless {role_step.artifact} exists)" if role_step.artifact else ""
            if role_step.name == "verify":  # a VERIFICATION.md that did not pass is redone
                unless = f" (unless {role_step.artifact} reports status: passed)"
            out.append(f"  then {role_step.role} does the {role_step.name} work{unless}")
    out.append("")
    out.append("nothing was run")
    return "\n".join(out) + "\n"
