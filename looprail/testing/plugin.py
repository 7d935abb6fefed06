"""The looprail pytest plugin (entry point `pytest11: looprail`): the `loop_harness` and
`scripted_runtime` fixtures."""

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
