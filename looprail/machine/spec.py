"""The loop as data: `LoopSpec` names the phase steps, the role that does each step's work, the
artifact that shows the work is done, and the points every transition crosses.

`chart.compile_loop(spec)` turns a spec into a python-statemachine `StateChart`; the diagrams,
`--dry-run` and the runner all read the same spec, so the picture is the machine.
"""

from __future__ import annotations

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
        """Every transition in loop order. Leaving a step fires its `:post`; entering the next
        fires its `:pre`; the looped step's waves are bracketed by the wave points.

        Built with `model_construct`: the values come from this (validated) spec, and building
        the validator costs every `looprail run` milliseconds for nothing."""
        out = [
            TransitionSpec.model_construct(
                event="begin",
                source="idle",
                target=self.steps[0].name,
                points=(self.steps[0].pre,),
                guards=("hooks_allow",),
                label=f"begin {self.steps[0].name}",
            )
        ]
        for here, nxt in zip(self.steps, self.steps[1:], strict=False):
            guards = ["hooks_allow"]
            if nxt.name == self.looped:
                guards.append("plans_ready")
            if here.name == self.looped:
                guards.append("waves_finished")
            if here.artifact and self.looped not in (here.name, nxt.name):
                guards.append(f"{here.name}_done")
            out.append(
                TransitionSpec.model_construct(
                    event=f"finish_{here.name}",
                    source=here.name,
                    target=nxt.name,
                    points=(here.post, nxt.pre),
                    guards=tuple(guards),
                    label=f"{here.name} → {nxt.name}",
                )
            )
        last = self.steps[-1]
        out.append(
            TransitionSpec.model_construct(
                event=f"finish_{last.name}",
                source=last.name,
                target="shipped",
                points=(last.post,),
                guards=("hooks_allow",),
                label=f"{last.name} done",
            )
        )
        # the wave sub-loop inside the looped step
        out.insert(
            [t.target for t in out].index(self.looped) + 1,
            TransitionSpec.model_construct(
                event="start_wave",
                source="wave_ready",
                target="wave_running",
                points=(self.wave_pre,),
                guards=("hooks_allow", "wave_pending"),
                label="start wave",
            ),
        )
        idx = [t.event for t in out].index("start_wave") + 1
        out[idx:idx] = [
            TransitionSpec.model_construct(
                event="finish_wave",
                source="wave_running",
                target="wave_ready",
                points=(self.wave_post,),
                guards=("hooks_allow", "more_waves"),
                label="next wave",
            ),
            TransitionSpec.model_construct(
                event="finish_wave",
                source="wave_running",
                target="waves_done",
                points=(self.wave_post,),
                guards=("hooks_allow",),
                label="last wave",
            ),
        ]
        return out


def _default_loop() -> LoopSpec:
    """The built-in loop, constructed without validation (the run path never builds the spec
    models' validators); `tests/machine/test_chart.py` checks it validates to itself."""
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
