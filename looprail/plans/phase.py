"""A project's phases: `.planning/phases/<NN-slug>/` and what is in it.

`01-setup` is phase 1 (also asked for as `01`), `02.1-hotfix` is phase 2.1. Inside a phase folder
looprail reads `{phase}-{plan}-PLAN.md` files, notices a plan's `{phase}-{plan}-SUMMARY.md` (the
plan is done), and the phase artifacts `CONTEXT.md` / `NN-CONTEXT.md`, `*VERIFICATION.md` and
`*UAT.md`. Reading is the only effect here; `plan_index` is pure over a loaded `Phase`.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from looprail.config import load_project_config
from looprail.errors import OutsideProjectError, PlanError
from looprail.frontmatter import reference_frontmatter
from looprail.fsutil import contained_file, require_inside
from looprail.layout import (
    PHASE_DIR_PATTERN,
    PLAN_ID_PATTERN,
    PROJECT_CONFIG_FILE,
    Summaries,
    normalize_phase_number,
    phase_artifact,
    phase_sort_key,
    scan_phase_dirs,
    summary_of,
)
from looprail.layout import PHASES_DIR as LAYOUT_PHASES_DIR
from looprail.plans.planfile import Plan, plan_id_from_filename, read_plan, unknown_key_warnings
from looprail.plans.waves import (
    _Index,
    bare_dependency_warnings,
    compute_waves,
    halt_blocked,
    resolve_dependencies,
    unmet_blocked,
)

PHASES_DIR = Path(LAYOUT_PHASES_DIR)

_PHASE_DIR = PHASE_DIR_PATTERN


class PhaseDir(BaseModel):
    """A phase folder, before anything inside it is read."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

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
    # plan files in subfolders (a `/` in a phase title made one): not read, and a run refuses
    # to plan over them
    stray_plans: list[str] = []

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


_sort_key = phase_sort_key


def list_phases(project: str | Path) -> list[PhaseDir]:
    """Every phase folder under `.planning/phases/`, in phase order. Folders whose name does not
    start with a phase number are not phases and are skipped."""
    return [
        PhaseDir(number=number, token=token, slug=slug, dir=Path(path))
        for number, token, slug, path in scan_phase_dirs(project)
    ]


def find_phase(project: str | Path, phase: str, *, as_reference: bool = False) -> PhaseDir:
    """The one folder of phase `phase` (`1`, `01`, `2.1`, ...). PlanError when there is none (the
    message lists the phases found) or more than one. `as_reference`: of two folders for one
    phase, take the one the reference reads (its token padded to two digits: `04-x`, not
    `4-x`), as `plan-index` does."""
    phases = list_phases(project)
    wanted = normalize_phase_number(str(phase))
    matches = [p for p in phases if p.number == wanted]
    if len(matches) > 1 and as_reference:
        padded = [p for p in matches if p.token.upper() == phase_spelling(p.number).upper()]
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
    keep = next(
        (p.dir.name for p in matches if p.token.upper() == phase_spelling(p.number).upper()),
        names[0],
    )
    others = ", ".join(n for n in names if n != keep)
    return (
        f"phase {phase} has {len(names)} folders: {', '.join(names)}; move the files of "
        f"{others} into {keep} (the one the reference reads) and remove {others}"
    )


def load_phase(project: str | Path, phase: str, *, as_reference: bool = False) -> Phase:
    """Find phase `phase` and read it: plans parsed, summaries matched, dependencies resolved,
    artifacts located. Raises PlanError (one line) for a plan that cannot be read.
    `as_reference`: see `find_phase`."""
    return PhaseCache(project, phase, as_reference=as_reference).load()


def _looks_like_plan(name: str) -> bool:
    return (
        "PLAN" in name
        and name.endswith(".md")
        and "-OUTLINE" not in name
        and "PLAN-REVIEW" not in name
        and not name.endswith("-SUMMARY.md")
    )


