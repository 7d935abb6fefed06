"""A project's phases in ROADMAP order and which are finished (docs/loop.md, "The project loop,
phase after phase": which phases, in which order, and what is finished): what `looprail status`,
GSD tracking and the project loop (`machine.project_loop`) read the project with."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from looprail.errors import UsageError
from looprail.fsutil import contained_file
from looprail.journal.schema import NoJournalError
from looprail.journal.summary import open_journal
from looprail.layout import (
    PHASES_DIR,
    Summaries,
    normalize_phase_number,
    phase_artifact,
    phase_sort_key,
    plan_id_from_filename,
    scan_phase_dirs,
    summary_of,
)
from looprail.plans.frontmatter import file_frontmatter
from looprail.plans.phase import phase_spelling
from looprail.plans.roadmap import read_roadmap, roadmap_phases

# `looprail status` lists the phases with this module: no pydantic, plan layer or run
# machinery at import (what the phases are is read from file names).
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any


# A phase the ROADMAP keeps only as a record (`### Phase 12: SMS (REMOVED)`): never run. The
# reference's own `phase remove` deletes the heading; a hand-marked one it counts as unstarted.
_REMOVED = re.compile(r"\(REMOVED\)", re.I)


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class ProjectPhase:
    """One phase of the project as the project loop sees it."""

    number: str  # normalised: "1", "8.1"
    name: str
    dir: Path | None  # None when the ROADMAP names a phase not started on disk
    plans: int = 0
    summaries: int = 0  # plans with a SUMMARY
    verification: str | None = None  # VERIFICATION.md's frontmatter status
    checked: bool = False  # `- [x]` in ROADMAP.md
    run_id: str | None = None  # its latest journaled run
    run_status: str | None = None
    finished: bool = False
    why: str = ""  # why finished (or why not)
    removed: bool = False  # its heading says (REMOVED): never run
    discussed: bool = False  # its folder has a CONTEXT.md

    def __repr__(self) -> str:
        return f"ProjectPhase({self.number!r}, {self.status!r}, finished={self.finished})"

    @property
    def status(self) -> str:
        """One word for tables: the latest run's status when there is one that counts, else
        what the folder holds (complete, executed, partial, planned, discussed, not started)."""
        if self.run_status in ("shipped", "running", "paused", "halted"):
            return self.run_status
        if self.removed:
            return "removed"
        if self.finished:
            return "complete"
        if self.plans and self.summaries >= self.plans:
            return "executed"
        if self.summaries:
            return "partial"
        if self.plans:
            return "planned"
        if self.discussed:
            return "discussed"
        return "not started"

    def as_json(self) -> dict[str, object]:
        """The phase as `looprail status --json` shows it."""
        return {
            "number": self.number,
            "name": self.name,
            "dir": None if self.dir is None else self.dir.name,
            "status": self.status,
            "finished": self.finished,
            "removed": self.removed,
            "why": self.why,
            "plans": self.plans,
            "summaries": self.summaries,
            "verification": self.verification,
            "roadmapChecked": self.checked,
            "runId": self.run_id,
            "runStatus": self.run_status,
        }


phase_order = phase_sort_key  # of a normalised phase number: `8` < `8.1` < `8.2` < `9` < `10`


def latest_runs(runs: Sequence[Any]) -> dict[str, tuple[str, str]]:
    """phase → (run id, status) of its latest journaled run; `runs` oldest first, each with
    `id`, `phase` and `status` (journal `RunRow`s, or the headers of `journal.summary`)."""
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
    """The project's phases in order, each with whether it is finished (`runs`: `latest_runs`)."""
    root = Path(project)
    runs = runs or {}
    folders: dict[str, list[tuple[str, str, str, str]]] = {}
    for found in scan_phase_dirs(root):
        folders.setdefault(found[0], []).append(found)
    text = read_roadmap(root)
    if text is not None:  # the ROADMAP says which phases there are (none: nothing to run)
        named = roadmap_phases(text)
    else:
        named = [(n, dirs[0][2], False) for n, dirs in folders.items()]
    out = [
        _phase(root, number, name, checked, folders.get(number, []), runs.get(number))
        for number, name, checked in named
    ]
    return sorted(out, key=lambda p: phase_order(p.number))


def no_phase_reason(project: str | os.PathLike[str]) -> str:
    """Why `project_phases` found none, in words for `run` and `status`."""
    text = read_roadmap(Path(project))
    if text is None:
        return "no ROADMAP.md and no phase folder"
    if re.search(r"<details\b", text, re.I):
        return "every phase of ROADMAP.md is in an archived milestone (inside <details>)"
    return "ROADMAP.md has no `## Phase N: Name` heading"


