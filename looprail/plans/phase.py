"""A project's phases: `.planning/phases/<NN-slug>/` and what is in it.

`01-setup` is phase 1 (also asked for as `01`), `02.1-hotfix` is phase 2.1. Inside a phase folder
looprail reads `{phase}-{plan}-PLAN.md` files, notices a plan's `{phase}-{plan}-SUMMARY.md` (the
plan is done), and the phase artifacts `CONTEXT.md` / `NN-CONTEXT.md`, `*VERIFICATION.md` and
`*UAT.md`. Reading is the only effect here; `plan_index` is pure over a loaded `Phase`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from looprail.config import load_project_config
from looprail.errors import PlanError
from looprail.layout import PHASE_DIR_PATTERN, normalize_phase_number
from looprail.layout import PHASES_DIR as LAYOUT_PHASES_DIR
from looprail.plans.planfile import Plan, plan_id_from_filename, read_plan
from looprail.plans.waves import (
    bare_dependency_warnings,
    canonical_plan_id,
    resolve_dependencies,
)

PHASES_DIR = Path(LAYOUT_PHASES_DIR)

_PHASE_DIR = PHASE_DIR_PATTERN


class PhaseDir(BaseModel):
    """A phase folder, before anything inside it is read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    number: str  # normalized: "1", "2.1", "12A"
    token: str  # as in the folder name: "01", "02.1"
    slug: str
    dir: Path


class Phase(PhaseDir):
    """A phase folder with its plans parsed (in file-name order, `depends_on` resolved to plan
    ids of this phase) and its artifacts located."""

    plans: list[Plan]
    context_path: Path | None = None
    verification_path: Path | None = None
    uat_path: Path | None = None
    config: dict[str, Any] | None = None  # `.planning/config.json`, None when absent or invalid
    warnings: list[str] = []

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorators over @property
    @property
    def has_context(self) -> bool:
        return self.context_path is not None

    def plan(self, plan_id: str) -> Plan:
        for plan in self.plans:
            if plan.id == plan_id:
                return plan
        raise PlanError(f"{self.dir}: no plan {plan_id!r} in phase {self.number}")

    @property
    def incomplete(self) -> list[str]:
        return [plan.id for plan in self.plans if not plan.has_summary]


def _sort_key(number: str) -> tuple[int, str, tuple[int, ...]]:
    match = re.fullmatch(r"(\d+)([A-Z]?)((?:\.\d+)*)", number)
    assert match is not None  # numbers come from normalize_phase_number
    main, letter, decimals = match.groups()
    return int(main), letter, tuple(int(p) for p in decimals.split(".")[1:])


def list_phases(project: str | Path) -> list[PhaseDir]:
    """Every phase folder under `.planning/phases/`, in phase order. Folders whose name does not
    start with a phase number are not phases and are skipped."""
    root = Path(project) / PHASES_DIR
    if not root.is_dir():
        return []
    found: list[PhaseDir] = []
    for entry in root.iterdir():
        match = _PHASE_DIR.fullmatch(entry.name)
        if match is None or not entry.is_dir():
            continue
        number = normalize_phase_number(match.group("token"))
        assert number is not None
        found.append(
            PhaseDir(
                number=number, token=match.group("token"), slug=match.group("slug") or "", dir=entry
            )
        )
    return sorted(found, key=lambda p: (_sort_key(p.number), p.dir.name))


def require_inside(project: str | Path, path: Path, what: str) -> None:
    """PlanError (one line) when `path`, symlinks followed, leaves the project: a symlinked
    `.planning/`, phase folder or PLAN.md must not make a run read or write outside it."""
    root = Path(project).resolve()
    try:
        real = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise PlanError(
            f"{_relative(path, root)}: {what} cannot be resolved (symlink loop)"
        ) from None
    if real != root and not real.is_relative_to(root):
        raise PlanError(
            f"{_relative(path, root)}: {what} is a symlink to {real}, outside the project; "
            "refused (move it into the project)"
        )


def find_phase(project: str | Path, phase: str) -> PhaseDir:
    """The one folder of phase `phase` (`1`, `01`, `2.1`, ...). PlanError when there is none (the
    message lists the phases found) or more than one."""
    phases = list_phases(project)
    wanted = normalize_phase_number(str(phase))
    matches = [p for p in phases if p.number == wanted]
    if not matches:
        where = PHASES_DIR.as_posix()
        if not (Path(project) / PHASES_DIR).is_dir():
            raise PlanError(f"{where}: phase {phase} not found: no {where}/ folder in {project}")
        found = ", ".join(p.number for p in phases) or "none"
        raise PlanError(f"{where}: phase {phase} not found (phases found: {found})")
    if len(matches) > 1:
        names = ", ".join(p.dir.name for p in matches)
        raise PlanError(f"{PHASES_DIR.as_posix()}: phase {phase} is ambiguous: {names}")
    require_inside(project, matches[0].dir, "the phase folder")
    return matches[0]


