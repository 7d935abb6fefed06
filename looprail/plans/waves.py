"""Waves: which plans of a phase run together, computed from `depends_on` (pure).

Effective wave = the plan's level in the `depends_on` DAG (0 for a plan with no dependencies)
plus an offset: 0 when any plan declares `wave: 0`, else 1, so waves are numbered the way the
plans number them. A declared `wave` that disagrees is only a warning: the DAG wins (this is
what the reference `phase-plan-index` does, despite its template saying waves are read as
written). Plans of one wave run in parallel unless two of them modify the same file, in which
case that whole wave runs sequentially, in plan order.

Computed with the stdlib's `graphlib` (networkx stays for diagrams and lint), so the runner's
start path never imports networkx.
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
from looprail.layout import canonical_plan_id as _canonical_plan_id
from looprail.plans.planfile import Plan

_PLAN_ID = re.compile(r"(?P<phase>\d+[A-Za-z]?(?:\.\d+)*)-(?P<plan>.+)")


class Wave(BaseModel):
    """One wave: its plans in plan order, which of them still lack a SUMMARY, and whether they
    may run at the same time."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    number: int
    plan_ids: list[str]
    # plans of this wave not done, in plan order: no SUMMARY yet, or a SUMMARY that says
    # `status: halted` (such a plan is never re-run; it stops the loop at its wave)
    pending: list[str]
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


# The rule lives in layout (the project loop counts plans without the plan layer); cached here.
canonical_plan_id = lru_cache(maxsize=8192)(_canonical_plan_id)


@lru_cache(maxsize=8192)
def _plan_part(plan_id: str) -> str | None:
    match = _PLAN_ID.fullmatch(plan_id)
    return canonical_plan_id(match.group("plan")) if match else None


def _shown(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            pass
    return str(path)


def resolve_dependencies(plans: Sequence[Plan], *, root: Path | None = None) -> list[Plan]:
    """The plans with each `depends_on` entry rewritten to the id of a plan of this phase.

    `"01-02"` matches that plan id (ignoring zero padding and case); a bare `"02"` matches the
    one plan whose plan number is 02. Raises PlanError for two plans with the same id and for a
    dependency on a plan that is not in the phase. Idempotent. Errors show plan paths relative
    to `root` when given.
    """
    by_canonical: dict[str, Plan] = {}
    for plan in plans:
        key = canonical_plan_id(plan.id)
        if key in by_canonical:
            other = by_canonical[key]
            raise PlanError(
                f"{_shown(plan.path, root)}: duplicate plan id {plan.id!r} in one phase "
                f"(also {other.path.name})"
            )
        by_canonical[key] = plan
    by_plan_part: dict[str, list[Plan]] = {}
    for plan in plans:
        part = _plan_part(plan.id)
        if part is not None:
            by_plan_part.setdefault(part, []).append(plan)

    known = ", ".join(p.id for p in plans)
    resolved: list[Plan] = []
    for plan in plans:
        deps: list[str] = []
        for dep in plan.depends_on:
            target = by_canonical.get(canonical_plan_id(dep))
            if target is None and len(by_plan_part.get(canonical_plan_id(dep), [])) == 1:
                target = by_plan_part[canonical_plan_id(dep)][0]
            if target is None:
                raise PlanError(
                    f"{_shown(plan.path, root)}: depends_on: plan {plan.id} depends on {dep!r}, "
                    f"which is not a plan of this phase (plans: {known})"
                )
            if target.id not in deps:
                deps.append(target.id)
        if deps != plan.depends_on:
            plan = plan.model_copy(update={"depends_on": deps})
        resolved.append(plan)
    return resolved


def halt_blocked(plans: Sequence[Plan]) -> dict[str, list[str]]:
    """For each plan downstream of a halted plan, the halted plan(s) it waits on, in the
    order the reference's plan-index lists them (each dependency, then what blocks it).
    `depends_on` must already be resolved (`resolve_dependencies`); a cycle is the caller's
    error to raise (`compute_waves`)."""
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


def bare_dependency_warnings(plans: Sequence[Plan], *, root: Path | None = None) -> list[str]:
    """`depends_on: ["02"]` (a bare plan number) is resolved here to the phase's plan 02; the
    reference's plan-index drops it, so its waves differ. Say so for each such entry."""
    by_canonical = {canonical_plan_id(p.id) for p in plans}
    by_plan_part: dict[str, list[Plan]] = {}
    for plan in plans:
        part = _plan_part(plan.id)
        if part is not None:
            by_plan_part.setdefault(part, []).append(plan)
    warnings = []
    for plan in plans:
        for dep in plan.depends_on:
            key = canonical_plan_id(dep)
            if key not in by_canonical and len(by_plan_part.get(key, [])) == 1:
                target = by_plan_part[key][0].id
                warnings.append(
                    f"{_shown(plan.path, root)}: depends_on {dep!r} is read as plan {target}; "
                    f"the reference drops a bare plan number (write {target!r} to agree)"
                )
    return warnings


def compute_waves(plans: Sequence[Plan], *, root: Path | None = None) -> WavePlan:
    """Group a phase's plans into waves (see the module docstring for the rules). Raises
    PlanError for a cycle, a dangling dependency or a duplicate plan id.

    Stdlib only (`graphlib`), so the runner never imports networkx. What depends on the plans'
    shape (levels, overlaps, warnings) is cached by that shape: a run asks again after every
    wave, when only `has_summary` changed, and pays one pass over the plans."""
    plans = resolve_dependencies(plans, root=root)
    shape = tuple((p.id, tuple(p.depends_on), p.wave, tuple(p.files_modified)) for p in plans)
    try:
        layout = _layout(shape)
    except _Cycle as exc:
        members = exc.members
        first = next(p for p in plans if p.id == members[0])
        chain = " → ".join([*members, members[0]])
        raise PlanError(
            f"{_shown(first.path, root)}: depends_on: plans form a cycle: {chain}"
        ) from None
    effective, groups, overlaps, warnings = layout
    done = {p.id: p.has_summary and not p.halted for p in plans}  # a halted plan is not done
    # Built from validated plans and computed values: construct, do not validate again (a run
    # asks for the waves after every wave).
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


class _Cycle(Exception):
    def __init__(self, members: list[str]):
        self.members = members


_Shape = tuple[tuple[str, tuple[str, ...], int | None, tuple[str, ...]], ...]


@lru_cache(maxsize=64)
def _layout(
    shape: _Shape,
) -> tuple[
    dict[str, int],
    list[tuple[int, tuple[str, ...]]],
    dict[int, tuple[str, ...]],
    tuple[str, ...],
]:
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
            by_path.setdefault(_normalize_path(path), set()).add(pid)
    groups = [(number, tuple(members[number])) for number in sorted(members)]
    overlaps = {
        number: tuple(sorted(p for p, ids in owners[number].items() if len(ids) > 1))
        for number in members
    }
    return effective, groups, overlaps, warnings


def _find_cycle(shape: _Shape) -> list[str]:
    """The cycle networkx's `find_cycle` reports for this graph (the one a depth-first search
    meets first, nodes and edges in insertion order), as its member nodes from where it closes.
    Only called when graphlib has already said there is a cycle."""
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


def _normalize_path(path: str) -> str:
    """`./src/a.py` and `src//a.py` name the same file as `src/a.py`."""
    return posixpath.normpath(path.strip().replace("\\", "/"))
