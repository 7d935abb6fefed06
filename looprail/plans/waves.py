"""Waves: which plans of a phase run together, computed from `depends_on` (pure, `graphlib`;
the rules: docs/plans.md, "Waves"). The DAG wins over a declared `wave` (a warning only).
"""

from __future__ import annotations

import graphlib
import posixpath
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from looprail.errors import PlanError
from looprail.layout import PLAN_ID_RE, canonical_plan_id, reference_canonical_id
from looprail.plans.planfile import Plan


class Wave(BaseModel):
    """One wave: its plans in plan order, which are not done, and whether they run together."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    number: int
    plan_ids: list[str]
    pending: list[str]  # no SUMMARY yet, or one that says `status: halted` (never re-run)
    parallel_safe: bool  # False: run plan_ids one after the other
    overlap_files: list[str]  # files_modified entries shared by two or more plans of the wave


class WavePlan(BaseModel):
    """The waves of a phase in execution order."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    waves: list[Wave]
    effective_wave: dict[str, int]  # plan id → wave number
    depends_on: dict[str, list[str]]  # plan id → plan ids it depends on (resolved)
    warnings: list[str]

    def wave(self, number: int) -> Wave | None:
        return next((w for w in self.waves if w.number == number), None)


@lru_cache(maxsize=8192)
def _plan_part(plan_id: str) -> str | None:
    match = re.fullmatch(PLAN_ID_RE, plan_id)
    return canonical_plan_id(match.group("plan")) if match else None


def relative(path: Path, root: Path | None) -> str:
    """`path` as errors and warnings show it: relative to `root` when inside it."""
    if root is not None:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            pass
    return str(path)


class _Index:
    """How a phase's `depends_on` entries find their plans: the reference's two rules first
    (the id case-folded; its canonical `<phase>-<NN>`), then looprail's, which it drops (zero
    padding ignored, a bare plan number, a short-named plan's `<phase>-<plan>`)."""

    def __init__(self, plans: Sequence[Plan] | Sequence[str], phase: str | None):
        ids = [p if isinstance(p, str) else p.id for p in plans]
        self.exact = {pid.lower(): pid for pid in ids}
        self.ref_canonical = {reference_canonical_id(pid).lower(): pid for pid in ids}
        self.padded: dict[str, list[str]] = {}
        self.by_part: dict[str, list[str]] = {}
        phase_key = canonical_plan_id(phase) if phase else None
        for pid in ids:
            keys = {canonical_plan_id(pid), canonical_plan_id(reference_canonical_id(pid))}
            if phase_key is not None and re.fullmatch(PLAN_ID_RE, pid) is None:
                keys.add(f"{phase_key}-{canonical_plan_id(pid)}")  # `01-PLAN.md` is 28-01
            for key in keys:
                self.padded.setdefault(key, []).append(pid)
            part = _plan_part(reference_canonical_id(pid))
            if part is not None:
                self.by_part.setdefault(part, []).append(pid)

    def find(self, dep: str) -> tuple[str | None, bool]:
        """(the plan id `dep` names, whether the reference finds it too)."""
        lower = dep.strip().lower()
        if lower in self.exact:
            return self.exact[lower], True
        if lower in self.ref_canonical:
            return self.ref_canonical[lower], True
        key = canonical_plan_id(dep)
        for table in (self.padded, self.by_part):
            hits = list(dict.fromkeys(table.get(key, [])))
            if len(hits) == 1:
                return hits[0], False
        return None, False


def resolve_dependencies(
    plans: Sequence[Plan], *, root: Path | None = None, phase: str | None = None
) -> list[Plan]:
    """The plans with each `depends_on` entry rewritten to the id of a plan of this phase
    (`phase` lets `28-01` name `01-PLAN.md`); an entry naming none moves to
    `outside_depends_on`, as written (no edge here; `load_phase` checks it is finished).
    PlanError for two plans with the same id. Idempotent."""
    by_canonical: dict[str, Plan] = {}
    for plan in plans:
        key = canonical_plan_id(plan.id)
        if key in by_canonical:
            other = by_canonical[key]
            raise PlanError(
                f"{relative(plan.path, root)}: duplicate plan id {plan.id!r} in one phase "
                f"(also {other.path.name})"
            )
        by_canonical[key] = plan
    index = _Index(plans, phase)
    resolved: list[Plan] = []
    for plan in plans:
        deps: list[str] = []
        outside = list(plan.outside_depends_on)
        for dep in plan.depends_on:
            target, _ = index.find(dep)
            if target is None:
                if dep not in outside:
                    outside.append(dep)
            elif target not in deps and target != plan.id:
                deps.append(target)
            elif target == plan.id:
                deps.append(target)  # a self-dependency: the cycle check names it
        if deps != plan.depends_on or outside != plan.outside_depends_on:
            plan = plan.model_copy(update={"depends_on": deps, "outside_depends_on": outside})
        resolved.append(plan)
    return resolved


