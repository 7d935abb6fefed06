"""A phase read: its plans parsed, each paired with its SUMMARY (the plan is done), dependencies
resolved, its CONTEXT, VERIFICATION and UAT files located; `plan_index` is pure over a `Phase`.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from pydantic import Field, computed_field

from looprail.config import load_project_config
from looprail.errors import PlanError
from looprail.fsutil import RACY_NS, require_inside
from looprail.layout import PROJECT_CONFIG_FILE, Summaries, summary_of
from looprail.layout import normalize_phase_number as normalize_phase_number  # re-exported
from looprail.plans.folders import PHASES_DIR as PHASES_DIR  # re-exported
from looprail.plans.folders import (
    PhaseDir,
    artifact,
    check_outside,
    find_phase,
    looks_like_plan,
    phase_spelling,
    plan_superseded,
    stray_plans,
    stray_warnings,
    summary_halted,
)
from looprail.plans.folders import list_phases as list_phases  # re-exported
from looprail.plans.folders import two_folders_message as two_folders_message  # re-exported
from looprail.plans.planfile import Plan, plan_id_from_filename, read_plan, unknown_key_warnings
from looprail.plans.waves import (
    bare_dependency_warnings,
    compute_waves,
    halt_blocked,
    relative,
    resolve_dependencies,
    unmet_blocked,
)


class Phase(PhaseDir):
    """A phase folder with its plans parsed (`depends_on` resolved) and its artifacts located."""

    plans: list[Plan]
    context_path: Path | None = None
    verification_path: Path | None = None
    uat_path: Path | None = None
    config: dict[str, Any] | None = None  # `.planning/config.json`, None when absent or invalid
    warnings: list[str] = Field(default_factory=list)
    # plan files in subfolders (not read; a run refuses to plan over them)
    stray_plans: list[str] = Field(default_factory=list)

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


def load_phase(project: str | Path, phase: str, *, as_reference: bool = False) -> Phase:
    """Find phase `phase` and read it; PlanError (one line) for a plan that cannot be read.
    `as_reference`: see `find_phase`."""
    return PhaseCache(project, phase, as_reference=as_reference).load()


_StatKey = tuple[int, ...]
_Entries = list[tuple[str, list[str]]]  # (file name, its warnings), in name order


class PhaseCache:
    """A phase kept in memory for a run: `load()` is `load_phase`, re-parsing only plans whose
    stat changed; unchanged, the very same `Phase` object. `signature`: what the last `load()`
    saw (folder, names, stats). `racy`: a plan changed too recently for its stat to vouch."""

    def __init__(self, project: str | Path, phase: str, *, as_reference: bool = False):
        self.project = Path(project).resolve()
        self.token = phase
        self._as_reference = as_reference
        self.signature: tuple[object, ...] | None = None
        self._phase: Phase | None = None
        # file name → (stat key, parsed plan, its warnings); a renamed phase folder re-reads
        self._plans: dict[str, tuple[_StatKey, Plan, list[str]]] = {}
        self._resolved: tuple[list[Plan], list[Plan]] | None = None  # parsed → resolved
        self._marked: dict[str, tuple[Plan, str, Plan]] = {}  # plans with their SUMMARY
        # (names, stat keys) → parsed plans, each file's warnings, dependency warnings
        self._parsed: tuple[object, list[Plan], _Entries, list[str]] | None = None
        self._listing: tuple[str, _StatKey | None, list[str]] | None = None  # folder, stat, names
        self.racy = False
        self._config: tuple[_StatKey | None, dict[str, Any] | None, list[str]] = (None, None, [])

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
        if signature == self.signature and self._phase is not None and not self.racy:
            return self._phase
        if self.signature is not None and self.signature[0] != folder:
            self._plans, self._resolved, self._marked, self._parsed = {}, None, {}, None
        phase = self._build(located, names, keys, config_key)
        self.signature, self._phase = signature, phase
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
                warnings.append(f"{relative(located.dir / name, self.project)}: {note}")
            warnings.extend(plan_warnings)
        warnings.extend(dependency_warnings)
        plans = self._mark_summaries(located, self._resolve(located, parsed), paired)
        plans, unmet_warnings = check_outside(self.project, located, plans)
        with os.scandir(located.dir) as listing:
            subdirs = sorted(e.name for e in listing if e.is_dir())
        stray = stray_plans(self.project, located.dir, subdirs) if subdirs else []
        warnings += unmet_warnings + stray_warnings(self.project, located, stray)
        # Every part is already validated (plans are `Plan`s): construct, do not validate again.
        return Phase.model_construct(
            number=located.number,
            token=located.token,
            slug=located.slug,
            dir=located.dir,
            plans=plans,
            context_path=artifact(self.project, located.dir, names, "CONTEXT.md"),
            verification_path=artifact(self.project, located.dir, names, "VERIFICATION.md"),
            uat_path=artifact(self.project, located.dir, names, "UAT.md"),
            config=config,
            warnings=warnings,
            stray_plans=stray,
        )

    def _parse_all(
        self, located: PhaseDir, names: list[str], keys: dict[str, _StatKey | None]
    ) -> tuple[list[Plan], _Entries, list[str]]:
        """The plans, their warnings and the dependency warnings, again only when a plan changed."""
        others = [name for name in names if not name.endswith("-SUMMARY.md")]
        if self._parsed is not None and self._parsed[0] == (others, keys) and not self.racy:
            return self._parsed[1], self._parsed[2], self._parsed[3]
        parsed, entries = self._parse(located, others, keys)
        deps = bare_dependency_warnings(parsed, root=self.project, phase=located.number)
        self._parsed = ((others, keys), parsed, entries, deps)
        return parsed, entries, deps

    def _resolve(self, located: PhaseDir, parsed: list[Plan]) -> list[Plan]:
        """Dependencies depend on the plans only, not on their SUMMARYs: resolved once (by
        identity: the cache holds the objects, so no id is reused)."""
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
        """Each plan with a SUMMARY copied with `has_summary`, `summary_path` and `halted` (the
        copy kept while the plan and its SUMMARY's name stay)."""
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
        """The folder's plans (parsing only files whose stat changed) and each file's warnings."""
        entries: _Entries = []
        parsed: list[Plan] = []
        keep: dict[str, tuple[_StatKey, Plan, list[str]]] = {}
        self.racy = False
        for name in names:
            if plan_id_from_filename(name) is None:
                if looks_like_plan(name):
                    warning = (
                        f"{relative(located.dir / name, self.project)}: looks like a plan but "
                        f"is not named {{phase}}-{{plan}}-PLAN.md; skipped"
                    )
                    entries.append((name, [warning]))
                continue
            key = keys.get(name) or ()
            cached = self._plans.get(name)
            if cached is None or cached[0] != key:
                path = located.dir / name
                require_inside(self.project, path, "the plan")
                plan = read_plan(path, display=relative(path, self.project))
                cached = (key, plan, _plan_warnings(plan, self.project))
            if _racy(key):  # a second write of the same size could keep this stat
                self.racy = True
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


def _racy(key: _StatKey | None) -> bool:
    if not key:  # unreadable: nothing cached to distrust
        return False
    return time.time_ns() - max(key[0], key[1]) < RACY_NS  # read again: the racy-clean rule


def _stat_key(path: str) -> _StatKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def plan_index(project: str | Path, phase: Phase) -> dict[str, Any]:
    """The `phase plan-index` view of a loaded phase (the reference's `phase-plan-index`, plus
    `declared_wave`, `sequential_waves` and `warnings`); PlanError for a dependency cycle."""
    project = Path(project).resolve()
    waves = compute_waves(phase.plans, root=project)
    blocked = halt_blocked(phase.plans)
    waiting = unmet_blocked(phase.plans)
    return {
        "phase": phase_spelling(phase.number),
        "phase_dir": relative(phase.dir, project),
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


def _plan_warnings(plan: Plan, project: Path) -> list[str]:
    """Contradictions worth saying that stop nothing (a `plan:` number that is not the file
    name's, checkpoint tasks in an autonomous plan, paths outside the project)."""
    where = relative(plan.path, project)
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
    fields = [("files_modified", p) for p in plan.files_modified]
    fields += [(f"{t.id} files", p) for t in plan.tasks for p in t.files]
    for field, rel in fields:
        if rel.startswith(("/", "~")) or ".." in rel.replace("\\", "/").split("/"):
            warnings.append(f"{where}: {field}: {rel!r} points outside the project")
    return warnings
