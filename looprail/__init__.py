"""looprail: a declarative state-machine orchestrator for the spec-driven project loop.

discuss → plan → execute (waves → plans → tasks) → verify → ship. Capabilities declare hooks in
JSON manifests; at each of the twelve extension points looprail resolves the active hooks and
dispatches every one of them from code.

The public API is re-exported here lazily (each name loads its module on first use): the
`render-hooks` hot path must not pay for pydantic, networkx or statemachine.

    import looprail
    loaded = looprail.load_project("path/to/project", ["path/to/capabilities"])
    outcome = looprail.run_phase(loaded, "1")
    outcome.result.status  # "shipped" | "halted" | "paused"
"""

from __future__ import annotations

from looprail._lazy import lazy_exports
from looprail._version import __version__

_EXPORTS = {
    # the error every refusal raises (loaded on first use: a replayed `render-hooks` call
    # never builds the error tree)
    "LooprailError": "looprail.errors",
    # the loop
    "LoopSpec": "looprail.machine.spec",
    "StepSpec": "looprail.machine.spec",
    "DEFAULT_LOOP": "looprail.machine.spec",
    "compile_loop": "looprail.machine.chart",
    "LoopRunner": "looprail.machine.run",
    "RunOptions": "looprail.machine.run",
    "RunResult": "looprail.machine.run",
    "load_project": "looprail.machine.session",
    "run_phase": "looprail.machine.session",
    # guards, for unit tests of gates
    "HookResult": "looprail.machine.guards",
    "PlanFacts": "looprail.machine.guards",
    "hooks_allow": "looprail.machine.guards",
    "refusal": "looprail.machine.guards",
    # the resolver
    "load_compiled": "looprail.trust",
    "load_registry": "looprail.hooks.registry",
    "resolve": "looprail.hooks.resolve",
    "render": "looprail.hooks.resolve",
    "POINTS": "looprail.points",
    # runtimes
    "Runtime": "looprail.runtime.base",
    "Outcome": "looprail.runtime.base",
    "LocalRuntime": "looprail.runtime.local",
    "ScriptedRuntime": "looprail.runtime.scripted",
}

__all__ = ["__version__", *sorted(_EXPORTS)]

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names, typed for checkers (`x as x`: a re-export); at run time
    # `__getattr__` loads them (tests/test_exports.py checks these agree with `_EXPORTS`)
    from looprail.errors import LooprailError as LooprailError
    from looprail.hooks.registry import load_registry as load_registry
    from looprail.hooks.resolve import render as render
    from looprail.hooks.resolve import resolve as resolve
    from looprail.machine.chart import compile_loop as compile_loop
    from looprail.machine.guards import HookResult as HookResult
    from looprail.machine.guards import PlanFacts as PlanFacts
    from looprail.machine.guards import hooks_allow as hooks_allow
    from looprail.machine.guards import refusal as refusal
    from looprail.machine.run import LoopRunner as LoopRunner
    from looprail.machine.run import RunOptions as RunOptions
    from looprail.machine.run import RunResult as RunResult
    from looprail.machine.session import load_project as load_project
    from looprail.machine.session import run_phase as run_phase
    from looprail.machine.spec import DEFAULT_LOOP as DEFAULT_LOOP
    from looprail.machine.spec import LoopSpec as LoopSpec
    from looprail.machine.spec import StepSpec as StepSpec
    from looprail.points import POINTS as POINTS
    from looprail.runtime.base import Outcome as Outcome
    from looprail.runtime.base import Runtime as Runtime
    from looprail.runtime.local import LocalRuntime as LocalRuntime
    from looprail.runtime.scripted import ScriptedRuntime as ScriptedRuntime
    from looprail.trust import load_compiled as load_compiled


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