def plan_superseded(plan: Plan) -> bool:
    """`status: superseded` in the frontmatter: a retired plan, neither scheduled nor counted
    (as in the reference)."""
    status = plan.extra.get("status")
    return isinstance(status, str) and status.strip().lower() == "superseded"


def check_outside(
    project: Path, located: PhaseDir, plans: list[Plan]
) -> tuple[list[Plan], list[str]]:
    """Each plan's `outside_depends_on` looked up: a finished plan of another phase (its SUMMARY
    exists and is not halted) is satisfied; anything else is `unmet` (the run halts the plan,
    with this reason) and warned about."""
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
                f"{_relative(plan.path, project)}: depends_on: {reason}; the run halts plan "
                f"{plan.id} there"
            )
    return out, warnings


def _outside_status(
    project: Path,
    located: PhaseDir,
    dep: str,
    folders: dict[str, tuple[PhaseDir | None, list[str]]],
) -> str | None:
    match = PLAN_ID_PATTERN.fullmatch(dep.strip())
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
        return f"{dep!r} is no plan of phase {phase} ({_relative(other.dir, project)})"
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
            if _looks_like_plan(path.name) and path.is_file():
                found.append(_relative(path, project))
    return found


def _stray_warnings(project: Path, located: PhaseDir, stray: list[str]) -> list[str]:
    if not stray:
        return []
    shown = ", ".join(stray[:3]) + (f" and {len(stray) - 3} more" if len(stray) > 3 else "")
    return [
        f"{_relative(located.dir, project)}: {len(stray)} plan file(s) sit in subfolders and are "
        f"not read: {shown} (a '/' in the phase title?); move them into "
        f"{_relative(located.dir, project)}/"
    ]


def summary_halted(path: Path) -> bool:
    """Does this SUMMARY say `status: halted` (a designed stop)? Read as the reference reads
    it: its frontmatter line reader, a trailing ` # comment` dropped, case ignored. An
    unreadable SUMMARY is not halted (it counts as done, as there)."""
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


_StatKey = tuple[int, ...]
_Entries = list[tuple[str, list[str]]]  # (file name, its warnings), in name order


