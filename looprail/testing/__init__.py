"""Testing helpers for capability authors (and looprail's own tests).

The pytest plugin (`looprail.testing.plugin`, registered as the `pytest11` entry point
`looprail`) gives every test a `loop_harness` fixture: a `LoopHarness` over a throwaway project.

    def test_release_gate_refuses_to_ship(loop_harness):
        loop_harness.capability({"id": "release", "config": {...}, "gates": [...]})
        result = loop_harness.transition("verify", "ship")
        assert not result.allowed and result.refused_by == "release"

The guards are pure, so they can also be tested with plain values:

    from looprail.testing import HookResult, hooks_allow
    assert not hooks_allow([HookResult(point="ship:pre", cap_id="x", kind="gate",
                                       status="block", blocking=True)])

See docs/testing.md.
"""

from looprail.machine.guards import HookResult, PlanFacts, hooks_allow, refusal, refuses
from looprail.runtime.base import Outcome
from looprail.runtime.scripted import Call, ScriptedRuntime
from looprail.testing.harness import LoopHarness
from looprail.testing.plantext import plan_markdown, task
from looprail.testing.results import HarnessRun, TransitionResult

__all__ = [
    "Call",
    "HarnessRun",
    "HookResult",
    "LoopHarness",
    "Outcome",
    "PlanFacts",
    "ScriptedRuntime",
    "TransitionResult",
    "hooks_allow",
    "plan_markdown",
    "refusal",
    "refuses",
    "task",
]
