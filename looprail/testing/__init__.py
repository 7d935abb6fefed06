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

from looprail._lazy import lazy_exports

# Loaded lazily: pytest imports this package for the `looprail` plugin in every session of every
# project where looprail is installed, and pydantic + the machine cost a second or more there.
_EXPORTS = {
    "HookResult": "looprail.machine.guards",
    "PlanFacts": "looprail.machine.guards",
    "hooks_allow": "looprail.machine.guards",
    "refusal": "looprail.machine.guards",
    "refuses": "looprail.machine.guards",
    "Outcome": "looprail.runtime.base",
    "Call": "looprail.runtime.scripted",
    "ScriptedRuntime": "looprail.runtime.scripted",
    "HarnessRun": "looprail.testing.results",
    "LoopHarness": "looprail.testing.harness",
    "TransitionResult": "looprail.testing.results",
    "plan_markdown": "looprail.testing.plantext",
    "task": "looprail.testing.plantext",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
