"""Runtimes: where the loop's work (skills, agents, commands, checks, role work) is executed.

`Runtime` is the protocol the state machine calls; every runtime is a `BaseRuntime` that
implements one method, `handle`, and is found by name through the `looprail.runtimes` entry
points (`create_runtime`). `LocalRuntime` (executables under `.looprail/`) is the default,
`ScriptedRuntime` serves tests, and the agent CLIs live in `looprail.runtime.agents`.
"""

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