def _finished(
    run_id: str | None, run_status: str | None, facts: tuple[bool, bool, bool, bool, str | None]
) -> tuple[bool, str]:
    """Whether a phase counts as finished, and why (docs/loop.md, "What is finished")."""
    executed, unverified, removed, checked, verification = facts
    if run_status == "shipped":
        return True, f"run {run_id} shipped"
    if run_status == "running":  # live, or killed before it could journal its end
        return False, f"run {run_id} is running; if it was stopped, a run resumes it"
    if run_status in ("paused", "halted"):
        return False, f"run {run_id} is {run_status}; a run resumes it"
    if removed:
        return True, "ROADMAP.md marks it (REMOVED): never run"
    if executed and verification == "passed":
        return True, "every plan has a SUMMARY and VERIFICATION.md says passed"
    if checked:
        return True, "ROADMAP.md marks it done ([x])"
    if unverified:
        return True, "every plan has a SUMMARY and there is no VERIFICATION.md"
    if executed:
        return False, f"VERIFICATION.md says {verification or 'nothing'}"
    return False, "not finished"


def _phase(
    root: Path,
    number: str,
    name: str,
    checked: bool,
    dirs: list[tuple[str, str, str, str]],
    run: tuple[str, str] | None,
) -> ProjectPhase:
    # Two folders for one phase: the run refuses it as ambiguous (find_phase) and says so.
    folder = Path(dirs[0][3]) if dirs else None
    plans, summaries, names = folder_progress(folder, number) if folder is not None else (0, 0, [])
    run_id, run_status = run if run is not None else (None, None)
    executed = bool(plans) and summaries >= plans
    verification = None
    if executed and run_status not in ("shipped", "running", "paused", "halted"):
        # Read only where it decides: VERIFICATION.md is the last word on an executed phase.
        verification = verification_status(root, folder, names)  # type: ignore[arg-type]
    unverified = executed and phase_artifact(names, "VERIFICATION.md") is None
    removed = _REMOVED.search(name) is not None
    facts = (executed, unverified, removed, checked, verification)
    finished, why = _finished(run_id, run_status, facts)
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
        removed=removed,
        discussed=phase_artifact(names, "CONTEXT.md") is not None,
    )


def folder_progress(folder: Path, phase: str) -> tuple[int, int, list[str]]:
    """(plans, plans with a SUMMARY, the folder's file names), from the file names alone (no
    plan is parsed: one the run would refuse still counts)."""
    try:
        with os.scandir(folder) as entries:
            names = sorted(e.name for e in entries if e.is_file())
    except OSError:
        return 0, 0, []
    plans = [n for n in names if plan_id_from_filename(n) is not None]
    index = Summaries(names)
    summaries = sum(1 for n in plans if summary_of(n, index, phase)[0] is not None)
    return len(plans), summaries, names


def verification_status(root: Path, folder: Path, names: list[str]) -> str | None:
    """The frontmatter `status` of the phase's VERIFICATION.md, read as the run's
    `verify_done` guard reads it (a regular file inside the project, links followed), or None."""
    name = phase_artifact(names, "VERIFICATION.md")
    if name is None:
        return None
    path = contained_file(root, folder / name)
    if path is None:
        return None
    fm = file_frontmatter(path)
    if isinstance(fm, dict) and fm.get("status") is not None:
        return str(fm["status"]).strip()
    return None


def through_number(phases: Sequence[ProjectPhase], through: str) -> str:
    """`--through N`'s normalised number, or a UsageError naming the phases there are."""
    wanted = normalize_phase_number(through)
    if wanted is None or all(p.number != wanted for p in phases):
        found = ", ".join(p.number for p in phases) or "none"
        raise UsageError(
            f"--through {through}: no phase {through} in this project (phases: {found})"
        )
    return wanted


def upto(phases: Sequence[ProjectPhase], through: str | None = None) -> list[ProjectPhase]:
    """The phases, in order, up to and including `through` (a normalised number; None: all)."""
    limit = phase_order(through) if through is not None else None
    return [p for p in phases if limit is None or phase_order(p.number) <= limit]


def pending(phases: Sequence[ProjectPhase], through: str | None = None) -> list[ProjectPhase]:
    """The unfinished phases of `upto(phases, through)`."""
    return [p for p in upto(phases, through) if not p.finished]


def new_folder(project: Path, phase: ProjectPhase) -> Path:
    """The folder a run creates for a phase the ROADMAP names with none yet, as the
    reference's discuss step names it: `.planning/phases/<NN>-<slug of its name>`."""
    slug = re.sub(r"[^a-z0-9]+", "-", phase.name.lower()).strip("-")[:60].strip("-")
    return project / PHASES_DIR / (phase_spelling(phase.number) + (f"-{slug}" if slug else ""))


def journal_runs(project: Path) -> dict[str, tuple[str, str]]:
    """`latest_runs` of the project's journal (empty without one), read with plain SQL."""
    try:
        conn = open_journal(project)
    except NoJournalError:
        return {}
    with contextlib.closing(conn):
        rows = conn.execute("SELECT id, phase, status FROM runs ORDER BY started_at, id")
        return latest_runs([{"id": r[0], "phase": r[1], "status": r[2]} for r in rows])
