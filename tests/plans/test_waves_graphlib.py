"""The run path computes waves with the stdlib's graphlib; networkx (kept for diagrams and lint)
is the oracle: on random graphs both give the same waves, offsets, warnings, overlaps and the
same cycle error."""

from __future__ import annotations

import posixpath
import subprocess
import sys
from pathlib import Path

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.errors import PlanError
from looprail.plans import Plan, compute_waves, resolve_dependencies
from tests.support import examples


def networkx_waves(plans: list[Plan]) -> dict:
    """The networkx implementation looprail used before graphlib, as the reference."""
    plans = resolve_dependencies(plans)
    graph = nx.DiGraph()
    for p in plans:
        graph.add_node(p.id)
    for p in plans:
        for dep in p.depends_on:
            graph.add_edge(dep, p.id)
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        members = [edge[0] for edge in cycle]
        return {"cycle": " → ".join([*members, members[0]])}
    level = {n: d for d, gen in enumerate(nx.topological_generations(graph)) for n in gen}
    offset = 0 if any(p.wave == 0 for p in plans) else 1
    effective = {p.id: level[p.id] + offset for p in plans}
    waves = []
    for number in sorted(set(effective.values())):
        members = [p for p in plans if effective[p.id] == number]
        owners: dict[str, set[str]] = {}
        for p in members:
            for f in p.files_modified:
                owners.setdefault(posixpath.normpath(f.strip()), set()).add(p.id)
        overlap = sorted(f for f, ids in owners.items() if len(ids) > 1)
        waves.append(
            (number, [p.id for p in members], [p.id for p in members if not p.has_summary], overlap)
        )
    warnings = [
        f"plan {p.id}: declared wave {p.wave} but depends_on places it in wave {effective[p.id]}"
        for p in plans
        if p.wave is not None and p.wave != effective[p.id]
    ]
    return {"waves": waves, "effective": effective, "warnings": warnings}


def graphlib_waves(plans: list[Plan]) -> dict:
    try:
        wp = compute_waves(plans)
    except PlanError as exc:
        return {"cycle": str(exc).split("plans form a cycle: ", 1)[1]}
    return {
        "waves": [(w.number, w.plan_ids, w.pending, w.overlap_files) for w in wp.waves],
        "effective": wp.effective_wave,
        "warnings": wp.warnings,
    }


# Strategies are built once: one built per draw is validated again on every example, and that
# (not either implementation) was most of this file's time.
_SIZES = st.integers(1, 14)
_PICK = {n: st.integers(0, n - 1) for n in range(1, 15)}
_DEP_COUNT = st.integers(0, 3)
_WAVE = st.none() | st.integers(0, 4)
_FILES = st.lists(st.sampled_from(["a.py", "./a.py", "b", "c"]))
_IDS = [f"01-{i:02d}" for i in range(1, 15)]


@st.composite
def phases(draw, acyclic: bool):
    n = draw(_SIZES)
    ids = _IDS[:n]
    order = draw(st.permutations(ids))  # plan order is not dependency order
    plans = []
    for pid in order:
        pos = ids.index(pid)
        pool = ids[:pos] if acyclic else ids
        deps = [pool[draw(_PICK[len(pool)])] for _ in range(draw(_DEP_COUNT))] if pool else []
        plans.append(
            Plan(
                id=pid,
                path=Path(f"/p/{pid}-PLAN.md"),
                depends_on=deps,
                wave=draw(_WAVE),
                files_modified=draw(_FILES),
                has_summary=draw(st.booleans()),
            )
        )
    return plans


@settings(max_examples=examples(150), deadline=None)
@given(phases(acyclic=True))
def test_graphlib_matches_networkx_on_dags(plans):
    assert graphlib_waves(plans) == networkx_waves(plans)


@settings(max_examples=examples(150), deadline=None)
@given(phases(acyclic=False))
def test_graphlib_matches_networkx_with_cycles(plans):
    assert graphlib_waves(plans) == networkx_waves(plans)


def test_a_cycle_names_the_same_chain_as_networkx():
    plans = [
        Plan(id="01-01", path=Path("/p/01-01-PLAN.md"), depends_on=["01-03"]),
        Plan(id="01-02", path=Path("/p/01-02-PLAN.md"), depends_on=["01-01"]),
        Plan(id="01-03", path=Path("/p/01-03-PLAN.md"), depends_on=["01-02"]),
    ]
    assert graphlib_waves(plans) == networkx_waves(plans)
    assert "cycle" in graphlib_waves(plans)


def test_the_run_path_does_not_import_networkx():
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from looprail.plans import Plan, compute_waves\n"
        "import looprail.machine.runner\n"
        "compute_waves([Plan(id='01-01', path=Path('/p/01-01-PLAN.md'))])\n"
        "print('networkx' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
