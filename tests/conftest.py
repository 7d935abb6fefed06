"""Fixtures, and the suite's start-up settings (`pytest_configure`); helpers live in the plain
module `tests.support`."""

from __future__ import annotations

import compileall
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import EXAMPLE, HYPOTHESIS_PROFILE, REPO, examples

# Properties that name no example count run hypothesis's usual 100, or ten times that with
# LOOPRAIL_HYPOTHESIS=thorough (explicit counts scale the same way through `examples(n)`).
settings.register_profile("looprail-default", max_examples=examples(100))
settings.register_profile("looprail-thorough", max_examples=examples(100), deadline=None)
settings.load_profile(f"looprail-{HYPOTHESIS_PROFILE}")


def pytest_configure(config):
    """Start-up costs the suite pays hundreds of times, paid once.

    - Bytecode: with PYTHONDONTWRITEBYTECODE set (as on these machines), every `looprail`
      process a test starts compiled the package from source again, and every xdist worker
      rewrote every test module's asserts again. The package is compiled once here, before the
      workers start, and bytecode is written for the suite's own processes.
    - `#!/usr/bin/env python3` (the example's agents) finds the interpreter running the tests,
      as in an activated virtual environment, not a version manager's shell shim (pyenv's costs
      about 0.15 s of bash per call).
    - Ctrl-C reaches the processes the tests start: a shell starts a background job (`… &`)
      with SIGINT ignored, every child inherits that, and the tests that stop a `looprail run`
      with SIGINT then wait for a run that never hears it. Caught here, SIGINT is back to its
      default in every child (exec resets a caught signal, not an ignored one).
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        compileall.compile_dir(REPO / "looprail", quiet=2)
    here = str(Path(sys.executable).parent)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != here:
        os.environ["PATH"] = here + os.pathsep + os.environ.get("PATH", "")


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (the default, from pyproject's addopts): half as many workers again as there
    are CPUs. About a fifth of the suite's time is tests waiting (timeouts that must expire,
    real processes starting, a browser, servers); a spare worker fills those waits. Measured
    on 2 cores, 2 then 3 workers back to back: 0.87x and 0.96x the wall time (docs/testing.md).
    PYTEST_XDIST_AUTO_NUM_WORKERS or `-n N` still decide when given."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(2, (3 * (cpus or 1) + 1) // 2)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Never read or write the developer's real ~/.looprail or ~/.cache during tests."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.delenv("LOOPRAIL_HOME", raising=False)
    monkeypatch.delenv("LOOPRAIL_CAPABILITIES", raising=False)
    monkeypatch.delenv("LOOPRAIL_CACHE_DIR", raising=False)
    monkeypatch.delenv("LOOPRAIL_NO_CACHE", raising=False)
    return home


@pytest.fixture(autouse=True)
def _recursion_limit_kept():
    """A test leaves the interpreter's recursion limit as it found it (mypy's API, for one,
    raises it for good): otherwise a later test of what a deeply nested value does passes or
    fails by the order xdist gives it. The limit is put back and the leaking test fails."""
    limit = sys.getrecursionlimit()
    yield
    left = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    assert left == limit, f"the test left the recursion limit at {left} (was {limit})"


@pytest.fixture
def hello(tmp_path):
    """A copy of the bundled example project (`examples/hello-loop`)."""
    project = tmp_path / "hello-loop"
    shutil.copytree(EXAMPLE, project)
    return project
