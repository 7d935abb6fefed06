"""looprail: a declarative state-machine orchestrator for the spec-driven project loop.

discuss → plan → execute (waves → plans → tasks) → verify → ship. Capabilities declare hooks in
JSON manifests; at each of the twelve extension points looprail resolves the active hooks and
dispatches every one of them from code.

The public API is re-exported here lazily: importing `looprail` stays cheap (the
`render-hooks` hot path must not pay for pydantic, networkx or statemachine), and each name
loads its module on first use.

    import looprail
    loaded = looprail.load_project("path/to/project", ["path/to/capabilities"])
    outcome = looprail.run_phase(loaded, "1")
    outcome.result.status  # "shipped" | "halted" | "paused"
"""

from __future__ import annotations

import importlib

from looprail.errors import LooprailError

__version__ = "0.1.0"

_EXPORTS = {
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

__all__ = ["LooprailError", "__version__", *sorted(_EXPORTS)]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'looprail' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
