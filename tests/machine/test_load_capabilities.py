"""A run reads its capabilities once (`session.load_project`): one capability set, from the
cache or (on a miss) the manifests; the set is the same under any config (activation is the
resolver's, per call), and a manifest edited after that read is never cached stale."""

from __future__ import annotations

import time

import pytest

from looprail.hooks import compiled as hooks_compiled
from looprail.hooks import registry
from looprail.hooks.resolve import cap_active, resolve
from looprail.machine.session.phase import load_project
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
    """Every `load_registry` call (the run reads the set through `trust.load_compiled`, whose
    cache rebuild is the one caller)."""
    calls: list[object] = []
    original = registry.load_registry

    def load_registry(*args, **kwargs):
        calls.append(kwargs.get("roots"))
        return original(*args, **kwargs)

    monkeypatch.setattr(registry, "load_registry", load_registry)
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
    assert len(counted) == 1  # a cache miss: one read of the manifests
    assert cap_active(loaded.compiled, "gated", loaded.config)
    again = load_project(project, ["caps"])
    assert len(counted) == 1  # a hit: no manifest read at all
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
    reason = off.compiled.why_inactive("gated", off.config)  # what `capability list` shows
    assert reason == "activationKey 'workflow.gated' is not truthy"
    assert not cap_active(off.compiled, "gated", off.config)
    write_config(project, {"workflow": {"gated": True}})
    on = load_project(project, [tmp_path / "caps"])
    assert len(counted) == 1  # the config is no input of the cache: a hit
    assert on.compiled.why_inactive("gated", on.config) is None
    assert cap_active(on.compiled, "gated", on.config)
    assert on.compiled == off.compiled


def test_a_manifest_edited_after_the_run_read_it_is_not_cached_stale(
    tmp_path, monkeypatch, counted
):
    project = _project(tmp_path, gated=True)
    original = registry.load_registry
    edited = dict(GATED, steps=[dict(STEP, ref={"skill": "s"}, onError="halt")])

    def read_then_edit(*args, **kwargs):
        out = original(*args, **kwargs)
        write_capability(tmp_path / "caps", edited)  # saved after the read
        return out

    monkeypatch.setattr(registry, "load_registry", read_then_edit)
    stale = hooks_compiled.load_compiled(project, [tmp_path / "caps"])
    monkeypatch.setattr(registry, "load_registry", original)
    assert stale.hooks_at("plan:pre")["steps"][0]["onError"] == "skip"  # what was read
    fresh = hooks_compiled.load_compiled(project, [tmp_path / "caps"])
    assert fresh.hooks_at("plan:pre")["steps"][0]["onError"] == "halt"
