"""Each task's automated checks (pure): the commands of its `<verify><automated>` and which
tasks have none (unchecked). The reference planner's `<automated>MISSING — …</automated>`
(no test exists yet) is no command."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from looprail.errors import LooprailError
from looprail.plans.folders import list_phases, looks_like_plan
from looprail.plans.planfile import Plan, Task, read_plan

UncheckedReason = Literal["no <verify>", "<verify> is prose only", "<automated> is MISSING"]
_MISSING = re.compile(r"MISSING\b")


class TaskChecks(BaseModel):
    """One task's checks; `unchecked`: a non-checkpoint task with no command."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    name: str | None = None
    commands: list[str] = []
    unchecked: bool = False
    reason: UncheckedReason | None = None
    prose: str | None = None


def task_checks(plan: Plan) -> list[TaskChecks]:
    """Every task of `plan`, in order, with its check commands."""
    return [checks_of(task) for task in plan.tasks]


def checks_of(task: Task) -> TaskChecks:
    commands = [c for c in task.automated if not _MISSING.match(c)]
    reason: UncheckedReason | None = None
    if not commands and not task.is_checkpoint:
        if task.automated:
            reason = "<automated> is MISSING"
        elif task.verify:
            reason = "<verify> is prose only"
        else:
            reason = "no <verify>"
    return TaskChecks(
        task_id=task.id,
        name=task.name,
        commands=commands,
        unchecked=reason is not None,
        reason=reason,
        prose=task.verify,
    )


def unchecked_tasks(plan: Plan) -> list[TaskChecks]:
    return [checks for checks in task_checks(plan) if checks.unchecked]


class PlanCheck(NamedTuple):
    """One command a run would execute as a task's check (the plan file project-relative)."""

    plan: str
    task_id: str
    command: str


def project_checks(project: str | Path) -> list[PlanCheck]:
    """Every check command of every readable plan of the project, phase by phase."""
    root = Path(project)
    found: list[PlanCheck] = []
    for phase in list_phases(root):
        try:
            names = sorted(os.listdir(phase.dir))
        except OSError:
            continue
        for name in names:
            if not looks_like_plan(name):
                continue
            try:
                plan = read_plan(phase.dir / name)
            except LooprailError:  # lint names it; nothing of it runs
                continue
            rel = (phase.dir / name).relative_to(root).as_posix()
            found += [
                PlanCheck(rel, checks.task_id, command)
                for checks in task_checks(plan)
                for command in checks.commands
            ]
    return found
