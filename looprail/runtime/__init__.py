"""Runtimes: where the loop's work (skills, agents, commands, checks, role work) is executed.

`Runtime` is the protocol the state machine calls; every runtime is a `BaseRuntime` that
implements one method, `handle`, and is found by name through the `looprail.runtimes` entry
points (`create_runtime`). `LocalRuntime` (executables under `.looprail/`) is the default,
`ScriptedRuntime` serves tests, and the agent CLIs live in `looprail.runtime.agents`. Names are
imported lazily so that `looprail.runtime.process` stays cheap to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from looprail._lazy import lazy_exports

_EXPORTS = {
    "Runtime": "looprail.runtime.base",
    "BaseRuntime": "looprail.runtime.base",
    "Usage": "looprail.runtime.base",
    "DispatchContext": "looprail.runtime.base",
    "Outcome": "looprail.runtime.base",
    "Request": "looprail.runtime.base",
    "TaskWork": "looprail.runtime.base",
    "EXIT_UNAVAILABLE": "looprail.runtime.base",
    "PHASE_ROLES": "looprail.runtime.base",
    "TASK_ROLE": "looprail.runtime.base",
    "spawn_banner": "looprail.runtime.base",
    "RuntimeSettings": "looprail.runtime.registry",
    "create_runtime": "looprail.runtime.registry",
    "available": "looprail.runtime.registry",
    "LocalRuntime": "looprail.runtime.local",
    "Timeouts": "looprail.runtime.local",
    "ScriptedRuntime": "looprail.runtime.scripted",
    "Call": "looprail.runtime.scripted",
    "make_executor": "looprail.runtime.executors",
    "interruptible_executor": "looprail.runtime.executors",
    "run_all": "looprail.runtime.executors",
    "Settled": "looprail.runtime.executors",
    "InlineExecutor": "looprail.runtime.executors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # the names, typed for checkers (`x as x`: a re-export); at run time
    # `__getattr__` loads them (tests/test_exports.py checks these agree with `_EXPORTS`)
    from looprail.runtime.base import EXIT_UNAVAILABLE as EXIT_UNAVAILABLE
    from looprail.runtime.base import PHASE_ROLES as PHASE_ROLES
    from looprail.runtime.base import TASK_ROLE as TASK_ROLE
    from looprail.runtime.base import BaseRuntime as BaseRuntime
    from looprail.runtime.base import DispatchContext as DispatchContext
    from looprail.runtime.base import Outcome as Outcome
    from looprail.runtime.base import Request as Request
    from looprail.runtime.base import Runtime as Runtime
    from looprail.runtime.base import TaskWork as TaskWork
    from looprail.runtime.base import Usage as Usage
    from looprail.runtime.base import spawn_banner as spawn_banner
    from looprail.runtime.executors import InlineExecutor as InlineExecutor
    from looprail.runtime.executors import Settled as Settled
    from looprail.runtime.executors import interruptible_executor as interruptible_executor
    from looprail.runtime.executors import make_executor as make_executor
    from looprail.runtime.executors import run_all as run_all
    from looprail.runtime.local import LocalRuntime as LocalRuntime
    from looprail.runtime.local import Timeouts as Timeouts
    from looprail.runtime.registry import RuntimeSettings as RuntimeSettings
    from looprail.runtime.registry import available as available
    from looprail.runtime.registry import create_runtime as create_runtime
    from looprail.runtime.scripted import Call as Call
    from looprail.runtime.scripted import ScriptedRuntime as ScriptedRuntime

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
