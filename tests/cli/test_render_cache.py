"""`loop render-hooks` over the one cache (the capability set's, `hooks/compiled.py`): whatever
changes between two calls (a manifest, a fragment, the config, a capability added or removed,
looprail's own code), a call's output is the output of an uncached call."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import (
    GSD_CAPABILITIES,
    feature,
    needs_corpus,
    run_cli,
    write_capability,
    write_config,
)

SETTLE = 0.06  # past the cache's 50 ms racy-stat margin


def _contribution(path: str, point: str = "plan:pre") -> dict[str, object]:
    return {
        "point": point,
        "into": "planner",
        "fragment": {"path": path},
        "produces": [],
        "consumes": [],
    }


def _manifest(cap: str, n: int = 0) -> dict[str, object]:
    return feature(
        cap,
        activationKey=f"cached.{cap}",
        config={f"cached.{cap}": {"type": "boolean", "default": True}},
        contributions=[_contribution("f.md"), _contribution("f.md", "execute:task")][: 1 + n % 2],
    )


def _render(project: Path, root: Path, argv: list[str], cached: bool = True):
    p = run_cli(
        "loop",
        "render-hooks",
        *argv,
        "--project",
        str(project),
        "--capabilities",
        str(root),
        env={"LOOPRAIL_NO_CACHE": None if cached else "1"},
    )
    return p.returncode, p.stdout, p.stderr


def _setup(tmp: Path) -> tuple[Path, Path]:
    project, root = tmp / "project", tmp / "caps"
    project.mkdir()
    write_capability(root, _manifest("alpha"), files={"f.md": "alpha text"})
    write_capability(root, _manifest("beta"), files={"f.md": "beta text"})
    return project, root


def test_an_edited_manifest_is_seen_by_the_next_call(tmp_path):
    """The stale-cache guard: no pause between the edit and the call (an editor's save, then
    the host's next call)."""
    project, root = _setup(tmp_path)
    assert '"capId": "beta"' in _render(project, root, ["plan:pre", "--raw"])[1]
    time.sleep(SETTLE)
    assert '"capId": "beta"' in _render(project, root, ["plan:pre", "--raw"])[1]  # a hit
    gone = _manifest("beta")
    gone["contributions"] = []
    write_capability(root, gone, files={"f.md": "beta text"})
    out = _render(project, root, ["plan:pre", "--raw"])
    assert out == _render(project, root, ["plan:pre", "--raw"], cached=False)
    assert '"capId": "beta"' not in out[1] and '"capId": "alpha"' in out[1]


def _count_builds(monkeypatch) -> list[int]:
    """A list that gets one item each time the set is built (a cache miss)."""
    from looprail.hooks import registry

    builds: list[int] = []
    real_load = registry.load_registry

    def counting_load(*args, **kwargs):
        builds.append(1)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(registry, "load_registry", counting_load)
    return builds


def test_a_change_to_looprails_code_rebuilds_the_set(tmp_path, monkeypatch):
    """The cache is keyed by the stat of every module of the package (a development checkout),
    with no list of files: a module edited, or a new one, is a new set."""
    from looprail.hooks import compiled

    package = tmp_path / "package"
    (package / "sub").mkdir(parents=True)
    module = package / "sub" / "module.py"
    module.write_text("v1")
    monkeypatch.setattr(compiled, "PACKAGE", str(package))
    project, root = _setup(tmp_path)
    time.sleep(SETTLE)  # the fragments settled: one build reads them once
    compiled.load_compiled(project, [root])
    builds = _count_builds(monkeypatch)
    compiled.load_compiled(project, [root])
    assert builds == []  # a hit
    module.write_text("v2, longer")
    compiled.load_compiled(project, [root])
    assert len(builds) == 1, "the cache was served although the code that builds it changed"
    (package / "new.py").write_text("")
    compiled.load_compiled(project, [root])
    assert len(builds) == 2, "a new module did not rebuild the set"
    compiled.load_compiled(project, [root])
    assert len(builds) == 2  # and the new state is a hit again


def test_an_installed_package_is_stamped_by_its_folder(tmp_path, monkeypatch):
    """Installed in site-packages, the code changes only by a reinstall, which replaces the
    package folder: its modules are not scanned, and a replaced folder is a new set."""
    from looprail.hooks import compiled

    package = tmp_path / "venv" / "site-packages" / "looprail"
    package.mkdir(parents=True)
    (package / "module.py").write_text("v1")
    monkeypatch.setattr(compiled, "PACKAGE", str(package))
    project, root = _setup(tmp_path)
    time.sleep(SETTLE)
    compiled.load_compiled(project, [root])
    builds = _count_builds(monkeypatch)
    (package / "module.py").write_text("v1, edited in place")
    compiled.load_compiled(project, [root])
    assert builds == []  # an installed module is not scanned
    shutil.rmtree(package)  # a reinstall: the files removed, then written again
    package.mkdir()
    (package / "module.py").write_text("v1")
    compiled.load_compiled(project, [root])
    assert len(builds) == 1, "the cache was served although the package was reinstalled"
    monkeypatch.setattr(compiled, "__version__", "9.9.9")  # an upgrade
    compiled.load_compiled(project, [root])
    assert len(builds) == 2, "the cache was served although the version changed"


# --------------------------------------------------------------------------- the property

ARGVS = (
    ["plan:pre", "--raw"],
    ["plan:pre"],
    ["execute:task", "--raw"],
    ["plan:pre", "--strict"],
    ["plan:pre", "--active-cap", "alpha"],
)


def _edit(project: Path, root: Path, op: str, n: int) -> None:
    config = project / ".planning" / "config.json"
    if op == "fragment":
        (root / "alpha" / "f.md").write_text(f"alpha text {n}")
    elif op == "config-off":
        write_config(project, {"cached": {"alpha": n % 2 == 0}})
    elif op == "config-unknown":
        write_config(project, {f"unknown{n}": 1})
    elif op == "config-broken":
        write_config(project, "{ not json" + " " * n)
    elif op == "config-gone":
        config.unlink(missing_ok=True)
    elif op == "manifest":
        write_capability(root, _manifest("beta", n), files={"f.md": "beta text"})
    elif op == "add-cap":
        write_capability(root, _manifest(f"new{n % 3}"), files={"f.md": f"new {n}"})
    elif op == "remove-cap":
        shutil.rmtree(root / f"new{n % 3}", ignore_errors=True)
    elif op == "project-cap-gone":
        shutil.rmtree(project / ".looprail", ignore_errors=True)
    elif op == "project-cap":
        write_capability(
            project / ".looprail" / "capabilities", _manifest("gamma"), files={"f.md": "g"}
        )
    elif op == "wait":
        time.sleep(SETTLE)


STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "render",
                "render",
                "render",
                "wait",
                "fragment",
                "config-off",
                "config-unknown",
                "config-broken",
                "config-gone",
                "manifest",
                "add-cap",
                "remove-cap",
                "project-cap",
                "project-cap-gone",
            ]
        ),
        st.integers(0, len(ARGVS) - 1),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_every_call_renders_what_an_uncached_call_renders(steps):
    tmp = Path(tempfile.mkdtemp(prefix="looprail-cache-"))
    try:
        project, root = _setup(tmp)
        cache = os.environ["XDG_CACHE_HOME"]
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")  # this example's own cache
        try:
            for i, (op, which) in enumerate(steps):
                if op != "render":
                    _edit(project, root, op, i)
                    continue
                argv = ARGVS[which]
                want = _render(project, root, argv, cached=False)
                # after a change the first call builds the set's entry, the next ones read it
                for _ in range(3):
                    assert _render(project, root, argv) == want, (steps, i)
                    time.sleep(SETTLE)
        finally:
            os.environ["XDG_CACHE_HOME"] = cache
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@needs_corpus
def test_the_44_manifests_render_alike_cached_and_after_an_edit(tmp_path):
    caps = tmp_path / "caps"
    shutil.copytree(GSD_CAPABILITIES, caps)
    project = tmp_path / "project"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text("{}")
    points = ["plan:pre", "execute:wave:pre", "verify:post"]

    def render(point: str, cached: bool = True) -> str:
        code, out, err = _render(project, caps, [point, "--raw"], cached=cached)
        assert code == 0, err
        return out

    expected = {pt: render(pt, cached=False) for pt in points}
    assert all(render(pt) == expected[pt] for pt in points)  # fills the cache
    assert all(render(pt) == expected[pt] for pt in points)  # reads it
    manifest = sorted(caps.glob("*/capability.json"))[3]
    manifest.write_text(manifest.read_text() + "  \n")  # new bytes, the same manifest
    assert all(render(pt) == expected[pt] for pt in points)
