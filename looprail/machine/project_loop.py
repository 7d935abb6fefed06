"""The project loop: a project's unfinished phases run one after another (`looprail run`
without `--phase`, `--through N`, `--all`; docs/loop.md, "The project loop")."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from looprail.fsutil import require_inside
from looprail.journal import Journal
from looprail.layout import PHASES_DIR
from looprail.machine.project import (
    ProjectPhase,
    journal_runs,
    new_folder,
    no_phase_reason,
    pending,
    project_phases,
    through_number,
    upto,
)
from looprail.machine.session.open import spent_usd as _spent

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from looprail.machine.progress import Progress
    from looprail.machine.session.load import Loaded
    from looprail.machine.session.phase import SessionResult


def ensure_folder(project: Path, phase: ProjectPhase) -> Path:
    """The phase's folder, created (`new_folder`) when the ROADMAP names a phase with none."""
    if phase.dir is not None:
        return phase.dir
    folder = new_folder(project, phase)
    require_inside(project, project / PHASES_DIR.split(os.sep)[0], "the folder")
    folder.parent.mkdir(parents=True, exist_ok=True)
    require_inside(project, folder.parent, "the folder")
    folder.mkdir(exist_ok=True)
    return folder


@dataclass
class ProjectResult:
    """What a multi-phase invocation did: each phase's session, in order, and why it stopped."""

    spent_usd: float = 0.0
    sessions: list[tuple[str, SessionResult]] = field(default_factory=list)
    stopped: str | None = None  # why it stopped before the selected phases were run
    remaining: list[str] = field(default_factory=list)  # selected phases not run
    finished_before: list[str] = field(default_factory=list)  # already finished when it began
    phase_count: int = 0  # phases the project has (0: the ROADMAP names none)
    no_phase: str = ""  # why it has none (`no_phase_reason`)

    @property
    def shipped(self) -> list[str]:
        return [n for n, s in self.sessions if s.result.status == "shipped"]

    @property
    def exit_code(self) -> int:
        if self.sessions and self.sessions[-1][1].result.status != "shipped":
            return int(self.sessions[-1][1].result.exit_code)
        return 1 if self.stopped else 0


def run_project(
    loaded: Loaded,
    *,
    through: str | None = None,
    one: bool = False,
    run: Callable[[str, float, bool], SessionResult],
    budget_usd: float | None = None,
    journal: bool = True,
    progress: Progress | None = None,
    spent_usd: float = 0.0,
) -> ProjectResult:
    """Run the project's unfinished phases in order (only the next one with `one`; up to and
    including `through`), read again after each, until one does not ship or the budget is
    spent. `run(number, spent, first)` runs one phase (`budget_usd` spans every phase);
    `spent_usd`: spent before (by the run `looprail resume` resumed)."""
    seen: list[str] = []
    result = ProjectResult(spent_usd=spent_usd)
    phases = _phases(loaded.project, journal)
    result.phase_count = len(phases)
    result.no_phase = "" if phases else no_phase_reason(loaded.project)
    limit = through_number(phases, through) if through is not None else None
    result.finished_before = [p.number for p in upto(phases, limit) if p.finished]
    while True:
        todo = [p for p in pending(phases, limit) if p.number not in seen]
        if not todo or (seen and one) or _over_budget(result, budget_usd, todo):
            return result
        phase = todo[0]
        ensure_folder(loaded.project, phase)
        if progress is not None and (seen or not one):
            progress.line(f"phase {phase.number}: {phase.name}")
        session = run(phase.number, result.spent_usd, not seen)
        seen.append(phase.number)
        result.sessions.append((phase.number, session))
        # (a resumed run's spending before the kill counts too, as it does for one phase)
        result.spent_usd += run_spent(loaded.project, session.run_id) if journal else 0.0
        phases = _phases(loaded.project, journal)
        if session.result.status != "shipped":
            result.remaining = [p.number for p in pending(phases, limit) if p.number not in seen]
            return result


def _over_budget(
    result: ProjectResult, budget_usd: float | None, todo: Sequence[ProjectPhase]
) -> bool:
    """Whether the budget is spent before `todo`'s first phase (why: in `result`)."""
    if budget_usd is None or result.spent_usd < budget_usd:
        return False
    result.stopped = (
        f"budget reached: ${result.spent_usd:.4f} spent of --budget-usd "
        f"{budget_usd:g}; phase {todo[0].number} not started"
    )
    result.remaining = [p.number for p in todo]
    return True


def _phases(project: Path, journal: bool) -> list[ProjectPhase]:
    return project_phases(project, journal_runs(project) if journal else None)


def run_spent(project: Path, run_id: str | None) -> float:
    """What a run's agent calls cost, from the journal (the meter's own record)."""
    if run_id is None:
        return 0.0
    with Journal.open_readonly(project) as jr:
        return _spent(jr, run_id)