def load_phase(project: str | Path, phase: str) -> Phase:
    """Find phase `phase` and read it: plans parsed, summaries matched, dependencies resolved,
    artifacts located. Raises PlanError (one line) for any invalid plan or dependency."""
    project = Path(project).resolve()
    located = find_phase(project, phase)
    config, warnings = load_project_config(project)
    names = sorted(entry.name for entry in located.dir.iterdir() if entry.is_file())

    summaries = {
        canonical_plan_id(name.removesuffix("-SUMMARY.md")): located.dir / name
        for name in names
        if name.endswith("-SUMMARY.md")
    }
    plans: list[Plan] = []
    for name in names:
        plan_id = plan_id_from_filename(name)
        if plan_id is None:
            if "PLAN" in name and name.endswith(".md") and "-PLAN-OUTLINE" not in name:
                warnings.append(
                    f"{_relative(located.dir / name, project)}: looks like a plan but is not "
                    f"named {{phase}}-{{plan}}-PLAN.md; skipped"
                )
            continue
        path = located.dir / name
        require_inside(project, path, "the plan")
        plan = read_plan(path, display=_relative(path, project))
        summary = summaries.get(canonical_plan_id(plan_id))
        update = {
            "has_summary": summary is not None,
            "summary_path": summary,
            "halted": summary is not None and summary_halted(summary),
        }
        plans.append(plan.model_copy(update=update))
        warnings.extend(_plan_warnings(plan, project))
    warnings.extend(bare_dependency_warnings(plans, root=project))

    return Phase(
        number=located.number,
        token=located.token,
        slug=located.slug,
        dir=located.dir,
        plans=resolve_dependencies(plans, root=project),
        context_path=_artifact(located.dir, names, "CONTEXT.md"),
        verification_path=_artifact(located.dir, names, "VERIFICATION.md"),
        uat_path=_artifact(located.dir, names, "UAT.md"),
        config=config,
        warnings=warnings,
    )


def summary_halted(path: Path) -> bool:
    """Does this SUMMARY say `status: halted` (a designed stop)? Read as the reference reads
    it: its frontmatter line reader, a trailing ` # comment` dropped, case ignored. An
    unreadable SUMMARY is not halted (it counts as done, as there)."""
    from looprail.hooks.checks import reference_frontmatter

    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return False
    status = reference_frontmatter(text).get("status")
    if not isinstance(status, str):
        return False
    return re.sub(r"\s+#.*$", "", status).strip().lower() == "halted"


def phase_spelling(number: str) -> str:
    """The phase as the reference's plan-index prints it: the integer part padded to two
    digits (`1` → `01`, `2.1` → `02.1`, `12A` → `12A`)."""
    match = re.match(r"(\d+)(.*)", number)
    return match.group(1).zfill(2) + match.group(2) if match else number


def plan_index(project: str | Path, phase: Phase) -> dict[str, Any]:
    """The `phase plan-index` view of a loaded phase (the shape of the reference's
    `phase-plan-index`, plus `declared_wave`, `sequential_waves` and `warnings`). Raises
    PlanError for a dependency cycle."""
    from looprail.plans.waves import compute_waves, halt_blocked

    project = Path(project).resolve()
    waves = compute_waves(phase.plans, root=project)
    blocked = halt_blocked(phase.plans)
    return {
        "phase": phase_spelling(phase.number),
        "phase_dir": _relative(phase.dir, project),
        "plans": [
            {
                "id": plan.id,
                "wave": waves.effective_wave[plan.id],
                "declared_wave": plan.wave,
                "depends_on": plan.depends_on,
                "autonomous": plan.autonomous,
                "objective": plan.objective_line,
                "files_modified": plan.files_modified,
                "task_count": plan.task_count,
                "has_summary": plan.has_summary,
                "halted": plan.halted,
                "blocked_by": blocked.get(plan.id, []),
            }
            for plan in phase.plans
        ],
        "waves": {str(wave.number): wave.plan_ids for wave in waves.waves},
        "incomplete": phase.incomplete,
        "runnable": [pid for pid in phase.incomplete if pid not in blocked],
        "has_checkpoints": any(not p.autonomous or p.has_checkpoints for p in phase.plans),
        "sequential_waves": {
            str(wave.number): wave.overlap_files for wave in waves.waves if not wave.parallel_safe
        },
        "warnings": [*phase.warnings, *waves.warnings],
    }


def _artifact(directory: Path, names: list[str], suffix: str) -> Path | None:
    """`SUFFIX` itself, else the first `*-SUFFIX` / `*SUFFIX` in name order."""
    if suffix in names:
        return directory / suffix
    return next((directory / n for n in names if n.endswith(suffix)), None)


def _relative(path: Path, project: Path) -> str:
    try:
        return path.relative_to(project).as_posix()
    except ValueError:
        return str(path)


def _plan_warnings(plan: Plan, project: Path) -> list[str]:
    """Contradictions worth saying that do not stop anything: a `plan:` number that is not the
    file name's (the file name wins), checkpoint tasks in a plan marked autonomous."""
    where = _relative(plan.path, project)
    warnings: list[str] = []
    match = re.fullmatch(r".+-(\d+)", plan.id)
    declared = plan.plan
    if match and declared and declared.isdigit() and int(declared) != int(match.group(1)):
        warnings.append(
            f"{where}: frontmatter plan: {declared} disagrees with the file name "
            f"(plan {match.group(1)}); using {plan.id}"
        )
    if plan.autonomous and plan.has_checkpoints:
        warnings.append(f"{where}: has checkpoint tasks but autonomous is not false")
    # Paths a plan names are the project's: one outside it is worth a word before an agent
    # is told to write there (read_first outside the project halts the task at run time).
    fields = [("files_modified", p) for p in plan.files_modified]
    fields += [(f"{t.id} files", p) for t in plan.tasks for p in t.files]
    for field, rel in fields:
        if _escapes(rel):
            warnings.append(f"{where}: {field}: {rel!r} points outside the project")
    return warnings


def _escapes(rel: str) -> bool:
    return rel.startswith(("/", "~")) or ".." in rel.replace("\\", "/").split("/")
