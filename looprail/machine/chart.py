"""Compile a `LoopSpec` into python-statemachine `StateChart` classes.

Two charts:
- the loop chart: `idle → discuss → plan → execute{wave_ready ⇄ wave_running → waves_done}
  → verify → ship → shipped`, every transition guarded by `hooks_allow` (the gates) plus the
  plan-fact guards the spec names;
- the task chart, one per plan: `pending → running → pending … → done`, whose `begin_task`
  transition runs the mandatory actions (the `execute:task` content resolver, then the
  `read_first` check) in its `before` slot, so a failure re-raises to the caller with the state
  restored and the task body never runs.

Both use `allow_event_without_transition = False` (a wrong-phase event raises) and
`catch_errors_as_events = False` (an action's exception reaches the caller).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, cast

from statemachine import State, StateChart

from looprail.machine import guards as G
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec

WAVE_STATES = ("wave_ready", "wave_running", "waves_done")


def _guard_method(name: str) -> Callable[..., bool]:
    if name == "hooks_allow":

        def hooks_allow(self, results: Sequence[G.HookResult] = (), **_: Any) -> bool:
            return G.hooks_allow(results)

        return hooks_allow
    fn = G.GUARDS[name]

    def fact_guard(self, facts: G.PlanFacts | None = None, **_: Any) -> bool:
        return fn(facts or G.PlanFacts())

    fact_guard.__name__ = name
    return fact_guard


@cache
def compile_loop(spec: LoopSpec = DEFAULT_LOOP) -> type[StateChart]:
    """The loop chart class for `spec` (cached: specs are frozen values)."""
    states: dict[str, State] = {"idle": State("idle", initial=True)}
    inner = {
        "wave_ready": State("wave ready", initial=True),
        "wave_running": State("wave running"),
        "waves_done": State("waves done", final=True),
    }
    for step in spec.steps:
        if step.name == spec.looped:
            # State.Compound's metaclass turns the new class into a State instance.
            compound = type(step.name, (State.Compound,), dict(inner, name=step.name))
            states[step.name] = cast(State, compound)
        else:
            states[step.name] = State(step.name)
    states["shipped"] = State("shipped", final=True)
    lookup = {**states, **inner}

    attrs: dict[str, Any] = dict(states)
    transitions = spec.transitions()
    guard_names = {g for t in transitions for g in t.guards}
    for name in guard_names:
        attrs[name] = _guard_method(name)
    by_event: dict[str, Any] = {}
    for t in transitions:
        source = lookup[t.source]
        target = lookup[t.target]
        tr = source.to(target, cond=list(t.guards))
        by_event[t.event] = tr if t.event not in by_event else by_event[t.event] | tr
    attrs.update(by_event)
    attrs["allow_event_without_transition"] = False
    attrs["catch_errors_as_events"] = False
    attrs["__module__"] = __name__
    attrs["__doc__"] = "The project loop compiled from a LoopSpec."
    attrs["spec"] = spec
    return type("ProjectLoop", (StateChart,), attrs)


def state_path(machine: StateChart) -> list[str]:
    """The active configuration as a list of state ids (outermost first), for journals."""
    return [s.id for s in machine.configuration]


class TaskChart(StateChart):
    """One plan's tasks, run in order. The model (`PlanRun`) supplies the callbacks."""

    allow_event_without_transition = False
    catch_errors_as_events = False

    pending = State("pending", initial=True)
    running = State("running")
    done = State("done", final=True)

    # Mandatory actions in the `before` slot: the resolver first, then read_first, then the
    # native `task_call` hooks. Any exception aborts the transition and restores `pending`.
    begin_task = pending.to(
        running, before=["resolve_task_content", "check_read_first", "task_call_hooks"]
    )
    end_task = running.to(pending, cond="more_tasks") | running.to(done)
    skip_task = pending.to(pending, cond="more_tasks", internal=True) | pending.to(done)