class PhaseCache:
    """A phase kept in memory for a run: `load()` is `load_phase`, but only lists the folder and
    stats what can change (the plan files, `.planning/config.json`, the folder itself). A plan
    file is parsed again only when its stat changed; a new SUMMARY only flips that plan's
    `has_summary`. Unchanged → the very same `Phase` object, so callers can cache what they
    derive from it (waves) by identity.

    A plan edited in place within the same nanosecond, to the same size, is not seen (the stat
    is the key, as for `make`); every edit through a rename or a later write is."""

    def __init__(self, project: str | Path, phase: str, *, as_reference: bool = False):
        self.project = Path(project).resolve()
        self.token = phase
        self._as_reference = as_reference
        self._signature: tuple[object, ...] | None = None
        self._phase: Phase | None = None
        # file name → (stat key, parsed plan, its warnings); a renamed phase folder re-reads
        self._plans: dict[str, tuple[_StatKey, Plan, list[str]]] = {}
        self._resolved: tuple[list[Plan], list[Plan]] | None = None  # parsed → resolved
        self._marked: dict[str, tuple[Plan, str, Plan]] = {}  # plans with their SUMMARY
        # (names, stat keys) → parsed plans, each file's warnings, dependency warnings
        self._parsed: tuple[object, list[Plan], _Entries, list[str]] | None = None
        self._listing: tuple[str, _StatKey | None, list[str]] | None = None  # folder, stat, names
        self._racy = False  # a plan file changed so recently that its stat cannot be trusted
        self._config: tuple[_StatKey | None, dict[str, Any] | None, list[str]] = (None, None, [])

    @property
    def signature(self) -> tuple[object, ...] | None:
        """What the last `load()` saw (the folder, its file names, the plans' and the config's
        stats); equal signatures, same phase. None before the first load."""
        return self._signature

    @property
    def racy(self) -> bool:
        """A plan changed too recently for its stat to vouch for its content."""
        return self._racy

    def load(self) -> Phase:
        """The phase as `load_phase` reads it, from memory where nothing changed."""
        located = find_phase(self.project, self.token, as_reference=self._as_reference)
        folder = str(located.dir)
        listed = _stat_key(folder)
        if self._listing is not None and self._listing[:2] == (folder, listed):
            names = self._listing[2]  # no file was added, removed or renamed in the folder
        else:
            with os.scandir(folder) as entries:
                names = sorted(e.name for e in entries if e.is_file())
            # A folder changed within the clock's granularity may change again unseen.
            self._listing = (folder, listed, names) if not _racy(listed) else None
        keys = _stat_keys(folder, [name for name in names if plan_id_from_filename(name)])
        config_key = _stat_key(os.path.join(self.project, PROJECT_CONFIG_FILE))
        signature = (folder, names, keys, config_key)
        if signature == self._signature and self._phase is not None and not self._racy:
            return self._phase
        if self._signature is not None and self._signature[0] != folder:
            self._plans, self._resolved, self._marked, self._parsed = {}, None, {}, None
        phase = self._build(located, names, keys, config_key)
        self._signature, self._phase = signature, phase
        return phase

    def _build(
        self,
        located: PhaseDir,
        names: list[str],
        keys: dict[str, _StatKey | None],
        config_key: _StatKey | None,
    ) -> Phase:
        if self._config[0] != config_key or config_key is None:
            config, config_warnings = load_project_config(self.project)
            self._config = (config_key, config, list(config_warnings))
        _, config, warnings = self._config
        warnings = list(warnings)
        parsed, entries, dependency_warnings = self._parse_all(located, names, keys)
        summaries = Summaries(names)
        paired = {p.path.name: summary_of(p.path.name, summaries, located.number) for p in parsed}
        for name, plan_warnings in entries:  # in file order, as the folder lists them
            note = paired[name][1] if name in paired else None
            if note:
                warnings.append(f"{_relative(located.dir / name, self.project)}: {note}")
            warnings.extend(plan_warnings)
        warnings.extend(dependency_warnings)
        plans = self._mark_summaries(located, self._resolve(located, parsed), paired)
        plans, unmet_warnings = check_outside(self.project, located, plans)
        with os.scandir(located.dir) as listing:
            subdirs = sorted(e.name for e in listing if e.is_dir())
        stray = stray_plans(self.project, located.dir, subdirs) if subdirs else []
        warnings += unmet_warnings + _stray_warnings(self.project, located, stray)
        # Every part is already validated (plans are `Plan`s): construct, do not validate again.
        return Phase.model_construct(
            number=located.number,
            token=located.token,
            slug=located.slug,
            dir=located.dir,
            plans=plans,
            context_path=_artifact(self.project, located.dir, names, "CONTEXT.md"),
            verification_path=_artifact(self.project, located.dir, names, "VERIFICATION.md"),
            uat_path=_artifact(self.project, located.dir, names, "UAT.md"),
            config=config,
            warnings=warnings,
            stray_plans=stray,
        )

    def _parse_all(
        self, located: PhaseDir, names: list[str], keys: dict[str, _StatKey | None]
    ) -> tuple[list[Plan], _Entries, list[str]]:
        """The plans, each file's warnings and the dependency warnings, parsed again only when
        a plan file changed (not when only SUMMARY files came or went: a wave finished)."""
        others = [name for name in names if not name.endswith("-SUMMARY.md")]
        if self._parsed is not None and self._parsed[0] == (others, keys) and not self._racy:
            return self._parsed[1], self._parsed[2], self._parsed[3]
        parsed, entries = self._parse(located, others, keys)
        deps = bare_dependency_warnings(parsed, root=self.project, phase=located.number)
        self._parsed = ((others, keys), parsed, entries, deps)
        return parsed, entries, deps

    def _resolve(self, located: PhaseDir, parsed: list[Plan]) -> list[Plan]:
        """Dependencies depend on the plans only, not on which have a SUMMARY: resolved once.
        (Identity, not equality: the cache holds the objects, so no id is ever reused.)"""
        resolved = self._resolved
        if (
            resolved is None
            or len(resolved[0]) != len(parsed)
            or not all(a is b for a, b in zip(resolved[0], parsed, strict=True))
        ):
            plans = resolve_dependencies(parsed, root=self.project, phase=located.number)
            resolved = self._resolved = (parsed, plans)
        return resolved[1]

    def _mark_summaries(
        self, located: PhaseDir, plans: list[Plan], paired: dict[str, tuple[str | None, str | None]]
    ) -> list[Plan]:
        """Each plan with a SUMMARY copied with `has_summary`, `summary_path` and `halted`
        (the copy kept while the plan and its SUMMARY's name stay the same)."""
        out = []
        marked: dict[str, tuple[Plan, str, Plan]] = {}
        for plan in plans:
            summary = paired[plan.path.name][0]
            if summary is not None:
                hit = self._marked.get(plan.id)
                if hit is not None and hit[0] is plan and hit[1] == summary:
                    copy = hit[2]
                else:
                    path = located.dir / summary
                    update = {"has_summary": True, "summary_path": path}
                    copy = plan.model_copy(update={**update, "halted": summary_halted(path)})
                marked[plan.id] = (plan, summary, copy)
                plan = copy
            out.append(plan)
        self._marked = marked
        return out

    def _parse(
        self, located: PhaseDir, names: list[str], keys: dict[str, _StatKey | None]
    ) -> tuple[list[Plan], _Entries]:
        """The folder's plans, parsing only files whose stat changed, and each file's warnings
        (`(name, warnings)` in name order; a superseded plan has none)."""
        entries: _Entries = []
        parsed: list[Plan] = []
        keep: dict[str, tuple[_StatKey, Plan, list[str]]] = {}
        self._racy = False
        for name in names:
            if plan_id_from_filename(name) is None:
                if _looks_like_plan(name):
                    warning = (
                        f"{_relative(located.dir / name, self.project)}: looks like a plan but "
                        f"is not named {{phase}}-{{plan}}-PLAN.md; skipped"
                    )
                    entries.append((name, [warning]))
                continue
            key = keys.get(name) or ()
            cached = self._plans.get(name)
            if cached is None or cached[0] != key:
                path = located.dir / name
                require_inside(self.project, path, "the plan")
                plan = read_plan(path, display=_relative(path, self.project))
                cached = (key, plan, _plan_warnings(plan, self.project))
            if _racy(key):
                # Written within the clock's granularity: a second write of the same size
                # could keep this stat, so read it again next time (as git does, "racy clean").
                self._racy = True
                cached = ((), *cached[1:])
            keep[name] = cached
            if plan_superseded(cached[1]):
                continue
            parsed.append(cached[1])
            entries.append((name, cached[2]))
        self._plans = keep
        return parsed, entries


