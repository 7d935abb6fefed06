"""The loop as data: the steps, the role that does each step's work, the artifact that shows it
done, and the points every transition crosses. The chart (`chart.compile_loop`), the diagrams,
`--dry-run` and the runner all read the same spec, so the picture is the machine."""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, model_validator

from looprail.points import POINTS, WAVE_POST, WAVE_PRE


class StepSpec(BaseModel):
    """One step of the loop (a top-level state)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    name: str  # state id: discuss, plan, execute, verify, ship
    role: str  # who does the step's main work (execute: the executor, per task)
    artifact: str | None = None  # the file whose presence means the work is already done
    description: str = ""

    @property
    def pre(self) -> str:
        return f"{self.name}:pre"

    @property
    def post(self) -> str:
        return f"{self.name}:post"

    @property
    def done_guard(self) -> str | None:
        """The plan-fact guard that says the step's artifact is there (None: it owes none)."""
        return f"{self.name}_done" if self.artifact else None


class TransitionSpec(BaseModel):
    """One transition of the compiled chart: the event, where it goes, the points it dispatches
    (in order), and the guards that must allow it."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    event: str
    source: str
    target: str
    points: tuple[str, ...]
    guards: tuple[str, ...]
    label: str = ""


class LoopSpec(BaseModel):
    """The whole loop. `looped` is the step that holds the wave sub-loop."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    steps: tuple[StepSpec, ...]
    looped: str = "execute"
    wave_pre: str = WAVE_PRE
    wave_post: str = WAVE_POST

    @model_validator(mode="after")
    def _points_are_all_crossed(self) -> LoopSpec:
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise ValueError("step names must be unique")
        if self.looped not in names:
            raise ValueError(f"looped step {self.looped!r} is not a step")
        crossed = [p for t in self.transitions() for p in t.points]
        if sorted(set(crossed)) != sorted(POINTS):
            missing = sorted(set(POINTS) - set(crossed))
            raise ValueError(
                f"the loop must cross all {len(POINTS)} points; missing: {', '.join(missing)}"
            )
        return self

    def step(self, name: str) -> StepSpec:
        return next(s for s in self.steps if s.name == name)

    def transitions(self) -> list[TransitionSpec]:
        """Every transition in loop order: leaving a step fires its `:post`, entering the next
        its `:pre`; the looped step's waves are bracketed by the wave points. Built once per
        spec, unvalidated (a validator would cost every run milliseconds for nothing)."""
        return list(_transitions(self))


@cache
def _transitions(spec: LoopSpec) -> tuple[TransitionSpec, ...]:
    first, last = spec.steps[0], spec.steps[-1]
    out = [_transition("begin", "idle", first.name, (first.pre,), (), f"begin {first.name}")]
    for here, nxt in zip(spec.steps, spec.steps[1:], strict=False):
        guards = []
        if nxt.name == spec.looped:
            guards.append("plans_ready")
        if here.name == spec.looped:
            guards.append("waves_finished")
        if here.done_guard and spec.looped not in (here.name, nxt.name):
            guards.append(here.done_guard)
        out.append(
            _transition(
                f"finish_{here.name}",
                here.name,
                nxt.name,
                (here.post, nxt.pre),
                tuple(guards),
                f"{here.name} → {nxt.name}",
            )
        )
    out.append(
        _transition(
            f"finish_{last.name}", last.name, "shipped", (last.post,), (), f"{last.name} done"
        )
    )
    # the wave sub-loop inside the looped step, right after the transition that enters it
    at = [t.target for t in out].index(spec.looped) + 1
    pre, post = spec.wave_pre, spec.wave_post
    out[at:at] = [
        _transition(
            "start_wave", "wave_ready", "wave_running", (pre,), ("wave_pending",), "start wave"
        ),
        _transition(
            "finish_wave", "wave_running", "wave_ready", (post,), ("more_waves",), "next wave"
        ),
        _transition("finish_wave", "wave_running", "waves_done", (post,), (), "last wave"),
    ]
    return tuple(out)


def _transition(
    event: str,
    source: str,
    target: str,
    points: tuple[str, ...],
    guards: tuple[str, ...],
    label: str,
) -> TransitionSpec:
    """Every transition is guarded by `hooks_allow` first."""
    return TransitionSpec.model_construct(
        event=event,
        source=source,
        target=target,
        points=points,
        guards=("hooks_allow", *guards),
        label=label,
    )


def _default_loop() -> LoopSpec:
    """The built-in loop, unvalidated (`tests/machine/test_chart.py` checks it validates)."""
    steps = (
        ("discuss", "orchestrator", "CONTEXT.md", "record implementation decisions"),
        ("plan", "planner", "PLAN.md", "write the plans"),
        ("execute", "executor", "SUMMARY.md", "run the waves of plans, task by task"),
        ("verify", "verifier", "VERIFICATION.md", "check the phase goal"),
        ("ship", "orchestrator", None, "preflight and ship"),
    )
    return LoopSpec.model_construct(
        steps=tuple(
            StepSpec.model_construct(name=name, role=role, artifact=artifact, description=text)
            for name, role, artifact, text in steps
        )
    )


DEFAULT_LOOP = _default_loop()
"""The loop `looprail run` drives: discuss → plan → execute → verify → ship, each step with its
role and the artifact it owes (`compile_loop(DEFAULT_LOOP)` is its state chart class)."""
