"""Compile a `LoopSpec` into python-statemachine `StateChart` classes: the loop chart (`idle →
discuss → plan → execute{wave_ready ⇄ wave_running → waves_done} → verify → ship → shipped`,
every transition guarded by `hooks_allow` plus the spec's plan-fact guards) and the task chart,
one per plan. In both a wrong-phase event raises and an action's exception reaches the caller."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, ClassVar, cast

from statemachine import State, StateChart
from statemachine.orderedset import OrderedSet
from statemachine.transition_list import TransitionList

from looprail.errors import HaltError
from looprail.machine import guards as G
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec, TransitionSpec

WAVE_STATES = ("wave_ready", "wave_running", "waves_done")
WAVE_RUNNING = WAVE_STATES[1]  # where the looped step runs a wave's plans


class LoopChart(StateChart):
    """The base of every compiled loop chart: it also answers the runner's questions (which
    events can fire, which transitions an event takes, which guard refused), so no one else
    re-derives them from the spec. Each guard is evaluated once per look at the plan facts."""

    spec: ClassVar[LoopSpec]
    # (source state, event) → the spec's transitions, in loop order; state → its events
    _loop_crossing: ClassVar[dict[tuple[str, str], tuple[TransitionSpec, ...]]]
    _loop_events: ClassVar[dict[str, tuple[str, ...]]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loop_facts: G.PlanFacts | None = None
        self._loop_verdicts: dict[str, bool] = {}
        super().__init__(*args, **kwargs)

    def next_events(self) -> list[str]:
        """The events the active configuration can fire, the innermost state's first."""
        out: list[str] = []
        for state in reversed(state_path(self)):
            out += [e for e in self._loop_events.get(state, ()) if e not in out]
        return out

    def crossing(self, event: str) -> tuple[TransitionSpec, ...]:
        """The transitions `event` may take from here, in loop order (the first one's points
        are those the attempt dispatches)."""
        out: tuple[TransitionSpec, ...] = ()
        for state in reversed(state_path(self)):
            out += self._loop_crossing.get((state, event), ())
        return out

    def allows(self, event: str, facts: G.PlanFacts) -> bool:
        return any(e.id == event for e in self.enabled_events(results=(), facts=facts))

    def next_event(self, facts: G.PlanFacts) -> str:
        """The first of `next_events` the plan-fact guards allow (else the first, refused)."""
        events = self.next_events()
        enabled = {e.id for e in self.enabled_events(results=(), facts=facts)}
        return next((e for e in events if e in enabled), events[0])

    def refused_guard(self, event: str) -> str | None:
        """The plan-fact guard of `event`'s first transition that refused at the last look."""
        for t in self.crossing(event)[:1]:
            for name in t.guards:
                if self._loop_verdicts.get(name) is False and name in G.GUARDS:
                    return name
        return None

    def verdict(self, name: str, facts: G.PlanFacts | None) -> bool:
        if facts is None:
            facts = G.PlanFacts.model_construct()
        elif facts is self._loop_facts:
            known = self._loop_verdicts.get(name)
            if known is not None:
                return known
        else:
            self._loop_facts, self._loop_verdicts = facts, {}
        ok = self._loop_verdicts[name] = G.GUARDS[name](facts)
        return ok


def _guard_method(name: str) -> Callable[..., bool]:
    if name == "hooks_allow":

        def hooks_allow(self, results: Sequence[G.HookResult] = (), **_: Any) -> bool:
            return G.hooks_allow(results)

        return hooks_allow

    def fact_guard(self: LoopChart, facts: G.PlanFacts | None = None, **_: Any) -> bool:
        return self.verdict(name, facts)

    fact_guard.__name__ = name
    return fact_guard


@cache
def compile_loop(spec: LoopSpec = DEFAULT_LOOP) -> type[LoopChart]:
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

    attrs: dict[str, object] = dict(states)
    transitions = spec.transitions()
    for name in {g for t in transitions for g in t.guards}:
        if name != "hooks_allow" and name not in G.GUARDS:
            raise KeyError(name)  # a guard the spec names and no one defines
        attrs[name] = _guard_method(name)
    by_event: dict[str, TransitionList] = {}
    crossing: dict[tuple[str, str], tuple[TransitionSpec, ...]] = {}
    events: dict[str, tuple[str, ...]] = {}
    for t in transitions:
        tr = lookup[t.source].to(lookup[t.target], cond=list(t.guards))
        by_event[t.event] = tr if t.event not in by_event else by_event[t.event] | tr
        crossing[(t.source, t.event)] = (*crossing.get((t.source, t.event), ()), t)
        if t.event not in events.get(t.source, ()):
            events[t.source] = (*events.get(t.source, ()), t.event)
    attrs.update(by_event)
    attrs.update(
        allow_event_without_transition=False,
        catch_errors_as_events=False,
        __module__=__name__,
        __doc__="The project loop compiled from a LoopSpec.",
        spec=spec,
        _loop_crossing=crossing,
        _loop_events=events,
    )
    return type("ProjectLoop", (LoopChart,), attrs)


def restored(chart_class: type[LoopChart], state: Sequence[str]) -> LoopChart:
    """A chart put back in a journaled configuration (outermost first), no enter callbacks."""
    machine = chart_class()
    values = [s for s in state if s]
    if not values:
        return machine
    unknown = [s for s in values if s not in chart_class.states_map]
    if unknown:  # a journal written by another loop (an older looprail, a changed spec)
        raise HaltError(
            f"journaled state {unknown[0]!r} is not a state of this loop "
            f"({', '.join(chart_class.states_map)}); start over with --new"
        )
    model = machine.model
    setattr(model, machine.state_field, values[0] if len(values) == 1 else OrderedSet(values))
    return chart_class(model=model)


def state_path(machine: StateChart) -> list[str]:
    return [s.id for s in machine.configuration]


class TaskChart(StateChart):
    """One plan's tasks, run in order; the model (`PlanRun`) supplies the callbacks."""

    allow_event_without_transition = False
    catch_errors_as_events = False

    pending = State("pending", initial=True)
    running = State("running")
    done = State("done", final=True)

    # Mandatory, in order; an exception aborts the transition (`pending` kept), no body runs.
    begin_task = pending.to(
        running, before=["resolve_task_content", "check_read_first", "task_call_hooks"]
    )
    end_task = running.to(pending, cond="more_tasks") | running.to(done)
    skip_task = pending.to(pending, cond="more_tasks", internal=True) | pending.to(done)
