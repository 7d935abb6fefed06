"""What a role agent is handed of its phase and its plan, taken from the files as written (never
paraphrased; `runtime/prompts.py` bounds and renders it): the executor its plan's and task's
parts, the planner, the verifier and discuss the phase's ROADMAP.md section and documents.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from looprail.errors import LooprailError
from looprail.layout import PHASE_DOCS, PROJECT_DOCS, phase_artifact
from looprail.plans.phase import load_phase
from looprail.plans.planfile import Plan, Task
from looprail.plans.readfirst import resolve
from looprail.plans.roadmap import read_roadmap, roadmap_req_ids, roadmap_section
from looprail.plans.waves import relative

_TASK_CHILDREN = ("behavior", "implementation", "precondition", "reversibility")
_CONTEXT_REF = re.compile(r"^[ \t]*@(\S+)[ \t]*(.*?)[ \t]*$", re.M)  # `@path (note)`
_INTERFACES = re.compile(r"<interfaces>.*?</interfaces>", re.S)


def executor_plan_sections(plan: Plan, task: Task, project: Path | None) -> dict[str, str]:
    """The plan's parts an executor needs beside its task, as written (the ones it has)."""
    texts = {
        "path": relative(plan.path, project) if project is not None else plan.path.name,
        "objective": plan.objective or "",
        "must_haves": plan.written.get("must_haves", ""),
        "requirements": plan.written.get("requirements", ""),
        "context": context_list(plan.context or ""),
        "interfaces": plan.sections.get("interfaces") or "",
        "threat_model": plan.sections.get("threat_model") or "",
        "verification": plan.verification or "",
        "success_criteria": plan.success_criteria or "",
        "tasks": other_tasks(plan, task),
    }
    return {key: text.strip() for key, text in texts.items() if text.strip()}


def executor_task_sections(task: Task) -> dict[str, str]:
    """The task's TDD flag and its `<behavior>`, `<implementation>`, `<precondition>` and
    `<reversibility>`, as written (a `<feature>`'s are already its action: not twice)."""
    out: dict[str, str] = {}
    if task.tdd or task.type == "tdd":
        out["tdd"] = "true"
    for key in _TASK_CHILDREN:
        text = (task.extra.get(key) or "").strip()
        if text and text not in (task.action or ""):
            out[key] = text
    return out


def context_list(context: str) -> str:
    """The plan's `<context>` as a list of files to read (its `@path` lines), then the rest as
    written (`<interfaces>` is handed on its own)."""
    refs = _CONTEXT_REF.findall(context)
    rest = _INTERFACES.sub("", _CONTEXT_REF.sub("", context)).strip()
    lines = [f"- {ref} — {note}" if note else f"- {ref}" for ref, note in refs]
    if rest:
        lines += ["", rest] if lines else [rest]
    return "\n".join(lines)


def other_tasks(plan: Plan, task: Task) -> str:
    """Every task of the plan by name: done (those before this one), this one, or to do."""
    lines = []
    for other in plan.tasks:
        state = "done" if other.index < task.index else "to do"
        if other.index == task.index:
            state = "this task"
        kind = " (checkpoint)" if other.is_checkpoint else ""
        name = other.name or other.type
        lines.append(f"- {other.id.rsplit('/', 1)[-1]}{kind}: {name} — {state}")
    return "\n".join(lines)


def task_read_first(
    plan: Plan, paths: tuple[str, ...] | list[str], notes: dict[str, str], project: Path | None
) -> tuple[tuple[str, ...], dict[str, str]]:
    """`read_first` resolved against the plan's phase folder, each note re-keyed to it."""
    if project is None:
        return tuple(paths), dict(notes)
    resolved = {p: resolve(project, plan.path.parent, p) for p in paths}
    moved = {resolved.get(p, p): n for p, n in notes.items()}
    return tuple(dict.fromkeys(resolved.values())), moved


def phase_sections(
    project: Path, phase_number: str, phase_dir: Path | None, step: str
) -> list[tuple[str, str]]:
    """`(title, text)` of what the discuss, plan or verify agent is handed of its phase."""
    out: list[tuple[str, str]] = []
    roadmap = read_roadmap(project)
    section = roadmap_section(roadmap, phase_number, heading=True) if roadmap else None
    if section and section.strip():
        out.append(("The phase in .planning/ROADMAP.md (verbatim)", section.strip()))
    ids = roadmap_req_ids(project, phase_number)
    if ids and step in ("plan", "verify"):
        out.append(("Requirement ids of this phase", ids))
    docs = [p for p in PROJECT_DOCS if os.path.isfile(project / p)]
    names = sorted(os.listdir(phase_dir)) if phase_dir is not None and phase_dir.is_dir() else []
    found = (phase_artifact(names, suffix) for suffix in PHASE_DOCS)
    docs += [relative(phase_dir / n, project) for n in found if n and phase_dir is not None]
    if docs:
        out.append(("Read these files (the project's and the phase's)", _bullets(docs)))
    if step == "verify":
        out += _must_haves(project, phase_number)
    return out


def _must_haves(project: Path, phase_number: str) -> list[tuple[str, str]]:
    try:
        phase = load_phase(project, phase_number)
    except LooprailError as exc:
        return [("The plans' must_haves", f"(the phase's plans do not load: {exc})")]
    return [
        (
            f"must_haves of {relative(plan.path, project)}",
            plan.written.get("must_haves") or "(the plan has none)",
        )
        for plan in phase.plans
    ]


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)