def halt_blocked(plans: Sequence[Plan]) -> dict[str, list[str]]:
    """For each plan downstream of a halted plan, the halted plan(s) it waits on, in the
    reference's plan-index order. `depends_on` must be resolved."""
    by_id = {p.id: p for p in plans}
    blocked: dict[str, list[str]] = {}
    for plan_id in _topological(plans):
        causes: dict[str, None] = {}
        for dep in by_id[plan_id].depends_on:
            if dep not in by_id:
                continue
            if by_id[dep].halted:
                causes[dep] = None
            causes.update(dict.fromkeys(blocked.get(dep, ())))
        if causes:
            blocked[plan_id] = list(causes)
    return blocked


def unmet_blocked(plans: Sequence[Plan]) -> dict[str, list[str]]:
    """For each plan that waits on an unfinished plan of another phase (`Plan.unmet`), directly
    or through plans of its phase, the reasons. `depends_on` must be resolved."""
    by_id = {p.id: p for p in plans}
    out: dict[str, list[str]] = {}
    for plan_id in _topological(plans):
        reasons = dict.fromkeys(by_id[plan_id].unmet)
        for dep in by_id[plan_id].depends_on:
            if dep in out:
                reasons.update(
                    dict.fromkeys(
                        f"via plan {dep}: {r}" if not r.startswith("via") else r for r in out[dep]
                    )
                )
        if reasons:
            out[plan_id] = list(reasons)
    return out


def _topological(plans: Sequence[Plan]) -> list[str]:
    """Kahn's order, plans in file order when free: the order the reference walks."""
    indegree = {p.id: 0 for p in plans}
    dependents: dict[str, list[str]] = {p.id: [] for p in plans}
    for plan in plans:
        for dep in plan.depends_on:
            if dep in dependents:
                dependents[dep].append(plan.id)
                indegree[plan.id] += 1
    queue = [p.id for p in plans if indegree[p.id] == 0]
    for current in queue:  # the list grows while it is walked
        for nxt in dependents[current]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                queue.append(nxt)
    return queue


def bare_dependency_warnings(
    plans: Sequence[Plan], *, root: Path | None = None, phase: str | None = None
) -> list[str]:
    """A warning for each entry looprail resolves and the reference drops (`"02"`, `"1-2"`):
    its waves then differ. (Plans as parsed, before `resolve_dependencies`.)"""
    index = _Index(plans, phase)
    warnings = []
    for plan in plans:
        for dep in plan.depends_on:
            target, reference_too = index.find(dep)
            if target is not None and not reference_too:
                warnings.append(
                    f"{relative(plan.path, root)}: depends_on {dep!r} is read as plan {target}; "
                    f"the reference drops {'a bare plan number' if '-' not in dep else 'it'} "
                    f"(write {target!r} to agree)"
                )
    return warnings


def compute_waves(plans: Sequence[Plan], *, root: Path | None = None) -> WavePlan:
    """Group a phase's plans into waves; PlanError for a cycle or a duplicate plan id. What
    depends on the plans' shape is cached by it (a run asks again after every wave)."""
    plans = _resolved(plans, root)
    shape = tuple((p.id, tuple(p.depends_on), p.wave, tuple(p.files_modified)) for p in plans)
    try:
        layout = _layout(shape)
    except _Cycle as exc:
        members = exc.members
        first = next(p for p in plans if p.id == members[0])
        chain = " → ".join([*members, members[0]])
        raise PlanError(
            f"{relative(first.path, root)}: depends_on: plans form a cycle: {chain}"
        ) from None
    effective, groups, overlaps, warnings = layout
    done = {p.id: p.has_summary and not p.halted for p in plans}  # a halted plan is not done
    # Built from validated plans and computed values: construct, do not validate again.
    waves = [
        Wave.model_construct(
            number=number,
            plan_ids=list(ids),
            pending=[pid for pid in ids if not done[pid]],
            parallel_safe=not overlaps[number],
            overlap_files=list(overlaps[number]),
        )
        for number, ids in groups
    ]
    return WavePlan.model_construct(
        waves=waves,
        effective_wave=dict(effective),
        depends_on={plan.id: list(plan.depends_on) for plan in plans},
        warnings=list(warnings),
    )


