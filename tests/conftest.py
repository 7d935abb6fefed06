"""Fixtures only; helpers live in the plain module `tests.support`."""

from __future__ import annotations

import pytest


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
