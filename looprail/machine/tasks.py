"""The pieces of the one task protocol that need only the run's context: what a task's body is
handed, what the `TaskChart`'s `begin_task` runs, the SUMMARY.md that marks a plan done."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from looprail.errors import HaltError, TaskContentError
from looprail.fsutil import atomic_write, contained_file
from looprail.hooks.task_content import resolve_task_content
from looprail.journal.recorder import EventRecord
from looprail.layout import summary_file
from looprail.machine.context import RunContext
from looprail.plans import Plan, Task
from looprail.plans.briefing import executor_plan_sections, executor_task_sections, task_read_first
from looprail.plans.readfirst import read_first_entries
from looprail.plans.taskchecks import checks_of
from looprail.runtime.base import TaskWork

# A task's native hooks (`LoopRunner.task_hooks`): `TransitionRefused` when one blocks.
TaskHooks = Callable[[Literal["task_call", "task_result"], Plan, Task, int, TaskWork | None], None]


@dataclass
class PlanRun:
    """One plan's run through its `TaskChart` (the chart's model: its callbacks)."""

    run: RunContext
    task_hooks: TaskHooks
    plan: Plan
    wave: int
    index: int = 0
    work: TaskWork | None = None

    def more_tasks(self, **_: Any) -> bool:
        return self.index + 1 < len(self.plan.tasks)

    def resolve_task_content(self, task: Task, **_: Any) -> None:
        self.work = resolve_task(self.run, self.plan, task, self.wave)

    def check_read_first(self, task: Task, **_: Any) -> None:
        check_read_first(self.run, self.plan, task, self.work, self.wave)

    def task_call_hooks(self, task: Task, **_: Any) -> None:
        self.task_hooks("task_call", self.plan, task, self.wave, self.work)


def task_work(plan: Plan, task: Task, project: Path | None = None) -> TaskWork:
    """What the task's body is handed, from the plan as written (plans/briefing.py)."""
    criteria = tuple(
        line.strip().removeprefix("- ").strip()
        for line in (task.acceptance_criteria or "").splitlines()
        if line.strip()
    )
    read_first, notes = task_read_first(plan, task.read_first, task.read_first_notes, project)
    return TaskWork(
        plan_id=plan.id,
        task_id=task.id.rsplit("/", 1)[-1],  # the plan id is its own field
        index=task.index,
        name=task.name or "",
        type=task.type,
        files=tuple(task.files),
        read_first=read_first,
        read_first_notes=notes,
        action=task.action or "",
        verify=task.verify or "",
        acceptance_criteria=criteria,
        done=task.done or "",
        tracker_id=task.tracker_id,
        plan_sections=executor_plan_sections(plan, task, project),
        task_sections=executor_task_sections(task),
        checks=tuple(checks_of(task).commands),
    )


def resolve_task(run: RunContext, plan: Plan, task: Task, wave: int) -> TaskWork:
    """The `execute:task` point: mandatory, before read_first, never a fallback."""
    work = task_work(plan, task, run.project)
    if not task.tracker_id:
        return work

    def journal(outcome: str, message: str | None = None) -> None:
        run.recorder.event(
            EventRecord(
                kind="resolver",
                plan_id=plan.id,
                task_id=task.id,
                wave=wave,
                outcome=outcome,
                message=message,
                data={"trackerId": task.tracker_id},
            )
        )

    try:
        result = resolve_task_content(
            task.tracker_id, run.resolvers, cwd=run.project, unloadable=run.unloadable
        )
    except TaskContentError as exc:
        journal("failed", str(exc))
        run.progress.line(f"  ✗ execute:task {task.id} [{task.tracker_id}] resolver failed")
        raise
    journal(result.outcome)
    if not result.resolved or result.content is None:
        return work
    c = result.content
    run.progress.line(f"  ⇣ execute:task {task.id} content from {task.tracker_id}")
    entries = read_first_entries("\n".join(c.readFirst))
    written = {e.path: e.note for e in entries if e.note}
    paths = [e.path for e in entries if e.path]
    read_first, notes = task_read_first(plan, paths, written, run.project)
    return work.model_copy(
        update={
            "action": c.action,
            "verify": c.verify,
            "acceptance_criteria": tuple(c.acceptanceCriteria),
            "read_first": read_first,
            "read_first_notes": notes,
            "done": c.done,
            "resolved_by_tracker": True,
        }
    )


