"""looprail is typed for its users: it ships `py.typed`, and a type checker sees the real types of
what users touch (`run_phase`, `Loaded.compiled`, `HarnessRun.result`), not `Any`."""

from __future__ import annotations

import importlib.resources
import re
import sys
import textwrap
import uuid

import pytest

from tests.support import REPO


def test_the_package_ships_py_typed():
    assert importlib.resources.files("looprail").joinpath("py.typed").is_file()


def test_pyproject_configures_mypy_and_ci_runs_it():
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    mypy = pyproject["tool"]["mypy"]
    assert mypy["python_version"] == "3.11"
    assert "pydantic.mypy" in mypy["plugins"]
    assert mypy["check_untyped_defs"] is True and mypy["warn_unused_ignores"] is True
    assert any(
        dep.startswith("mypy") for dep in pyproject["project"]["optional-dependencies"]["test"]
    )
    assert ".venv/bin/mypy looprail" in (REPO / ".ci" / "run").read_text()


USER_CODE = """
from typing import assert_type, Literal

import looprail
from looprail.hooks.capset import CapabilitySet
from looprail.journal.recorder import EventRecord
from looprail.testing.harness import LoopHarness

loaded = looprail.load_project("project")
assert_type(loaded.compiled, CapabilitySet)
assert_type(loaded.compiled.warnings, tuple[str, ...])
runtime: looprail.Runtime = looprail.ScriptedRuntime()
outcome = looprail.run_phase(loaded, "1", runtime=runtime)
assert_type(outcome.result.status, Literal["shipped", "halted", "paused"])

run = LoopHarness("tmp").run()
assert_type(run.result, looprail.RunResult)
assert_type(run.events, list[EventRecord])
reveal_type(looprail.render)
looprail.run_phase(loaded, "1", runtime=42)  # not a runtime: the checker says so
"""


def test_a_type_checker_sees_the_types_users_touch(tmp_path):
    api = pytest.importorskip("mypy.api")
    # A fresh module name each time: mypy's shared cache (reused for looprail itself) keys a
    # checked file by module name and would replay an earlier run's messages for `user`.
    user = tmp_path / f"user_{uuid.uuid4().hex}.py"
    user.write_text(textwrap.dedent(USER_CODE))
    # mypy raises the interpreter's recursion limit (to 2**14) and leaves it so: put it back,
    # or every later test in this worker runs with it (a test of what a deep value does at the
    # usual limit then passed or failed by the order xdist gave it).
    limit = sys.getrecursionlimit()
    try:
        out, err, _ = api.run(
            [str(user), "--strict", "--no-error-summary", "--cache-dir", str(REPO / ".mypy_cache")]
        )
    finally:
        sys.setrecursionlimit(limit)
    lines = [line for line in out.splitlines() if line.startswith(str(user))]
    errors = [line for line in lines if ": error:" in line]
    # The one deliberate mistake is caught, and it is the only error: every assert_type held.
    assert len(errors) == 1, out + err
    assert re.search(r'Argument "runtime" to "run_phase" has incompatible type "int"', errors[0])
    assert any("Revealed type is" in line and "point: str" in line for line in lines), out
