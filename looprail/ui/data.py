"""What the dashboard shows (`/api/state`), read from the project and its journal. It only reads
(`Journal.open_readonly`; the run lock is only probed): a missing or unreadable journal and a
project without `.planning/` are states the page explains, not errors.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import NotRequired, TypedDict

from looprail.errors import LooprailError
from looprail.journal import (
    EventRow,
    Journal,
    JournalError,
    NoJournalError,
    RunRow,
    is_run_id,
    lock_holder,
)
from looprail.journal.models import iso_utc
from looprail.layout import PLANNING_DIR, normalize_phase_number
from looprail.machine import answers
from looprail.machine.commands import answer_command
from looprail.machine.project import latest_runs, project_phases
from looprail.plans import load_phase
from looprail.plans.checkpoint import render
from looprail.plans.phase import list_phases
from looprail.ui.runs import Envelopes, RunDetail, RunSummary, caps_args, run_detail, run_summary


class ProjectView(TypedDict):
    """The project the page shows, and its phases (`roadmap`: `looprail status`'s)."""

    name: str
    path: str
    isProject: bool
    phases: list[str]
    roadmap: NotRequired[list[dict[str, object]]]


class CheckpointsView(TypedDict):
    """What the latest unfinished run waits on: each checkpoint's model, title and text."""

    runId: str
    items: list[dict[str, object]]


class Snapshot(TypedDict):
    """Everything the page shows (`/api/state`); the server adds the chart and the token."""

    now: str
    project: ProjectView
    journalError: str | None
    runs: list[RunSummary]
    run: RunDetail | None
    hint: str | None
    warnings: list[str]
    checkpoints: CheckpointsView | None
    version: NotRequired[str]
    writable: NotRequired[bool]
    chart: NotRequired[bool]
    chartError: NotRequired[str | None]
    chartFocus: NotRequired[float | None]


def open_journal(project: Path) -> tuple[Journal | None, str | None]:
    """(journal, None), or (None, why not) where why is None for "no journal yet"."""
    try:
        return Journal.open_readonly(project), None
    except NoJournalError:
        return None, None
    except JournalError as exc:
        return None, str(exc)


def change_marker(project: Path) -> str:
    """A cheap value that changes whenever anything the page shows may have changed: the newest
    event, every run's status, and whether a live process holds the run lock."""
    journal, error = open_journal(project)
    if journal is None:
        return f"none:{error or ''}"
    with journal:
        runs = journal.runs()
        seq = journal.last_seq()
    holder = lock_holder(project)
    statuses = ",".join(f"{r.id}={r.status}" for r in runs)
    return f"{seq}|{statuses}|{holder.run_id if holder else '-'}"


def snapshot(
    project: Path,
    capability_dirs: Sequence[str] = (),
    run_ref: str | None = None,
    *,
    envelopes: Envelopes | None = None,
    envelope_warnings: Sequence[str] = (),
    event_cache: dict[str, list[EventRow]] | None = None,
) -> Snapshot:
    """Everything the page shows for `run_ref` (None: the latest run). With `event_cache`
    (`{run id: events}`, kept by the caller between calls), only events newer than the cached
    ones are read: events are append-only, so the cache stays true."""
    out = _empty_snapshot(project, envelope_warnings)
    view = out["project"]
    journal, error = open_journal(project)
    if journal is None:
        out["journalError"] = error
        out["hint"] = _hint(project, capability_dirs, view, error)
        view["roadmap"] = project_phases_view(project, [], None) if view["isProject"] else []
        return out
    holder = lock_holder(project)
    with journal:
        runs = looprail_runs(journal.runs(), out["warnings"])
        selected = selected_run(journal, runs, run_ref)
        view["roadmap"] = project_phases_view(project, runs, selected) if view["isProject"] else []
        if selected is None:
            out["hint"] = _hint(project, capability_dirs, view, None)
            return out
        counts = journal.task_counts()
        tasks = journal.tasks(selected.id)
        waiting = journal.unfinished_run()
        events = _events(journal, selected.id, event_cache)
    out["runs"] = [
        run_summary(r, counts.get(r.id, {}), holder)
        for r in sorted(runs, key=lambda r: (r.started_at, r.id), reverse=True)
    ]
    out["run"] = run_detail(project, capability_dirs, selected, events, tasks, holder, envelopes)
    if waiting is not None and is_run_id(waiting.id):
        # The run shown is usually the one that waits: its events are read already.
        shown = events if waiting.id == selected.id else None
        out["checkpoints"] = checkpoints_view(project, waiting.id, waiting.phase, shown)
    return out


def _empty_snapshot(project: Path, warnings: Sequence[str]) -> Snapshot:
    is_project = (project / PLANNING_DIR).is_dir()
    phases: list[str] = []
    if is_project:
        try:
            phases = [p.number for p in list_phases(project)]
        except Exception:  # a damaged phases folder must not take the page down
            phases = []
    return {
        "now": iso_utc(datetime.now(UTC)),
        "project": {
            "name": project.resolve().name,
            "path": str(project.resolve()),
            "isProject": is_project,
            "phases": phases,
        },
        "journalError": None,
        "runs": [],
        "run": None,
        "hint": None,
        "warnings": list(warnings),
        "checkpoints": None,
    }


def looprail_runs(runs: list[RunRow], warnings: list[str]) -> list[RunRow]:
    """The journal is a file in the project: a run id not in looprail's own form (planted to
    reach a path or a printed command) is left out, and said so."""
    for run in runs:
        if not is_run_id(run.id):
            warnings.append(f"journal: run {run.id!r} skipped: not a looprail run id")
    return [run for run in runs if is_run_id(run.id)]


def _events(
    journal: Journal, run_id: str, cache: dict[str, list[EventRow]] | None
) -> list[EventRow]:
    if cache is None:
        return journal.events(run_id)
    cached = cache.setdefault(run_id, [])
    cached.extend(journal.events(run_id, after=cached[-1].seq if cached else 0))
    return list(cached)


def checkpoints_view(
    project: Path, run_id: str, phase: str, events: Sequence[EventRow] | None = None
) -> CheckpointsView | None:
    """What the latest unfinished run `run_id` waits on, as the terminal and `looprail answer`
    see it (`machine.answers`; over its `events` when given): each checkpoint's model, title and
    the text the terminal shows (`plans.checkpoint.render`). None when it waits on nothing."""
    if events is None:
        pending = answers.pending_checkpoints(project)
    else:
        kinds = ("checkpoint", "answer", "task_finished")  # what pending_checkpoints reads
        pending = answers.pending_in([e for e in events if e.kind in kinds])
    if not pending:
        return None
    items = []
    for cp in pending:
        done, total = _progress(project, phase, cp.plan_id, cp.task_id)
        items.append(
            {
                **cp.model_dump(mode="json"),
                "title": cp.title,
                "text": render(cp, done, total),
                "command": answer_command(str(project), cp),  # every part quoted
            }
        )
    return {"runId": run_id, "items": items}


def _progress(
    project: Path, phase: str, plan_id: str, task_id: str
) -> tuple[int | None, int | None]:
    """(tasks of the plan before the checkpoint, tasks of the plan): the terminal's "Progress"
    line; (None, None) when the plan cannot be read now."""
    try:
        plan = load_phase(project, phase).plan(plan_id)
    except (LooprailError, OSError, KeyError):
        return None, None
    ids = [t.id for t in plan.tasks]
    if task_id not in ids:
        return None, None
    return ids.index(task_id), len(ids)


def project_phases_view(
    project: Path, runs: Sequence[RunRow], shown: RunRow | None
) -> list[dict[str, object]]:
    """The project's phases in ROADMAP order with where each stands (`looprail status`'s
    phases): finished or not and why, its latest run; `next` marks the phase `looprail run`
    runs next, `current` the phase of the run `shown`."""
    try:
        phases = project_phases(project, latest_runs(runs))
    except Exception:  # a damaged ROADMAP or phases folder must not take the page down
        return []
    current = normalize_phase_number(shown.phase) if shown is not None else None
    nxt = next((p.number for p in phases if not p.finished), None)
    return [
        {**p.as_json(), "next": p.number == nxt, "current": p.number == current} for p in phases
    ]


def selected_run(journal: Journal, runs: list[RunRow], ref: str | None) -> RunRow | None:
    """The run a page shows among `runs` (`looprail_runs`): `ref` (an id or prefix), else the
    latest."""
    if not runs:
        return None
    if ref:
        try:
            found = journal.find_run(ref)
            if is_run_id(found.id):
                return found
        except JournalError:
            pass  # an unknown run in the URL: show the latest
    return max(runs, key=lambda r: (r.started_at, r.id))


def _hint(
    project: Path, capability_dirs: Sequence[str], view: ProjectView, error: str | None
) -> str:
    where = shlex.quote(str(project))
    if error:
        return f"The journal cannot be read: {error}"
    if not view["isProject"]:
        return (
            f"{project} has no .planning/ folder, so it is not a looprail project yet. Create "
            ".planning/phases/<NN-name>/ with PLAN.md files (docs/plans.md), then run "
            f"`looprail run {where} --phase 1`; this page follows the run live."
        )
    phase = view["phases"][0] if view["phases"] else "1"
    return (
        "No runs yet. Start one in another terminal: "
        f"`looprail run {where} --phase {shlex.quote(phase)}{caps_args(capability_dirs)}`; "
        "this page follows it live."
    )