def check_read_first(
    run: RunContext, plan: Plan, task: Task, work: TaskWork | None, wave: int | None = None
) -> None:
    """Every `read_first` file is a regular file inside the project (links followed: the rule
    for every file whose text goes into a prompt), or the task halts."""
    paths = work.read_first if work is not None else tuple(task.read_first)
    missing = [rel for rel in paths if contained_file(run.project, rel) is None]
    run.recorder.event(
        EventRecord(
            kind="read_first",
            plan_id=plan.id,
            task_id=task.id,
            wave=wave,
            outcome="missing" if missing else "ok",
            message=", ".join(missing) or None,
            data={"paths": list(paths)},
        )
    )
    if missing:
        raise HaltError(
            f"{plan.path.name}: task {task.id} read_first: missing {', '.join(missing)}"
        )


def write_summary(
    plan: Plan, answered: list[str] | None = None, evidence: list[str] | None = None
) -> None:
    """The durable "plan done" marker (`layout.summary_file`), unless the executor wrote one;
    `answered`: the plan's checkpoint answers, added to either; `evidence`: its
    `## Verification` section, in looprail's own only. Anything but a regular file there halts
    the plan: it could never be seen done."""
    target = plan.path.with_name(summary_file(plan.path.name))
    answered = answered or []
    if _marker_there(target):
        if answered:
            _append_answers(target, answered)
        return
    lines = [
        "---",
        f"plan: {plan.id}",
        "status: complete",
        f"tasks: {len(plan.tasks)}",
        "---",
        "",
        f"# {plan.id} summary",
        "",
    ]
    if plan.objective_line:
        lines += [plan.objective_line, ""]
    for t in plan.tasks:
        tracker = f" [{t.tracker_id}]" if t.tracker_id else ""
        lines.append(f"- {t.id}: {t.name or t.type}{tracker}")
    lines += ["", *(evidence or [])] if evidence else []
    lines += answered
    try:
        atomic_write(target, "\n".join(lines) + "\n")
    except OSError as exc:  # e.g. the phase folder was removed while the plan ran
        raise HaltError(
            f"{target.name}: cannot write the plan summary ({exc.strerror or exc})"
        ) from None


def _marker_there(target: Path) -> bool:
    """Whether a regular file is at `target` (links followed, as the phase scan reads it)."""
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise HaltError(f"{target}: cannot read the plan summary ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise HaltError(
            f"{target}: the plan's SUMMARY is {kind}, so the plan could never be seen done; "
            "remove it and resume"
        )
    return True


def _append_answers(target: Path, answered: list[str]) -> None:
    try:
        text = target.read_text(encoding="utf-8", errors="replace")
        if answered[1] not in text:
            atomic_write(target, text.rstrip("\n") + "\n" + "\n".join(answered) + "\n")
    except OSError as exc:
        why = exc.strerror or exc
        raise HaltError(f"{target.name}: cannot add the checkpoint answers ({why})") from None


def halted_plans_reason(
    wave: int,
    stopped: list[str],
    plans: dict[str, Plan],
    blocked: dict[str, list[str]],
    waiting: dict[str, list[str]],
) -> str:
    """Why a wave's plans did not all run (`stopped`): halted, blocked by a halted plan, or
    waiting for a dependency of an earlier phase."""
    parts = []
    for pid in stopped:
        if plans[pid].halted:
            summary = plans[pid].summary_path
            where = summary.name if summary else "its SUMMARY"
            parts.append(f"plan {pid} halted ({where} says status: halted)")
        elif pid in blocked:
            parts.append(f"plan {pid} is blocked by halted plan {', '.join(blocked[pid])}")
        else:
            parts.append(f"plan {pid} waits: depends_on {'; '.join(waiting[pid])}")
    return f"wave {wave}: " + "; ".join(parts) + " (resolve the halt, then run again)"
