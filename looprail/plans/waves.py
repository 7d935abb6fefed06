"""Waves: which plans of a phase run together, computed from `depends_on` (pure).

Effective wave = the plan's level in the `depends_on` DAG (0 for a plan with no dependencies)
plus an offset: 0 when any plan declares `wave: 0`, else 1, so waves are numbered the way the
plans number them. A declared `wave` that disagrees is only a warning: the DAG wins (this is
what the reference `phase-plan-index` does, despite its template saying waves are read as
written). Plans of one wave run in parallel unless two of them modify the same file, in which
case that whole wave runs sequentially, in plan order.

networkx is imported inside `compute_waves` only, so importing `looprail.plans` stays cheap.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from looprail.errors import PlanError
from looprail.plans.planfile import Plan

_PLAN_ID = re.compile(r"(?P<phase>\d+[A-Za-z]?(?:\.\d+)*)-(?P<plan>.+)")


class Wave(BaseModel):
    """One wave: its plans in plan order, which of them still lack a SUMMARY, and whether they
    may run at the same time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    number: int
    plan_ids: list[str]
    pending: list[str]  # plans of this wave without a SUMMARY, in plan order
    parallel_safe: bool  # False: run plan_ids one after the other
    overlap_files: list[str]  # files_modified entries shared by two or more plans of the wave


class WavePlan(BaseModel):
    """The waves of a phase in execution order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    waves: list[Wave]
    effective_wave: dict[str, int]  # plan id → wave number
    depends_on: dict[str, list[str]]  # plan id → plan ids it depends on (resolved)
    warnings: list[str]

    def wave(self, number: int) -> Wave | None:
        return next((w for w in self.waves if w.number == number), None)


@lru_cache(maxsize=8192)
def canonical_plan_id(token: str) -> str:
    """The comparison key of a plan id: zero padding and case do not make a different id
    (`01-02` == `1-2`, `02.1-01` == `2.1-1`)."""
    parts = re.split(r"([.-])", token.strip().lower())
    return "".join(str(int(p)) if p.isdigit() else p for p in parts)


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


def compute_waves(plans: Sequence[Plan], *, root: Path | None = None) -> WavePlan:
    """Group a phase's plans into waves (see the module docstring for the rules). Raises
    PlanError for a cycle, a dangling dependency or a duplicate plan id."""
    import networkx as nx

    plans = resolve_dependencies(plans, root=root)
    graph = nx.DiGraph()
    for plan in plans:
        graph.add_node(plan.id)
    for plan in plans:
        for dep in plan.depends_on:
            graph.add_edge(dep, plan.id)

    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        members = [edge[0] for edge in cycle]
        first = next(p for p in plans if p.id == members[0])
        chain = " → ".join([*members, members[0]])
        raise PlanError(f"{_shown(first.path, root)}: depends_on: plans form a cycle: {chain}")

    level = {
        node: depth
        for depth, generation in enumerate(nx.topological_generations(graph))
        for node in generation
    }
    offset = 0 if any(plan.wave == 0 for plan in plans) else 1
    effective = {plan.id: level[plan.id] + offset for plan in plans}

    warnings = [
        f"plan {plan.id}: declared wave {plan.wave} but depends_on places it in wave "
        f"{effective[plan.id]}"
        for plan in plans
        if plan.wave is not None and plan.wave != effective[plan.id]
    ]

    by_wave: dict[int, list[Plan]] = {}  # one pass: 5,000 chained plans are 5,000 waves
    for plan in plans:
        by_wave.setdefault(effective[plan.id], []).append(plan)
    waves: list[Wave] = []
    for number in sorted(by_wave):
        members = by_wave[number]
        overlap = _overlapping_files(members)
        waves.append(
            Wave(
                number=number,
                plan_ids=[p.id for p in members],
                pending=[p.id for p in members if not p.has_summary],
                parallel_safe=not overlap,
                overlap_files=overlap,
            )
        )
    return WavePlan(
        waves=waves,
        effective_wave=effective,
        depends_on={plan.id: list(plan.depends_on) for plan in plans},
        warnings=warnings,
    )


def _overlapping_files(plans: Sequence[Plan]) -> list[str]:
    owners: dict[str, set[str]] = {}
    for plan in plans:
        for path in plan.files_modified:
            owners.setdefault(_normalize_path(path), set()).add(plan.id)
    return sorted(path for path, ids in owners.items() if len(ids) > 1)


def _normalize_path(path: str) -> str:
    """`./src/a.py` and `src//a.py` name the same file as `src/a.py`."""
    return posixpath.normpath(path.strip().replace("\\", "/"))