def _stat_keys(folder: str, names: list[str]) -> dict[str, _StatKey | None]:
    """`_stat_key` of each name in `folder` (relative to an open folder: no path walks)."""
    if os.stat not in os.supports_dir_fd:  # pragma: no cover - Windows
        return {name: _stat_key(os.path.join(folder, name)) for name in names}
    keys: dict[str, _StatKey | None] = {}
    fd = os.open(folder, os.O_RDONLY)
    try:
        for name in names:
            try:
                st = os.stat(name, dir_fd=fd)
            except OSError:
                keys[name] = None
                continue
            keys[name] = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
    finally:
        os.close(fd)
    return keys


_RACY_NS = 50_000_000  # file times tick coarsely (jiffies): anything this fresh is read again


def _racy(key: _StatKey | None) -> bool:
    if not key:  # unreadable: nothing cached to distrust
        return False
    return time.time_ns() - max(key[0], key[1]) < _RACY_NS


def _stat_key(path: str) -> _StatKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def plan_index(project: str | Path, phase: Phase) -> dict[str, Any]:
    """The `phase plan-index` view of a loaded phase (the shape of the reference's
    `phase-plan-index`, plus `declared_wave`, `sequential_waves` and `warnings`). Raises
    PlanError for a dependency cycle."""
    project = Path(project).resolve()
    waves = compute_waves(phase.plans, root=project)
    blocked = halt_blocked(phase.plans)
    waiting = unmet_blocked(phase.plans)
    return {
        "phase": phase_spelling(phase.number),
        "phase_dir": _relative(phase.dir, project),
        "plans": [
            {
                "id": plan.id,
                "wave": waves.effective_wave[plan.id],
                "declared_wave": plan.wave,
                # resolved plan ids of this phase, then the entries naming none, as written
                "depends_on": [*plan.depends_on, *plan.outside_depends_on],
                "autonomous": plan.autonomous,
                "objective": plan.objective_line,
                "files_modified": plan.files_modified,
                "task_count": plan.task_count,
                "has_summary": plan.has_summary,
                "halted": plan.halted,
                "blocked_by": blocked.get(plan.id, []),
                "unmet": waiting.get(plan.id, []),
            }
            for plan in phase.plans
        ],
        "waves": {str(wave.number): wave.plan_ids for wave in waves.waves},
        "incomplete": phase.incomplete,
        "runnable": [pid for pid in phase.incomplete if pid not in blocked],
        # The reference's meaning: a plan marked `autonomous: false` (lint says when a plan has
        # checkpoint tasks without it).
        "has_checkpoints": any(not p.autonomous for p in phase.plans),
        "sequential_waves": {
            str(wave.number): wave.overlap_files for wave in waves.waves if not wave.parallel_safe
        },
        "warnings": [*phase.warnings, *waves.warnings],
    }


