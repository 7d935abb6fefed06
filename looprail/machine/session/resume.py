"""What a resumed run takes back from its journal: its role context, and a role killed mid-work
(its step done again, its partial output moved aside); docs/journal.md, "Crashes and resume"."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprail.fsutil import looprail_path
from looprail.journal.models import EventRow
from looprail.layout import PARTIAL_DIR

# Bigger files are named by size and mtime, not hashed (nothing stops a user parking one).
_HASH_LIMIT = 8 << 20


def phase_snapshot(phase_dir: Path | None) -> dict[str, str]:
    """`{relative path: content digest}` of the files under the phase folder (links not
    followed), taken when a role starts work: a resume knows what it added."""
    if phase_dir is None or not phase_dir.is_dir():
        return {}
    files: dict[str, str] = {}
    for folder, dirs, names in os.walk(phase_dir):
        dirs.sort()
        for name in sorted(names):
            path = Path(folder) / name
            try:
                st = path.lstat()
            except OSError:
                continue
            if not path.is_file() or path.is_symlink():
                continue
            rel = path.relative_to(phase_dir).as_posix()
            if st.st_size > _HASH_LIMIT:
                files[rel] = f"size:{st.st_size}:{st.st_mtime_ns}"
                continue
            try:
                with path.open("rb") as handle:
                    files[rel] = hashlib.file_digest(handle, "sha256").hexdigest()
            except OSError:
                continue
    return files


@dataclass
class Recovery:
    redo_steps: set[str] = field(default_factory=set)
    set_aside: list[str] = field(default_factory=list)  # project-relative POSIX paths
    notes: list[str] = field(default_factory=list)

    def excuses(self, change: str) -> bool:
        """Whether an "inputs changed" line is only the in-flight role's own output."""
        _, _, path = change.partition(": ")
        return path in self.set_aside


def recover_role(project: Path, phase_dir: Path | None, run_id: str, journal: Any) -> Recovery:
    """Find a role killed mid-work in `run_id`; set its partial output aside."""
    recovery = Recovery()
    started: EventRow | None = None  # the last role started and not finished
    for event in journal.events(run_id, kinds=["role_started", "role_finished"]):
        started = event if event.kind == "role_started" else None
    if started is None or phase_dir is None:
        return recovery
    step = str(started.data.get("step") or "")
    role = str(started.data.get("role") or "")
    recovery.redo_steps.add(step)
    before = started.data.get("files") or {}
    now = phase_snapshot(phase_dir)
    added = sorted(rel for rel in now if rel not in before)
    if not added:
        recovery.notes.append(f"{role} was at work on {step} when the run stopped: doing it again")
        return recovery
    aside = looprail_path(project, PARTIAL_DIR, run_id, f"{started.seq}-{step}")
    for rel in added:
        source = phase_dir / rel
        target = aside / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)
        recovery.set_aside.append(_project_key(source, project))
    recovery.notes.append(
        f"{role} was at work on {step} when the run stopped: its partial output "
        f"({', '.join(added)}) was moved to {aside.relative_to(project).as_posix()}/; "
        "doing the work again"
    )
    return recovery


def recover_summaries(
    project: Path, phase_dir: Path | None, run_id: str, journal: Any, recovery: Recovery
) -> None:
    """A SUMMARY.md written while one of its plan's tasks was in flight when the run was killed
    is partial output: set aside, so the plan stays pending and the task runs again. In flight:
    any task row of the plan not `done` (a start may be lost with the process); a plan's tasks
    are registered only while it has no SUMMARY, so one there now was written by this run."""
    if phase_dir is None:
        return
    plans = sorted({t.plan_id for t in journal.tasks(run_id) if t.status != "done" and t.plan_id})
    for plan_id in plans:
        summary = phase_dir / f"{plan_id}-SUMMARY.md"
        if not summary.is_file() or summary.is_symlink():
            continue
        aside = looprail_path(project, PARTIAL_DIR, run_id, "tasks")
        aside.mkdir(parents=True, exist_ok=True)
        shutil.move(summary, aside / summary.name)
        recovery.set_aside.append(_project_key(summary, project))
        recovery.notes.append(
            f"plan {plan_id} had a task in flight when the run stopped: its {summary.name} was "
            f"moved to {aside.relative_to(project).as_posix()}/ and the task runs again"
        )


def replay_role_context(events: Iterable[EventRow], dispatcher: Any) -> None:
    """Deliver the run's journaled contributions again, in journal order, so role requests
    after a resume carry the same fragments."""
    for event in events:
        if event.kind != "contribution" or event.point is None:
            continue
        role, text = event.data.get("into"), event.data.get("text")
        if not isinstance(role, str) or not isinstance(text, str) or not role:
            continue
        ctx = dispatcher.context(event.point, cap_id=event.cap_id, wave=event.wave)
        dispatcher.contribute(role, text, ctx)


def _project_key(path: Path, project: Path) -> str:
    absolute = Path(os.path.abspath(path))
    return (
        absolute.relative_to(project).as_posix()
        if absolute.is_relative_to(project)
        else str(absolute)
    )
