"""Phase folders (`.planning/phases/01-setup/` is phase 1), found and told apart, and what the
files beside the plans say (SUMMARYs, artifacts, plans of other phases, stray plan files)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from looprail.errors import OutsideProjectError, PlanError
from looprail.fsutil import contained_file, require_inside
from looprail.layout import PHASES_DIR as LAYOUT_PHASES_DIR
from looprail.layout import (
    PLAN_ID_RE,
    normalize_phase_number,
    phase_artifact,
    scan_phase_dirs,
    summary_of,
)
from looprail.plans.frontmatter import reference_frontmatter
from looprail.plans.planfile import Plan, plan_id_from_filename
from looprail.plans.waves import _Index, relative

PHASES_DIR = Path(LAYOUT_PHASES_DIR)


class PhaseDir(BaseModel):
    """A phase folder, before anything inside it is read."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    number: str  # normalized: "1", "2.1", "12A"
    token: str  # as in the folder name: "01", "02.1"
    slug: str
    dir: Path


def list_phases(project: str | Path) -> list[PhaseDir]:
    """Every phase folder under `.planning/phases/`, in phase order."""
    return [
        PhaseDir(number=number, token=token, slug=slug, dir=Path(path))
        for number, token, slug, path in scan_phase_dirs(project)
    ]


def find_phase(project: str | Path, phase: str, *, as_reference: bool = False) -> PhaseDir:
    """The one folder of phase `phase` (`1`, `01`, `2.1`, ...); PlanError when there is none or
    more than one. `as_reference`: of two folders for one phase, take the one the reference
    reads (`04-x`, not `4-x`), as `plan-index` does."""
    phases = list_phases(project)
    wanted = normalize_phase_number(str(phase))
    matches = [p for p in phases if p.number == wanted]
    if len(matches) > 1 and as_reference:
        padded = [p for p in matches if _padded(p)]
        if len(padded) == 1:
            matches = padded
    if not matches:
        where = PHASES_DIR.as_posix()
        if not (Path(project) / PHASES_DIR).is_dir():
            raise PlanError(f"{where}: phase {phase} not found: no {where}/ folder in {project}")
        found = ", ".join(p.number for p in phases) or "none"
        raise PlanError(f"{where}: phase {phase} not found (phases found: {found})")
    if len(matches) > 1:
        raise PlanError(f"{PHASES_DIR.as_posix()}: {two_folders_message(phase, matches)}")
    require_inside(project, matches[0].dir, "the phase folder")
    return matches[0]


def two_folders_message(phase: str, matches: list[PhaseDir]) -> str:
    names = [p.dir.name for p in matches]
    keep = next((p.dir.name for p in matches if _padded(p)), names[0])
    others = ", ".join(n for n in names if n != keep)
    return (
        f"phase {phase} has {len(names)} folders: {', '.join(names)}; move the files of "
        f"{others} into {keep} (the one the reference reads) and remove {others}"
    )


def _padded(phase: PhaseDir) -> bool:
    """Is the folder's token the one the reference reads (padded to two digits)?"""
    return phase.token.upper() == phase_spelling(phase.number).upper()


def looks_like_plan(name: str) -> bool:
    return (
        "PLAN" in name
        and name.endswith(".md")
        and "-OUTLINE" not in name
        and "PLAN-REVIEW" not in name
        and not name.endswith("-SUMMARY.md")
    )


def plan_superseded(plan: Plan) -> bool:
    """`status: superseded` in the frontmatter: a retired plan, neither scheduled nor counted."""
    status = plan.extra.get("status")
    return isinstance(status, str) and status.strip().lower() == "superseded"


def check_outside(
    project: Path, located: PhaseDir, plans: list[Plan]
) -> tuple[list[Plan], list[str]]:
    """Each plan's `outside_depends_on` looked up: a finished plan of another phase is
    satisfied; anything else is `unmet` (the run halts the plan there), with a warning."""
    if not any(p.outside_depends_on for p in plans):
        return plans, []
    out: list[Plan] = []
    warnings: list[str] = []
    folders: dict[str, tuple[PhaseDir | None, list[str]]] = {}
    for plan in plans:
        unmet = [
            reason
            for dep in plan.outside_depends_on
            if (reason := _outside_status(project, located, dep, folders)) is not None
        ]
        if unmet != plan.unmet:
            plan = plan.model_copy(update={"unmet": unmet})
        out.append(plan)
        for reason in unmet:
            warnings.append(
                f"{relative(plan.path, project)}: depends_on: {reason}; the run halts plan "
                f"{plan.id} there"
            )
    return out, warnings


def _outside_status(
    project: Path,
    located: PhaseDir,
    dep: str,
    folders: dict[str, tuple[PhaseDir | None, list[str]]],
) -> str | None:
    match = re.fullmatch(PLAN_ID_RE, dep.strip())
    phase = normalize_phase_number(match.group("phase")) if match else None
    if phase is None or phase == located.number:
        return f"{dep!r} names no plan of phase {located.number}"
    if phase not in folders:
        try:
            found = find_phase(project, phase, as_reference=True)
            names = sorted(e.name for e in found.dir.iterdir() if e.is_file())
            folders[phase] = (found, names)
        except (PlanError, OSError):
            folders[phase] = (None, [])
    other, names = folders[phase]
    if other is None:
        return f"{dep!r} is a plan of phase {phase}, which has no folder"
    files = {pid: name for name in names if (pid := plan_id_from_filename(name)) is not None}
    target, _ = _Index(list(files), other.number).find(dep)
    if target is None:
        return f"{dep!r} is no plan of phase {phase} ({relative(other.dir, project)})"
    summary, _ = summary_of(files[target], names, other.number)
    if summary is None:
        return f"{dep!r} (phase {phase}) is not finished: it has no SUMMARY"
    if summary_halted(other.dir / summary):
        return f"{dep!r} (phase {phase}) halted ({summary} says status: halted)"
    return None


def stray_plans(project: Path, folder: Path, subdirs: list[str]) -> list[str]:
    """Plan files below the phase folder's subfolders (project-relative), which no one reads."""
    found: list[str] = []
    for sub in subdirs:
        for path in sorted((folder / sub).rglob("*.md")):
            if looks_like_plan(path.name) and path.is_file():
                found.append(relative(path, project))
    return found


def stray_warnings(project: Path, located: PhaseDir, stray: list[str]) -> list[str]:
    if not stray:
        return []
    shown = ", ".join(stray[:3]) + (f" and {len(stray) - 3} more" if len(stray) > 3 else "")
    return [
        f"{relative(located.dir, project)}: {len(stray)} plan file(s) sit in subfolders and are "
        f"not read: {shown} (a '/' in the phase title?); move them into "
        f"{relative(located.dir, project)}/"
    ]


def summary_halted(path: Path) -> bool:
    """Does this SUMMARY say `status: halted` (a designed stop)? Read as the reference reads it
    (a trailing ` # comment` dropped, case ignored); an unreadable one is not halted."""
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


def artifact(project: Path, directory: Path, names: list[str], suffix: str) -> Path | None:
    """`SUFFIX` itself, else the first `*-SUFFIX` / `*SUFFIX`: a regular file inside the project
    once symlinks are followed (its text goes into prompts), else the phase is refused."""
    name = phase_artifact(names, suffix)
    if name is None:
        return None
    path = directory / name
    if contained_file(project, path) is None:
        require_inside(project, path, f"the phase's {suffix}")
        raise OutsideProjectError(
            f"{relative(path, project)}: the phase's {suffix} is not a regular file; refused"
        )
    return path