# The last dependency shape whose resolution changed no plan: it resolves the same again.
_RESOLVED_AS_IS: list[tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]] = []


def _resolved(plans: Sequence[Plan], root: Path | None) -> list[Plan]:
    """`resolve_dependencies(plans)`, skipped when these needed no change last time."""
    key = tuple((p.id, tuple(p.depends_on), tuple(p.outside_depends_on)) for p in plans)
    if _RESOLVED_AS_IS and _RESOLVED_AS_IS[0] == key:
        return list(plans)
    resolved = resolve_dependencies(plans, root=root)
    if all(a is b for a, b in zip(resolved, plans, strict=True)):
        _RESOLVED_AS_IS[:] = [key]
    return resolved


class _Cycle(Exception):
    def __init__(self, members: list[str]):
        self.members = members


_Shape = tuple[tuple[str, tuple[str, ...], int | None, tuple[str, ...]], ...]
_Layout = tuple[
    dict[str, int], list[tuple[int, tuple[str, ...]]], dict[int, tuple[str, ...]], tuple[str, ...]
]


@lru_cache(maxsize=64)
def _layout(shape: _Shape) -> _Layout:
    """Effective waves, the plan ids of each wave (plan order), overlapping files per wave and
    declared-wave warnings, for plans of this shape (ids, resolved deps, wave, files)."""
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for pid, deps, _, _ in shape:
        sorter.add(pid, *deps)
    try:
        sorter.prepare()
    except graphlib.CycleError:
        raise _Cycle(_find_cycle(shape)) from None
    # Kahn's batches are networkx's topological generations: level = longest path from a root.
    level: dict[str, int] = {}
    depth = 0
    while sorter.is_active():
        ready = sorter.get_ready()
        for node in ready:
            level[node] = depth
        sorter.done(*ready)
        depth += 1
    offset = 0 if any(wave == 0 for _, _, wave, _ in shape) else 1
    effective = {pid: level[pid] + offset for pid, _, _, _ in shape}
    warnings = tuple(
        f"plan {pid}: declared wave {wave} but depends_on places it in wave {effective[pid]}"
        for pid, _, wave, _ in shape
        if wave is not None and wave != effective[pid]
    )
    members: dict[int, list[str]] = {}
    owners: dict[int, dict[str, set[str]]] = {}
    for pid, _, _, files in shape:
        number = effective[pid]
        members.setdefault(number, []).append(pid)
        by_path = owners.setdefault(number, {})
        for path in files:
            by_path.setdefault(normalize_path(path), set()).add(pid)
    groups = [(number, tuple(members[number])) for number in sorted(members)]
    overlaps = {
        number: tuple(sorted(p for p, ids in owners[number].items() if len(ids) > 1))
        for number in members
    }
    return effective, groups, overlaps, warnings


def _find_cycle(shape: _Shape) -> list[str]:
    """The cycle networkx's `find_cycle` reports (the first a depth-first search meets, in
    insertion order), as its member nodes from where it closes."""
    succ: dict[str, list[str]] = {pid: [] for pid, _, _, _ in shape}
    for pid, deps, _, _ in shape:
        for dep in deps:
            if pid not in succ[dep]:
                succ[dep].append(pid)
    finished: set[str] = set()
    for start in succ:
        if start in finished:
            continue
        path = [start]
        on_path = {start}
        stack = [iter(succ[start])]
        while stack:
            head = next(stack[-1], None)
            if head is None:
                stack.pop()
                node = path.pop()
                finished.add(node)
                on_path.discard(node)
                continue
            if head in on_path:
                return path[path.index(head) :]
            if head in finished:
                continue
            path.append(head)
            on_path.add(head)
            stack.append(iter(succ[head]))
    raise AssertionError("graphlib found a cycle that a depth-first search did not")


def normalize_path(path: str) -> str:
    """`./src/a.py`, `src//a.py` and `` `src/a.py` `` name the same file as `src/a.py`."""
    return posixpath.normpath(path.strip().strip("`").replace("\\", "/"))
