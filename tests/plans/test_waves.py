"""Waves from `depends_on`: levels, offset, declared-wave warnings, cycles, overlaps."""

from __future__ import annotations

from pathlib import Path

import pytest

from looprail.errors import PlanError
from looprail.plans import Plan, compute_waves, resolve_dependencies


def plan(
    plan_id: str,
    *deps: str,
    wave: int | None = None,
    files: tuple[str, ...] = (),
    done: bool = False,
) -> Plan:
    return Plan(
        id=plan_id,
        path=Path(f"/p/.planning/phases/01-x/{plan_id}-PLAN.md"),
        depends_on=list(deps),
        wave=wave,
        files_modified=list(files),
        has_summary=done,
    )


def test_levels_with_offset_one():
    waves = compute_waves(
        [
            plan("01-01"),
            plan("01-02"),
            plan("01-03", "01-01"),
            plan("01-04", "01-01", "01-03"),  # longest path decides: level 2
            plan("01-05", "01-02"),
        ]
    )
    assert waves.effective_wave == {"01-01": 1, "01-02": 1, "01-03": 2, "01-04": 3, "01-05": 2}
    assert [(w.number, w.plan_ids) for w in waves.waves] == [
        (1, ["01-01", "01-02"]),
        (2, ["01-03", "01-05"]),
        (3, ["01-04"]),
    ]
    assert all(w.parallel_safe and w.overlap_files == [] for w in waves.waves)
    assert waves.warnings == []


def test_any_declared_wave_zero_makes_the_offset_zero():
    waves = compute_waves([plan("01-01", wave=0), plan("01-02", "01-01", wave=1)])
    assert waves.effective_wave == {"01-01": 0, "01-02": 1}
    assert [w.number for w in waves.waves] == [0, 1]
    assert waves.warnings == []


def test_declared_wave_that_disagrees_is_a_warning():
    waves = compute_waves([plan("01-01", wave=1), plan("01-02", wave=2), plan("01-03", "01-01")])
    assert waves.effective_wave == {"01-01": 1, "01-02": 1, "01-03": 2}
    assert waves.warnings == ["plan 01-02: declared wave 2 but depends_on places it in wave 1"]


def test_bare_and_padded_dependency_ids_resolve():
    resolved = resolve_dependencies([plan("01-01"), plan("01-02", "01", "1-1")])
    assert resolved[1].depends_on == ["01-01"]
    waves = compute_waves([plan("01-01"), plan("01-02", "1")])
    assert waves.depends_on == {"01-01": [], "01-02": ["01-01"]}


def test_cycle_error_names_the_plans():
    plans = [plan("01-01"), plan("01-02", "01-04"), plan("01-03", "01-02"), plan("01-04", "01-03")]
    with pytest.raises(PlanError) as info:
        compute_waves(plans, root=Path("/p"))
    message = str(info.value)
    assert "depends_on: plans form a cycle:" in message
    for plan_id in ("01-02", "01-03", "01-04"):
        assert plan_id in message
    assert "01-01" not in message.split("cycle:")[1]
    assert message.startswith(".planning/phases/01-x/")


def test_self_dependency_is_a_cycle():
    with pytest.raises(PlanError, match="cycle: 01-01 → 01-01"):
        compute_waves([plan("01-01", "01-01")])


def test_a_dependency_outside_the_phase_is_no_edge_of_its_waves():
    waves = compute_waves([plan("01-01"), plan("01-02", "03-07")], root=Path("/p"))
    assert [w.plan_ids for w in waves.waves] == [["01-01", "01-02"]]  # the reference's waves
    assert resolve_dependencies([plan("01-02", "03-07")])[0].outside_depends_on == ["03-07"]


def test_duplicate_ids_are_refused():
    with pytest.raises(PlanError, match="duplicate plan id"):
        compute_waves([plan("01-01"), plan("1-01")])


def test_shared_files_force_the_wave_sequential():
    waves = compute_waves(
        [
            plan("01-01", files=("src/a.py", "src/b.py")),
            plan("01-02", files=("./src/a.py", "src/c.py")),
            plan("01-03", files=("src/b.py",)),
            plan("01-04", "01-01", files=("src/a.py",)),  # another wave: no conflict
        ]
    )
    first, second = waves.waves
    assert first.plan_ids == ["01-01", "01-02", "01-03"]
    assert first.parallel_safe is False
    assert first.overlap_files == ["src/a.py", "src/b.py"]
    assert second.parallel_safe is True and second.overlap_files == []


def test_pending_plans_per_wave():
    waves = compute_waves([plan("01-01", done=True), plan("01-02"), plan("01-03", "01-01")])
    assert [w.pending for w in waves.waves] == [["01-02"], ["01-03"]]
    assert waves.wave(2) is not None and waves.wave(2).plan_ids == ["01-03"]
    assert waves.wave(9) is None


def test_no_plans():
    waves = compute_waves([])
    assert waves.waves == [] and waves.warnings == [] and waves.effective_wave == {}


def test_plans_resolved_already_are_not_resolved_again(monkeypatch):
    """The runner asks after every wave with the same, resolved plans (only `has_summary`
    moves): the pass over every dependency is made once, and the waves are the same."""
    from looprail.plans import waves as w

    plans = resolve_dependencies([plan("01-01"), plan("01-02", "1-1"), plan("01-03", "01-02")])
    first = compute_waves(plans)
    calls = []
    real = w.resolve_dependencies
    monkeypatch.setattr(w, "resolve_dependencies", lambda *a, **k: calls.append(1) or real(*a, **k))
    done = [plans[0].model_copy(update={"has_summary": True}), *plans[1:]]
    again = compute_waves(done)
    assert calls == []
    assert [x.plan_ids for x in again.waves] == [x.plan_ids for x in first.waves]
    assert [x.pending for x in again.waves] == [[], ["01-02"], ["01-03"]]
    changed = [*plans[:2], plan("01-03", "01-1")]  # a dependency written another way
    assert compute_waves(changed).depends_on["01-03"] == ["01-01"] and calls == [1]
