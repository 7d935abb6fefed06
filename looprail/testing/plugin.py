"""The looprail pytest plugin (entry point `pytest11: looprail`): fixtures for testing
capabilities against the real machine without subprocesses.

- `loop_harness`: a `LoopHarness` over a fresh project in the test's `tmp_path`;
- `scripted_runtime`: that harness's `ScriptedRuntime`, to script skills, agents and tasks.
"""

from __future__ import annotations

import pytest

from looprail.runtime.scripted import ScriptedRuntime
from looprail.testing.harness import LoopHarness


@pytest.fixture
def loop_harness(tmp_path_factory: pytest.TempPathFactory) -> LoopHarness:
    """A throwaway looprail project (phase 1 in `.planning/phases/01-test/`), capabilities
    written with `.capability(...)`, every unit of work answered by a scripted runtime."""
    return LoopHarness(tmp_path_factory.mktemp("looprail"))


@pytest.fixture
def scripted_runtime(loop_harness: LoopHarness) -> ScriptedRuntime:
    """The `ScriptedRuntime` behind `loop_harness` (script outcomes with `.script(key, value)`)."""
    return loop_harness.runtime
