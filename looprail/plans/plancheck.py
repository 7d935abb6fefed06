"""The plan checks a phase's plans meet before any executor runs (pure; what the reference's
plan-checker holds plans to, without judgement; the list: docs/plans.md, "Plan checks").
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from looprail.plans.musthaves import read_must_haves
from looprail.plans.phase import Phase
from looprail.plans.planfile import Plan, Task
from looprail.plans.roadmap import roadmap_req_ids
from looprail.plans.taskchecks import checks_of
from looprail.plans.waves import normalize_path, relative


class PlanFinding(NamedTuple):
    """One finding: the plan's path (project-relative) and what is wrong, in one line."""

    where: str
    message: str

    def line(self) -> str:
        return f"{self.where}: {self.message}"


class PlanReport(NamedTuple):
    """`findings` fail the checks; `unchecked` lists the tasks no `<automated>` command checks
    (said, never a failure)."""

    findings: list[PlanFinding]
    unchecked: list[PlanFinding]


def check_phase_plans(project: Path, phase: Phase) -> PlanReport:
    findings: list[PlanFinding] = []
    unchecked: list[PlanFinding] = []
    files = _all_files(phase.plans)
    for plan in phase.plans:
        where = relative(plan.path, project)
        for task in plan.tasks:
            if task.is_checkpoint:
                continue
            findings += [PlanFinding(where, m) for m in _task_gaps(task)]
            reason = checks_of(task).reason
            if reason is not None:
                unchecked.append(PlanFinding(where, f"{_name(task)} is unchecked ({reason})"))
        findings += [PlanFinding(where, m) for m in _artifacts_outside(plan, files)]
    findings += _uncovered(project, phase)
    return PlanReport(findings, unchecked)


def warning_lines(report: PlanReport) -> list[str]:
    """The findings as the run and the dry run warn them (unchecked tasks are `lint`'s)."""
    return [f"plan check: {f.line()}" for f in report.findings]


def findings_text(report: PlanReport) -> str:
    """The findings as the planner is handed them, to fix its plans once."""
    lines = [
        "The plans you wrote fail looprail's plan checks. Fix each finding in the plan files "
        "(edit them in place), then finish:",
        "",
    ]
    return "\n".join(lines + [f"- {f.line()}" for f in report.findings])


def _task_gaps(task: Task) -> list[str]:
    missing = [
        f"<{name}>"
        for name, value in (("action", task.action), ("files", task.files), ("done", task.done))
        if not value
    ]
    return [f"{_name(task)} has no {', '.join(missing)}"] if missing else []


def _uncovered(project: Path, phase: Phase) -> list[PlanFinding]:
    ids = [i.strip() for i in roadmap_req_ids(project, phase.number).split(",") if i.strip()]
    covered = {r.strip() for plan in phase.plans for r in plan.requirements}
    missing = [i for i in ids if i not in covered]
    if not missing or not phase.plans:
        return []
    where = relative(phase.dir, project)
    return [
        PlanFinding(
            where,
            f"requirement {', '.join(missing)} of the phase's ROADMAP section is in no plan's "
            "requirements",
        )
    ]


def _all_files(plans: list[Plan]) -> set[str]:
    """Every file the plans name, in `files_modified` or a task's `<files>` (once per phase)."""
    files = {normalize_path(f) for p in plans for f in p.files_modified}
    return files | {normalize_path(f) for p in plans for task in p.tasks for f in task.files}


def _artifacts_outside(plan: Plan, files: set[str]) -> list[str]:
    return [
        f"must_haves artifact {a.path} is in no plan's files_modified or <files>"
        for a in read_must_haves(plan).artifacts
        if normalize_path(a.path) not in files
    ]


def _name(task: Task) -> str:
    label = f"task {task.id.rsplit('/', 1)[-1]}"
    return f"{label} ({task.name})" if task.name else label