def _artifact(project: Path, directory: Path, names: list[str], suffix: str) -> Path | None:
    """`SUFFIX` itself, else the first `*-SUFFIX` / `*SUFFIX` in name order. Its text goes into
    agents' prompts and the loop's checks, so it obeys `read_first`'s rule: inside the project
    once symlinks are followed, and a regular file; anything else refuses the phase (one line),
    so a CONTEXT.md linked to `~/.aws/credentials` or `/proc/self/environ` is never read."""
    name = phase_artifact(names, suffix)
    if name is None:
        return None
    path = directory / name
    if contained_file(project, path) is None:
        require_inside(project, path, f"the phase's {suffix}")
        raise OutsideProjectError(
            f"{_relative(path, project)}: the phase's {suffix} is not a regular file; refused"
        )
    return path


def _relative(path: Path, project: Path) -> str:
    try:
        return path.relative_to(project).as_posix()
    except ValueError:
        return str(path)


def _plan_warnings(plan: Plan, project: Path) -> list[str]:
    """Contradictions worth saying that do not stop anything: a `plan:` number that is not the
    file name's (the file name wins), checkpoint tasks in a plan marked autonomous."""
    where = _relative(plan.path, project)
    warnings: list[str] = list(plan.notes)
    match = re.fullmatch(r".+-(\d+)", plan.id)
    declared = plan.plan
    if match and declared and declared.isdigit() and int(declared) != int(match.group(1)):
        warnings.append(
            f"{where}: frontmatter plan: {declared} disagrees with the file name "
            f"(plan {match.group(1)}); using {plan.id}"
        )
    warnings.extend(unknown_key_warnings(plan, where))
    if plan.autonomous and plan.has_checkpoints:
        warnings.append(
            f"{where}: has checkpoint tasks but autonomous is not false (the reference's "
            "has_checkpoints does not count it)"
        )
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
