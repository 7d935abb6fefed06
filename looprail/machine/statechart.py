"""python-statemachine, imported without asyncio.

python-statemachine imports `asyncio` at the top of `callbacks`, `invoke` and `utils` for its
async engine, which looprail never uses: every callback of looprail's charts is a plain
function, so the library picks its `SyncEngine` and touches `asyncio` only on async paths.
Importing asyncio (with ssl, its event loops and transports) costs a `looprail run` ~40 ms of
CPU for nothing. While the library is imported, `sys.modules["asyncio"]` holds a stand-in whose
first attribute lookup imports the real asyncio and answers from it; the stand-in leaves
`sys.modules` as soon as the import is done, so everyone else who imports asyncio gets the real
module. Every looprail module imports the library from here.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _Deferred(types.ModuleType):
    """A module that imports the real one on its first attribute lookup and forwards to it."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get(self.__name__) is self:  # still inside the window: step aside
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


def _import_statemachine() -> None:
    if "asyncio" in sys.modules or "statemachine" in sys.modules:
        return  # nothing to save
    stand_in = _Deferred("asyncio")
    sys.modules["asyncio"] = stand_in
    try:
        import statemachine
        import statemachine.orderedset  # noqa: F401
    finally:
        if sys.modules.get("asyncio") is stand_in:
            del sys.modules["asyncio"]


_import_statemachine()

from statemachine import State, StateChart  # noqa: E402
from statemachine.exceptions import TransitionNotAllowed  # noqa: E402
from statemachine.orderedset import OrderedSet  # noqa: E402

__all__ = ["OrderedSet", "State", "StateChart", "TransitionNotAllowed"]
