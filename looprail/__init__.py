"""looprail: a declarative state-machine orchestrator for the spec-driven project loop.

discuss → plan → execute (waves → plans → tasks) → verify → ship. Capabilities declare hooks in
JSON manifests; at each of the twelve extension points looprail resolves the active hooks and
dispatches every one of them from code.

    import looprail
    loaded = looprail.load_project("path/to/project", ["path/to/capabilities"])
    outcome = looprail.run_phase(loaded, "1")
    outcome.result.status  # "shipped" | "halted" | "paused"
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from looprail._version import __version__

if TYPE_CHECKING:  # the names of `_LIBRARY`, typed (`x as x`: a re-export)
    from looprail.errors import LooprailError as LooprailError
    from looprail.hooks.registry import load_registry as load_registry
    from looprail.hooks.resolve import render as render
    from looprail.hooks.resolve import resolve as resolve
    from looprail.machine.chart import compile_loop as compile_loop
    from looprail.machine.guards import HookResult as HookResult
    from looprail.machine.guards import PlanFacts as PlanFacts
    from looprail.machine.guards import hooks_allow as hooks_allow
    from looprail.machine.guards import refusal as refusal
    from looprail.machine.runner import LoopRunner as LoopRunner
    from looprail.machine.runner import RunOptions as RunOptions
    from looprail.machine.runner import RunResult as RunResult
    from looprail.machine.session.phase import load_project as load_project
    from looprail.machine.session.phase import run_phase as run_phase
    from looprail.machine.spec import DEFAULT_LOOP as DEFAULT_LOOP
    from looprail.machine.spec import LoopSpec as LoopSpec
    from looprail.machine.spec import StepSpec as StepSpec
    from looprail.points import POINTS as POINTS
    from looprail.runtime.base import Outcome as Outcome
    from looprail.runtime.base import Runtime as Runtime
    from looprail.runtime.local import LocalRuntime as LocalRuntime
    from looprail.runtime.scripted import ScriptedRuntime as ScriptedRuntime
    from looprail.trust import load_compiled as load_compiled

# The library, by module. `import looprail` is on every command's path (a host calls
# `loop render-hooks` at every point), and these modules bring pydantic, statemachine and
# networkx (~0.4 s of CPU), so a name loads its module on first use (`__getattr__`).
_LIBRARY = {
    "looprail.errors": ("LooprailError",),
    "looprail.machine.spec": ("DEFAULT_LOOP", "LoopSpec", "StepSpec"),
    "looprail.machine.chart": ("compile_loop",),
    "looprail.machine.runner": ("LoopRunner", "RunOptions", "RunResult"),
    "looprail.machine.session.phase": ("load_project", "run_phase"),
    "looprail.machine.guards": ("HookResult", "PlanFacts", "hooks_allow", "refusal"),
    "looprail.trust": ("load_compiled",),
    "looprail.hooks.registry": ("load_registry",),
    "looprail.hooks.resolve": ("render", "resolve"),
    "looprail.points": ("POINTS",),
    "looprail.runtime.base": ("Outcome", "Runtime"),
    "looprail.runtime.local": ("LocalRuntime",),
    "looprail.runtime.scripted": ("ScriptedRuntime",),
}
_HOME = {name: module for module, names in _LIBRARY.items() for name in names}

__all__ = ["__version__", *sorted(_HOME)]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'looprail' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value  # the next lookup finds it without this function
    return value
