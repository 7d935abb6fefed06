"""Testing helpers for capability authors (and looprail's own tests): the `LoopHarness` (the
`loop_harness` fixture of the pytest plugin `looprail.testing.plugin`), the pure guards and the
plan builders. See docs/testing.md.
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
