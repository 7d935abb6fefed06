"""The project loop: a project's phases in ROADMAP order, which are finished, and running them
one after another (`looprail run` without `--phase`, `--through N`, `--all`).

Which phases: those ROADMAP.md's headings name (`looprail.roadmap`), in phase-number order as the
reference's autonomous workflow sorts them (`8.1` after `8`, before `9`); without a ROADMAP, the
phase folders (a ROADMAP that names no phase, e.g. every milestone archived: none). A phase is
**finished** when

1. its latest journaled run shipped; or, when it has no unfinished journaled run,
2. GSD's artifacts say so as the reference's `init manager` decides `phase_complete`: at least
   one plan, a SUMMARY for every plan, and a VERIFICATION.md whose frontmatter says
   `status: passed`; or
3. ROADMAP.md marks it done (`- [x] … Phase N: …`), as the reference's `roadmap analyze` trusts
   it (phases finished before GSD tracked them).

An unfinished journaled run (running, paused or halted) always means unfinished: that run is
resumed, never a new one started beside it. docs/loop.md, "The project loop", says the rest.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprail.errors import UsageError
from looprail.layout import PHASES_DIR, normalize_phase_number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from looprail.machine.session import SessionResult


@dataclass(frozen=True)
class ProjectPhase:
    """One phase of the project as the project loop sees it."""

    number: str  # normalised: "1", "8.1"
    name: str
    dir: Path | None  # its folder, None when the ROADMAP names a phase not started on disk
    plans: int = 0
    summaries: int = 0  # plans with a SUMMARY
    verification: str | None = None  # VERIFICATION.md's frontmatter status
    checked: bool = False  # `- [x]` in ROADMAP.md
    run_id: str | None = None  # its latest journaled run
    run_status: str | None = None
    finished: bool = False
    why: str = ""  # why finished (or why not)

    @property
    def status(self) -> str:
        """One word for tables: the latest run's status when there is one that counts, else
        what the folder holds (complete, executed, partial, planned, discussed, not started)."""
        if self.run_status in ("shipped", "running", "paused", "halted"):
            return self.run_status
        if self.finished:
            return "complete"
        if self.plans and self.summaries >= self.plans:
            return "executed"
        if self.summaries:
            return "partial"
        if self.plans:
            return "planned"
        if self.dir is not None and _has_context(self.dir):
            return "discussed"
        return "not started"

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "name": self.name,
            "dir": None if self.dir is None else self.dir.name,
            "status": self.status,
            "finished": self.finished,
            "why": self.why,
            "plans": self.plans,
            "summaries": self.summaries,
            "verification": self.verification,
            "roadmapChecked": self.checked,
            "runId": self.run_id,
            "runStatus": self.run_status,
        }


def phase_order(number: str) -> tuple[Any, ...]:
    """The sort key of a normalised phase number (`8` < `8.1` < `8.2` < `9` < `10`)."""
    from looprail.plans.phase import _sort_key

    return _sort_key(number)


def latest_runs(runs: Sequence[Any]) -> dict[str, tuple[str, str]]:
    """phase → (run id, status) of its latest journaled run; `runs` oldest first, each with
    `id`, `phase` and `status` (journal `RunRow`s, or the headers of `store.summary`)."""
    out: dict[str, tuple[str, str]] = {}
    for run in runs:
        row = (
            run
            if isinstance(run, dict)
            else {k: getattr(run, k) for k in ("id", "phase", "status")}
        )
        phase = str(row["phase"])
        out[normalize_phase_number(phase) or phase] = (str(row["id"]), str(row["status"]))
    return out


def project_phases(
    project: str | os.PathLike[str], runs: Mapping[str, tuple[str, str]] | None = None
) -> list[ProjectPhase]:
    """The project's phases in order, each with whether it is finished (module docstring).
    `runs`: `latest_runs()` of the journal (none: no journal)."""
    from looprail.plans.phase import list_phases
    from looprail.roadmap import read_roadmap, roadmap_phases

    root = Path(project)
    runs = runs or {}
    folders: dict[str, list[Any]] = {}
    for found in list_phases(root):
        folders.setdefault(found.number, []).append(found)
    text = read_roadmap(root)
    if text is not None:  # the ROADMAP says which phases there are (none: nothing to run)
        named = roadmap_phases(text)
    else:
        named = [(n, dirs[0].slug, False) for n, dirs in folders.items()]
    out = [
        _phase(number, name, checked, folders.get(number, []), runs.get(number))
        for number, name, checked in named
    ]
    return sorted(out, key=lambda p: phase_order(p.number))


def _phase(
    number: str, name: str, checked: bool, dirs: list[Any], run: tuple[str, str] | None
) -> ProjectPhase:
    # Two folders for one phase: the run refuses it as ambiguous (find_phase) and says so.
    folder = dirs[0].dir if dirs else None
    plans, summaries, verification = _progress(folder) if folder is not None else (0, 0, None)
    run_id, run_status = run if run is not None else (None, None)
    if run_status == "shipped":
        finished, why = True, f"run {run_id} shipped"
    elif run_status in ("running", "paused", "halted"):
        finished, why = False, f"run {run_id} is {run_status}; it is resumed"
    elif plans and summaries >= plans and verification == "passed":
        finished, why = True, "every plan has a SUMMARY and VERIFICATION.md says passed"
    elif checked:
        finished, why = True, "ROADMAP.md marks it done ([x])"
    else:
        finished, why = False, "not finished"
    return ProjectPhase(
        number=number,
        name=name,
        dir=folder,
        plans=plans,
        summaries=summaries,
        verification=verification,
        checked=checked,
        run_id=run_id,
        run_status=run_status,
        finished=finished,
        why=why,
    )


def _progress(folder: Path) -> tuple[int, int, str | None]:
    """(plans, plans with a SUMMARY, VERIFICATION.md's status) of a phase folder, from the
    file names alone (no plan is parsed: a plan the run would refuse still counts)."""
    from looprail.hooks.checks import read_frontmatter
    from looprail.plans.phase import _artifact
    from looprail.plans.planfile import plan_id_from_filename
    from looprail.plans.waves import canonical_plan_id

    try:
        names = sorted(e.name for e in os.scandir(folder) if e.is_file())
    except OSError:
        return 0, 0, None
    done = {
        canonical_plan_id(n.removesuffix("-SUMMARY.md")) for n in names if n.endswith("-SUMMARY.md")
    }
    plans = [pid for pid in map(plan_id_from_filename, names) if pid is not None]
    summaries = sum(1 for pid in plans if canonical_plan_id(pid) in done)
    status = None
    path = _artifact(folder, names, "VERIFICATION.md")
    if path is not None:
        try:
            fm = read_frontmatter(path.read_text(errors="replace"))
        except OSError:
            fm = {}
        if isinstance(fm, dict) and fm.get("status") is not None:
            status = str(fm["status"]).strip()
    return len(plans), summaries, status


def _has_context(folder: Path) -> bool:
    try:
        return any(n.endswith("CONTEXT.md") for n in os.listdir(folder))
    except OSError:
        return False


def through_number(phases: Sequence[ProjectPhase], through: str) -> str:
    """`--through N` checked against the project's phases: its normalised number, or a
    UsageError (exit 2) naming the phases there are."""
    wanted = normalize_phase_number(through)
    if wanted is None or all(p.number != wanted for p in phases):
        found = ", ".join(p.number for p in phases) or "none"
        raise UsageError(
            f"--through {through}: no phase {through} in this project (phases: {found})"
        )
    return wanted


def pending(phases: Sequence[ProjectPhase], through: str | None = None) -> list[ProjectPhase]:
    """The unfinished phases, in order, up to and including `through` (a normalised number)."""
    limit = phase_order(through) if through is not None else None
    return [
        p for p in phases if not p.finished and (limit is None or phase_order(p.number) <= limit)
    ]


def ensure_folder(project: Path, phase: ProjectPhase) -> Path:
    """The phase's folder, created as the reference's discuss step creates it when the ROADMAP
    names a phase with none yet: `.planning/phases/<NN>-<slug of its name>`."""
    from looprail.plans.phase import phase_spelling, require_inside

    if phase.dir is not None:
        return phase.dir
    slug = re.sub(r"[^a-z0-9]+", "-", phase.name.lower()).strip("-")[:60].strip("-")
    name = phase_spelling(phase.number) + (f"-{slug}" if slug else "")
    root = project / PHASES_DIR
    require_inside(project, project / PHASES_DIR.split(os.sep)[0], "the folder")
    root.mkdir(parents=True, exist_ok=True)
    require_inside(project, root, "the folder")
    folder = root / name
    folder.mkdir(exist_ok=True)
    return folder


@dataclass
class ProjectResult:
    """What a multi-phase invocation did: each phase's session, in order, and why it stopped."""

    sessions: list[tuple[str, SessionResult]] = field(default_factory=list)
    stopped: str | None = None  # why it stopped before the last selected phase, if it did
    remaining: list[str] = field(default_factory=list)  # selected phases not run
    finished_before: list[str] = field(default_factory=list)  # already finished when it began
    spent_usd: float = 0.0
    phase_count: int = 0  # phases the project has (0: the ROADMAP names none)

    @property
    def shipped(self) -> list[str]:
        return [n for n, s in self.sessions if s.result.status == "shipped"]

    @property
    def exit_code(self) -> int:
        if self.sessions and self.sessions[-1][1].result.status != "shipped":
            return self.sessions[-1][1].result.exit_code
        return 1 if self.stopped else 0


def run_project(
    loaded: Any,
    *,
    through: str | None = None,
    one: bool = False,
    run: Callable[[str, float, bool], SessionResult],
    budget_usd: float | None = None,
    journal: bool = True,
    progress: Any = None,
    spent_usd: float = 0.0,
) -> ProjectResult:
    """Run the project's unfinished phases in order (only the next one with `one`; up to and
    including `through`) until one does not ship or the budget is spent. `run(number, spent,
    first)` runs one phase (`run_phase` with the invocation's options, `spent` what the
    invocation has spent so far: `budget_usd` spans every phase) and returns its session. The
    phases are read again after each one (a phase may have been inserted). `spent_usd`: spent
    before (by the run `looprail resume` resumed)."""
    seen: list[str] = []
    result = ProjectResult(spent_usd=spent_usd)
    phases = _phases(loaded.project, journal)
    result.phase_count = len(phases)
    limit = through_number(phases, through) if through is not None else None
    result.finished_before = [
        p.number
        for p in phases
        if p.finished and (limit is None or phase_order(p.number) <= phase_order(limit))
    ]
    while True:
        todo = [p for p in pending(phases, limit) if p.number not in seen]
        if not todo:
            return result
        if seen and one:
            return result
        if budget_usd is not None and result.spent_usd >= budget_usd:
            result.stopped = (
                f"budget reached: ${result.spent_usd:.4f} spent of --budget-usd "
                f"{budget_usd:g}; phase {todo[0].number} not started"
            )
            result.remaining = [p.number for p in todo]
            return result
        phase = todo[0]
        ensure_folder(loaded.project, phase)
        if progress is not None and (seen or not one):
            progress.line(f"phase {phase.number}: {phase.name}")
        session = run(phase.number, result.spent_usd, not seen)
        seen.append(phase.number)
        result.sessions.append((phase.number, session))
        result.spent_usd += run_spent(loaded.project, session.run_id) if journal else 0.0
        # (a resumed run's spending before the kill counts too, as it does for one phase)
        if session.result.status != "shipped":
            phases = _phases(loaded.project, journal)
            result.remaining = [p.number for p in pending(phases, limit) if p.number not in seen]
            return result
        phases = _phases(loaded.project, journal)


def _phases(project: Path, journal: bool) -> list[ProjectPhase]:
    return project_phases(project, journal_runs(project) if journal else None)


def journal_runs(project: Path) -> dict[str, tuple[str, str]]:
    """`latest_runs` of the project's journal (empty without one); read-only."""
    from looprail.store import Journal, NoJournalError

    try:
        with Journal.open_readonly(project) as jr:
            return latest_runs(jr.runs())
    except NoJournalError:
        return {}


def run_spent(project: Path, run_id: str | None) -> float:
    """What a run's agent calls cost, from the journal (the meter's own record)."""
    from looprail.machine.session import _spent
    from looprail.store import Journal

    if run_id is None:
        return 0.0
    with Journal.open_readonly(project) as jr:
        return _spent(jr, run_id)
