"""The plan checks a phase's plans meet before any executor runs (pure over a loaded phase and
its ROADMAP section; deterministic): what the reference's plan-checker holds its planner's plans
to, reduced to what can be decided without judgement.

- every task has an `<action>`, `<files>` and `<done>` (a checkpoint task is a person's: not
  held to it);
- every task has an `<automated>` verify, or it is listed as unchecked (said, never refused:
  nothing but prose, or the reference planner's `<automated>MISSING — why</automated>`,
  checks it; "Done means verified" lists such tasks too);
- every requirement id of the phase's ROADMAP section is in some plan's `requirements`;
- every `must_haves` artifact is among the plans' files (`files_modified` or a task's `<files>`).

A run holds the plans its own planner wrote to them (machine/plan_review.py: the planner gets
the findings once, then the run halts naming them); plans that were there already are never
refused: `lint`, the dry run and the run's output warn.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import NamedTuple

from looprail.plans.musthaves import read_must_haves
from looprail.plans.phase import Phase
from looprail.plans.planfile import Plan, Task
from looprail.plans.roadmap import roadmap_req_ids
from looprail.plans.taskchecks import checks_of
from looprail.plans.waves import relative


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
    """The checks of the module docstring over every plan of `phase`."""
    findings: list[PlanFinding] = []
    unchecked: list[PlanFinding] = []
    for plan in phase.plans:
        where = relative(plan.path, project)
        for task in plan.tasks:
            if task.is_checkpoint:
                continue
            findings += [PlanFinding(where, m) for m in _task_gaps(task)]
            reason = unchecked_reason(task)
            if reason is not None:
                unchecked.append(PlanFinding(where, f"{_name(task)} is unchecked ({reason})"))
        findings += [PlanFinding(where, m) for m in _artifacts_outside(plan, phase.plans)]
    findings += _uncovered(project, phase)
    return PlanReport(findings, unchecked)


def warning_lines(report: PlanReport) -> list[str]:
    """The findings as the run's output and the dry run warn them (plans looprail did not
    write). Unchecked tasks are `lint`'s to list (and the run summary's, "Done means
    verified"), not a warning at every run."""
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


def unchecked_reason(task: Task) -> str | None:
    """Why no command checks `task` (None: an `<automated>` command does): `plans/taskchecks.py`
    decides."""
    return checks_of(task).reason


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


def _artifacts_outside(plan: Plan, plans: list[Plan]) -> list[str]:
    files = {_norm(f) for p in plans for f in [*p.files_modified, *_task_files(p)]}
    return [
        f"must_haves artifact {path} is in no plan's files_modified or <files>"
        for path in must_have_artifacts(plan)
        if _norm(path) not in files
    ]


def must_have_artifacts(plan: Plan) -> list[str]:
    """The paths `must_haves.artifacts` names, as `plans/musthaves.py` reads them."""
    return [a.path for a in read_must_haves(plan).artifacts]


def _task_files(plan: Plan) -> list[str]:
    return [f for task in plan.tasks for f in task.files]


def _norm(path: str) -> str:
    return posixpath.normpath(path.strip().strip("`").replace("\\", "/").removeprefix("./"))


def _name(task: Task) -> str:
    label = f"task {task.id.rsplit('/', 1)[-1]}"
    return f"{label} ({task.name})" if task.name else label
