"""Fixtures only; helpers live in the plain module `tests.support`."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import settings

from tests.support import EXAMPLE, HYPOTHESIS_PROFILE, examples

# Properties that name no example count run hypothesis's usual 100, or ten times that with
# LOOPRAIL_HYPOTHESIS=thorough (explicit counts scale the same way through `examples(n)`).
settings.register_profile("looprail-default", max_examples=examples(100))
settings.register_profile("looprail-thorough", max_examples=examples(100), deadline=None)
settings.load_profile(f"looprail-{HYPOTHESIS_PROFILE}")


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


@pytest.fixture
def hello(tmp_path):
    """A copy of the bundled example project (`examples/hello-loop`)."""
    project = tmp_path / "hello-loop"
    shutil.copytree(EXAMPLE, project)
    return project
