"""A run reads its capabilities once (`session.load_project`): the registry it loads is what a
cache miss compiles, the compiled form is the same under any config (activation is the
resolver's, per call), and a manifest edited after that read is never cached stale."""

from __future__ import annotations

import time

import pytest

from looprail.hooks import compiled as hooks_compiled
from looprail.hooks import registry
from looprail.hooks.resolve import cap_active, resolve
from looprail.machine import session
from looprail.machine.session import load_project
from tests.support import feature, write_capability, write_config

STEP = {
    "point": "plan:pre",
    "ref": {"skill": "s"},
    "produces": [],
    "consumes": [],
    "onError": "skip",
}
CON = {
    "point": "plan:pre",
    "into": "planner",
    "fragment": {"path": "f.md"},
    "produces": [],
    "consumes": [],
}
GATED = feature(
    "gated",
    skills=["s"],
    steps=[STEP],
    contributions=[CON],
    activationKey="workflow.gated",
    config={"workflow.gated": {"type": "boolean", "default": False}},
)


@pytest.fixture
def counted(monkeypatch):
    """Every `load_registry` call, whoever makes it (the session or the cache's rebuild)."""
    calls: list[object] = []
    original = registry.load_registry

    def load_registry(*args, **kwargs):
        calls.append(kwargs.get("roots"))
        return original(*args, **kwargs)

    monkeypatch.setattr(registry, "load_registry", load_registry)
    monkeypatch.setattr(session, "load_registry", load_registry)  # imported at its top
    return calls


def _project(tmp_path, gated: bool):
    project = tmp_path / "project"
    (project / ".planning").mkdir(parents=True)
    write_config(project, {"workflow": {"gated": gated}})
    write_capability(tmp_path / "caps", GATED, files={"f.md": "fragment text"})
    time.sleep(0.1)  # older than the racy-stat margin: one read is enough to cache
    return project


def test_a_run_reads_its_capabilities_once_and_fills_the_cache(tmp_path, monkeypatch, counted):
    project = _project(tmp_path, gated=True)
    monkeypatch.chdir(tmp_path)  # a relative --capabilities folder, as a user types it
    loaded = load_project(project, ["caps"])
    assert len(counted) == 1  # a cache miss compiled the session's registry
    assert cap_active(loaded.compiled, "gated", loaded.config)
    again = load_project(project, ["caps"])
    assert len(counted) == 2  # a hit: only the session's own read
    assert again.compiled == loaded.compiled
    # What the run cached is what a load of its own builds, with no config at all.
    own = hooks_compiled.load_compiled(project, [tmp_path / "caps"], use_cache=False)
    assert loaded.compiled == own
    envelope = resolve(own, loaded.config, "plan:pre")
    assert [h["kind"] for h in envelope["activeHooks"]] == ["step", "contribution"]
    assert envelope["activeHooks"][1]["fragment"]["inline"] == "fragment text"


def test_the_compiled_form_does_not_depend_on_the_run_config(tmp_path, counted):
    project = _project(tmp_path, gated=False)
    off = load_project(project, [tmp_path / "caps"])
    assert off.registry.capabilities["gated"].active is False  # what `capability list` shows
    assert not cap_active(off.compiled, "gated", off.config)
    write_config(project, {"workflow": {"gated": True}})
    on = load_project(project, [tmp_path / "caps"])
    assert len(counted) == 2  # the config is no input of the cache: a hit
    assert on.registry.capabilities["gated"].active is True
    assert cap_active(on.compiled, "gated", on.config)
    assert on.compiled == off.compiled


def test_a_manifest_edited_after_the_run_read_it_is_not_cached_stale(tmp_path, counted):
    project = _project(tmp_path, gated=True)
    roots = [registry.Root(tmp_path / "caps", registry.FIRST_PARTY)]
    roots += registry.search_roots(project)
    read = registry.load_registry(project, roots=roots)
    edited = dict(GATED, steps=[dict(STEP, ref={"skill": "s"}, onError="halt")])
    write_capability(tmp_path / "caps", edited)  # saved after the read, before the stat
    stale = hooks_compiled.load_compiled(project, [tmp_path / "caps"], registry=read)
    assert stale["points"]["plan:pre"]["steps"][0]["onError"] == "skip"  # the run's read
    fresh = hooks_compiled.load_compiled(project, [tmp_path / "caps"])
    assert fresh["points"]["plan:pre"]["steps"][0]["onError"] == "halt"


def test_a_registry_of_other_roots_is_not_compiled(tmp_path, counted):
    project = _project(tmp_path, gated=True)
    other = registry.load_registry(project, [])  # no first-party folder: not the same path
    compiled = hooks_compiled.load_compiled(project, [tmp_path / "caps"], registry=other)
    assert "gated" in compiled["caps"]
    assert len(counted) == 2  # the cache loaded its own
