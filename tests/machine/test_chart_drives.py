"""The compiled chart drives the loop (issue 29, point 3): the next event, the transitions it
crosses and the refusing guard come from the chart compiled from the `LoopSpec`; each plan-fact
guard is evaluated once per look at the plans; a run is handed one frozen `RunContext`."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looprail.errors import GuardRefused
from looprail.machine import guards as G
from looprail.machine.chart import compile_loop, restored
from looprail.machine.context import RunContext, RunOptions
from looprail.machine.runner import LoopRunner
from looprail.machine.spec import DEFAULT_LOOP
from tests.support import feature
from tests.support.loop import (
    caps_dir,
    every_kind_at_every_point,
    make_project,
    plan_md,
    run_loop,
    scripted,
    task_xml,
    write_plan,
)

CHART = compile_loop(DEFAULT_LOOP)
TRANSITIONS = DEFAULT_LOOP.transitions()


def _configurations() -> list[list[str]]:
    """Every configuration the loop can be in, outermost state first."""
    inner = ("wave_ready", "wave_running", "waves_done")
    out = [["idle"], ["shipped"]]
    for step in DEFAULT_LOOP.steps:
        if step.name == DEFAULT_LOOP.looped:
            out += [[step.name, s] for s in inner]
        else:
            out.append([step.name])
    return out


@pytest.mark.parametrize("config", _configurations(), ids="/".join)
def test_the_next_events_are_the_specs_transitions_from_the_configuration(config):
    machine = restored(CHART, config)
    expected: list[str] = []
    for state in reversed(config):  # the innermost state's first
        for t in TRANSITIONS:
            if t.source == state and t.event not in expected:
                expected.append(t.event)
    assert machine.next_events() == expected
    for event in expected:
        crossing = [
            t for s in reversed(config) for t in TRANSITIONS if (t.source, t.event) == (s, event)
        ]
        assert list(machine.crossing(event)) == crossing


@given(
    plan_count=st.integers(0, 3),
    waves_pending=st.integers(0, 3),
    has_context=st.booleans(),
    status=st.sampled_from([None, "passed", "gaps_found"]),
    config=st.sampled_from(_configurations()),
)
def test_next_event_is_the_first_the_fact_guards_allow(
    plan_count, waves_pending, has_context, status, config
):
    facts = G.PlanFacts(
        plan_count=plan_count,
        waves_pending=waves_pending,
        has_context=has_context,
        verification_status=status,
    )
    machine = restored(CHART, config)
    events = machine.next_events()
    if not events:
        return

    def allowed(event: str) -> bool:  # by hand from the spec: what the chart must say
        return any(
            all(G.GUARDS[g](facts) for g in t.guards if g != "hooks_allow")
            for t in machine.crossing(event)
        )

    assert machine.next_event(facts) == next((e for e in events if allowed(e)), events[0])
    for event in events:
        assert machine.allows(event, facts) is allowed(event)
        if not allowed(event):
            first = next(
                g
                for g in machine.crossing(event)[0].guards
                if g != "hooks_allow" and not G.GUARDS[g](facts)
            )
            assert machine.refused_guard(event) == first


def _count_guards(monkeypatch) -> Counter:
    seen: Counter = Counter()
    held: list = []  # keeps each facts object alive, so an id() is never reused by a new one
    for name, fn in list(G.GUARDS.items()):

        def counted(facts, _name=name, _fn=fn):
            held.append(facts)
            seen[_name, id(facts)] += 1
            return _fn(facts)

        monkeypatch.setitem(G.GUARDS, name, counted)
    return seen


@pytest.mark.parametrize("hooks", [False, True], ids=["no-hooks", "every-hook"])
def test_each_fact_guard_is_evaluated_once_per_look(tmp_path, monkeypatch, hooks):
    project = make_project(tmp_path)
    write_plan(project, "01", plan_md("01", tasks=[task_xml("a", files=["a.txt"])]))
    write_plan(project, "02", plan_md("02", depends_on=["01"], tasks=[task_xml("b")]))
    caps = caps_dir(tmp_path, *every_kind_at_every_point()) if hooks else None
    seen = _count_guards(monkeypatch)
    out = run_loop(project, scripted(project), caps)
    assert out.result.status == "shipped", out.result.reason
    assert out.result.waves_run == 2
    assert seen, "no fact guard was evaluated"
    # Asked before the hooks, sent after them, checked as the step's `done`: one evaluation
    # for each look at the plans.
    assert max(seen.values()) == 1, [k for k, n in seen.items() if n > 1]
    names = {name for name, _ in seen}
    assert {"discuss_done", "plans_ready", "wave_pending", "more_waves", "verify_done"} <= names


def test_a_refusing_fact_guard_halts_before_any_hook_and_is_named(tmp_path):
    # No plans and no planner output: finish_plan is refused by `plans_ready` before the
    # plan:post hooks run.
    project = make_project(tmp_path)
    cap = feature(
        "s",
        steps=[{"point": "plan:post", "ref": {"skill": "x"}, "produces": [], "consumes": []}],
    )
    rt = scripted(project)
    out = run_loop(project, rt, caps_dir(tmp_path, cap))
    assert out.result.status == "halted"
    assert out.result.reason == "finish_plan: the plan step produced no plans"
    assert out.result.state == ["plan"]
    assert not [c for c in rt.calls if c.point == "plan:post"]
    runner = LoopRunner(
        RunContext(project=project, phase="1", runtime=rt, compiled={"caps": {}}, state=["plan"])
    )
    with pytest.raises(GuardRefused) as refused:
        runner.attempt("finish_plan")
    assert (refused.value.event, refused.value.guard) == ("finish_plan", "plans_ready")
    assert runner.state == ["plan"]


def test_the_run_context_is_frozen_and_the_runner_is_not_patched(tmp_path):
    project = make_project(tmp_path)
    ctx = RunContext(project=project, phase="1", runtime=scripted(project), compiled={"caps": {}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.workspace = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunOptions().jobs = 2  # type: ignore[misc]
    runner = LoopRunner(ctx)
    with pytest.raises(AttributeError):  # what the run was given is read from the context
        runner.options = RunOptions(jobs=2)  # type: ignore[misc]
    assert runner.project == project.resolve() and runner.options is ctx.options
