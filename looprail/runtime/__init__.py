"""Runtimes: where the loop's work (skills, agents, commands, checks, role work) is executed.

`Runtime` is the protocol the state machine calls; every runtime is a `BaseRuntime` that
implements one method, `handle`, and is found by name through the `looprail.runtimes` entry
points (`create_runtime`). `LocalRuntime` (executables under `.looprail/`) is the default,
`ScriptedRuntime` serves tests, and the agent CLIs live in `looprail.runtime.agents`. Names are
imported lazily so that `looprail.runtime.process` stays cheap to import.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Runtime": "base",
    "BaseRuntime": "base",
    "Usage": "base",
    "RuntimeSettings": "registry",
    "create_runtime": "registry",
    "available": "registry",
    "DispatchContext": "base",
    "Outcome": "base",
    "Request": "base",
    "TaskWork": "base",
    "EXIT_UNAVAILABLE": "base",
    "PHASE_ROLES": "base",
    "TASK_ROLE": "base",
    "spawn_banner": "base",
    "LocalRuntime": "local",
    "Timeouts": "local",
    "ScriptedRuntime": "scripted",
    "Call": "scripted",
    "make_executor": "executors",
    "interruptible_executor": "executors",
    "run_all": "executors",
    "Settled": "executors",
    "InlineExecutor": "executors",
}

__all__ = [
    "EXIT_UNAVAILABLE",
    "PHASE_ROLES",
    "TASK_ROLE",
    "BaseRuntime",
    "Call",
    "DispatchContext",
    "InlineExecutor",
    "LocalRuntime",
    "Outcome",
    "Request",
    "Runtime",
    "RuntimeSettings",
    "ScriptedRuntime",
    "Settled",
    "TaskWork",
    "Timeouts",
    "Usage",
    "available",
    "create_runtime",
    "interruptible_executor",
    "make_executor",
    "run_all",
    "spawn_banner",
]

if TYPE_CHECKING:
    from looprail.runtime.base import (
        EXIT_UNAVAILABLE,
        PHASE_ROLES,
        TASK_ROLE,
        BaseRuntime,
        DispatchContext,
        Outcome,
        Request,
        Runtime,
        TaskWork,
        Usage,
        spawn_banner,
    )
    from looprail.runtime.executors import (
        InlineExecutor,
        Settled,
        interruptible_executor,
        make_executor,
        run_all,
    )
    from looprail.runtime.local import LocalRuntime, Timeouts
    from looprail.runtime.registry import RuntimeSettings, available, create_runtime
    from looprail.runtime.scripted import Call, ScriptedRuntime


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'looprail.runtime' has no attribute {name!r}")
    value = getattr(import_module(f"looprail.runtime.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
