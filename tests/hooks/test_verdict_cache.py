"""The per-manifest validation cache (`looprail.hooks.verdicts`): one changed manifest is one
validation, nothing changed in the manifests means no pydantic at all, the output is the same
byte for byte, and a damaged or planted cache entry never lets an invalid manifest through."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.hooks.registry import load_registry
from looprail.hooks.verdicts import _SHAPE, FORMAT, SUBDIR, VerdictCache, verdict_key
from tests.support import (
    GSD_CAPABILITIES,
    examples,
    feature,
    needs_corpus,
    run_cli,
    write_capability,
)


def _count_validations(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = VerdictCache.validate

    def counting(self, data, file, folder_name):
        seen.append(folder_name)
        return real(self, data, file, folder_name)

    monkeypatch.setattr(VerdictCache, "validate", counting)
    return seen


def _verdict_dir() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "looprail" / SUBDIR


def _entry(manifest: Path) -> Path:
    return Path(VerdictCache(str(_verdict_dir()))._entry(str(manifest)))


def _bad_and_good(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "caps"
    good = write_capability(root, feature("good"))
    # Valid JSON, invalid manifest: a step whose `ref.skill` it does not own.
    bad = write_capability(
        root,
        feature(
            "bad",
            steps=[
                {
                    "point": "plan:pre",
                    "ref": {"skill": "nope"},
                    "produces": [],
                    "consumes": [],
                    "onError": "skip",
                }
            ],
        ),
    )
    return root, Path(good) / "capability.json", Path(bad) / "capability.json"


def _loaded_ids(root: Path, project: Path) -> tuple[set[str], set[str]]:
    reg = load_registry(project, [root])
    return set(reg.capabilities), {f.id for f in reg.failed}


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    (p / ".planning").mkdir(parents=True)
    (p / ".planning" / "config.json").write_text("{}")
    return p


def test_only_the_changed_manifest_is_validated(tmp_path, project, monkeypatch):
    root = tmp_path / "caps"
    for name in ("alpha", "beta", "gamma"):
        write_capability(root, feature(name))
    seen = _count_validations(monkeypatch)
    first = load_registry(project, [root])
    assert sorted(seen) == ["alpha", "beta", "gamma"]
    seen.clear()
    again = load_registry(project, [root])
    assert seen == [] and again == first
    manifest = root / "beta" / "capability.json"
    manifest.write_text(manifest.read_text() + "\n")  # new bytes, same JSON
    changed = load_registry(project, [root])
    assert seen == ["beta"] and changed == first


def test_invalid_verdicts_are_cached_with_every_issue(tmp_path, project, monkeypatch):
    root, _, bad = _bad_and_good(tmp_path)
    fresh = load_registry(project, [root], use_cache=False)
    seen = _count_validations(monkeypatch)
    load_registry(project, [root])
    cached = load_registry(project, [root])
    assert seen == ["bad", "good"]  # validated once each, then read back
    assert [(f.id, f.issues) for f in cached.failed] == [(f.id, f.issues) for f in fresh.failed]
    assert cached.failed and str(cached.failed[0].issues[0]).startswith(str(bad))


def test_no_cache_env_validates_every_time(tmp_path, project, monkeypatch):
    root = tmp_path / "caps"
    write_capability(root, feature("alpha"))
    monkeypatch.setenv("LOOPRAIL_NO_CACHE", "1")
    seen = _count_validations(monkeypatch)
    load_registry(project, [root])
    load_registry(project, [root])
    assert seen == ["alpha", "alpha"]
    assert not _verdict_dir().exists()


def _manifest_module_used(monkeypatch) -> list[str]:
    """Which folders went to the pydantic models (`manifest.validate_declared`)."""
    from looprail.hooks import manifest

    used: list[str] = []
    real = manifest.validate_declared
    monkeypatch.setattr(
        manifest, "validate_declared", lambda d, f, n, *a: used.append(n) or real(d, f, n, *a)
    )
    return used


def test_the_derived_shape_table_is_cached_and_a_damaged_one_derived_again(
    tmp_path, project, monkeypatch
):
    """The first validation derives the shape check from the models and caches its table; a
    later process proves a changed valid manifest with the cached table, without pydantic; a
    table it cannot read is a miss (pydantic validates, the table is written again)."""
    root, good, bad = _bad_and_good(tmp_path)
    used = _manifest_module_used(monkeypatch)
    load_registry(project, [root])
    assert used == ["bad"]  # "good" was proven by the table derived for "bad"
    table = Path(VerdictCache(str(_verdict_dir()))._entry(_SHAPE))
    assert table.is_file()
    used.clear()
    good.write_text(good.read_text() + " ")  # a new verdict key: validated again
    assert "good" in _loaded_ids(root, project)[0]
    assert used == []  # proven by the cached table
    body = json.dumps(
        {
            "key": json.loads(table.read_text().partition("\n")[2])["key"],
            "value": {"type": "no such node"},
        }
    ).encode()
    table.write_bytes(f"{FORMAT} {zlib.crc32(body):08x}".encode() + b"\n" + body)
    good.write_text(good.read_text() + " ")
    loaded, failed = _loaded_ids(root, project)
    assert "good" in loaded and "bad" in failed
    assert used == ["good"]  # the damaged table proved nothing
    assert "no such node" not in table.read_text()  # derived and written again


def test_model_is_built_on_demand_and_equals_the_validated_one(tmp_path, project):
    from looprail.hooks.manifest import validate_manifest

    root = tmp_path / "caps"
    folder = write_capability(
        root, feature("alpha", config={"x.y": {"type": "boolean", "default": True}})
    )
    path = folder / "capability.json"
    first = load_registry(project, [root]).capabilities["alpha"]  # validated now
    second = load_registry(project, [root]).capabilities["alpha"]  # from the cache
    # Neither load builds the pydantic model (a valid shape is proven without it)...
    assert "manifest" not in vars(first) and "manifest" not in vars(second)
    # ...and the one built on demand is the one full validation gives.
    model, _, issues = validate_manifest(path.read_bytes(), str(path), folder)
    assert issues == [] and second.manifest == first.manifest == model


# --------------------------------------------------------------------------- hostile entries


def _plant_valid_verdict(bad: Path, good: Path, how: str) -> None:
    """Make the cache claim, by `how`, that the invalid manifest `bad` is valid."""
    entry, good_entry = _entry(bad), _entry(good)
    key = verdict_key(bad.read_bytes(), bad.parent.name)
    body = json.dumps({"key": key, "issues": []}).encode()
    header = f"looprail-verdict-1 {__import__('zlib').crc32(body):08x}".encode()
    if how == "copied":  # the entry of a valid manifest, under the invalid one's name
        shutil.copyfile(good_entry, entry)
    elif how == "corrupt":
        entry.write_bytes(header + b"\n" + body.replace(b"[]", b"[ ]"))
    elif how == "truncated":
        entry.write_bytes(entry.read_bytes()[:-7])
    elif how == "symlinked":  # a correct verdict file, reached through a symlink
        target = entry.with_name("elsewhere.json")
        target.write_bytes(header + b"\n" + body)
        entry.unlink()
        entry.symlink_to(target)
    elif how == "world-writable":
        entry.write_bytes(header + b"\n" + body)
        entry.chmod(0o666)
    elif how == "folder-writable":
        entry.write_bytes(header + b"\n" + body)
        entry.chmod(0o600)
        entry.parent.chmod(0o777)
    elif how == "other-owner":
        entry.write_bytes(header + b"\n" + body)
        entry.chmod(0o600)
        os.chown(entry, 65534, 65534)
    elif how == "garbage":
        entry.write_bytes(os.urandom(200))
    elif how == "directory":
        entry.unlink()
        entry.mkdir()
    else:  # pragma: no cover
        raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "copied",
        "corrupt",
        "truncated",
        "symlinked",
        "world-writable",
        "folder-writable",
        "other-owner",
        "garbage",
        "directory",
    ],
)
def test_damaged_or_planted_entries_never_let_an_invalid_manifest_through(
    tmp_path, project, how, monkeypatch
):
    if how == "other-owner" and os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    root, good, bad = _bad_and_good(tmp_path)
    assert _loaded_ids(root, project) == ({"good"}, {"bad"})  # fills the cache
    assert _entry(bad).is_file()
    _plant_valid_verdict(bad, good, how)
    seen = _count_validations(monkeypatch)
    assert _loaded_ids(root, project) == ({"good"}, {"bad"})
    assert "bad" in seen  # it was validated again, not taken from the entry


def test_a_correct_entry_is_used(tmp_path, project, monkeypatch):
    """The control for the test above: the same planting code with a genuine entry is read."""
    root, _, _ = _bad_and_good(tmp_path)
    _loaded_ids(root, project)
    seen = _count_validations(monkeypatch)
    assert _loaded_ids(root, project) == ({"good"}, {"bad"})
    assert seen == []


def test_a_verdict_from_other_rules_is_not_used(tmp_path, project, monkeypatch):
    """The key covers looprail's rules: a changed rule module is a new key."""
    import looprail.hooks.verdicts as verdicts

    root, _, _ = _bad_and_good(tmp_path)
    _loaded_ids(root, project)
    monkeypatch.setattr(verdicts, "rules_digest", lambda: "0" * 64)
    seen = _count_validations(monkeypatch)
    _loaded_ids(root, project)
    assert sorted(seen) == ["bad", "good"]


def test_unwritable_cache_only_costs_speed(tmp_path, project, monkeypatch):
    root, _, _ = _bad_and_good(tmp_path)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("LOOPRAIL_CACHE_DIR", str(blocker))
    assert _loaded_ids(root, project) == ({"good"}, {"bad"})
    assert _loaded_ids(root, project) == ({"good"}, {"bad"})


# --------------------------------------------------------------------------- the 44 manifests


@needs_corpus
def test_render_hooks_after_a_change_is_byte_identical_and_validates_one(tmp_path, project):
    caps = tmp_path / "caps"
    shutil.copytree(GSD_CAPABILITIES, caps)
    points = ["plan:pre", "execute:wave:pre", "verify:post"]

    def render(point: str, **env: str):
        p = run_cli(
            "loop", "render-hooks", point, "--raw", "--project", str(project),
            "--capabilities", str(caps), env=env,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        return p.stdout

    expected = {pt: render(pt, LOOPRAIL_NO_CACHE="1") for pt in points}
    assert all(render(pt) == expected[pt] for pt in points)  # fills both caches
    manifest = sorted(caps.glob("*/capability.json"))[3]
    manifest.write_text(manifest.read_text() + "  \n")
    code = (
        "import sys, io, contextlib, time\n"
        "time.sleep(0.06)\n"
        "from looprail.hooks.verdicts import VerdictCache as V\n"  # to count validations
        "calls = []\n"
        "real = V.validate\n"
        "V.validate = lambda *a: calls.append(a[3]) or real(*a)\n"
        "from looprail.cli import main\n"
        f"args = ['loop', 'render-hooks', 'plan:pre', '--raw', '--project', {str(project)!r}, '--capabilities', {str(caps)!r}]\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out): main(args)\n"
        "print(calls)\n"
        "print(out.getvalue(), end='')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    calls, _, out = p.stdout.partition("\n")
    assert calls == repr([manifest.parent.name]), p.stderr
    assert out == expected["plan:pre"]
    assert all(render(pt) == expected[pt] for pt in points)


# --------------------------------------------------------------------------- property


_MUTATIONS = st.sampled_from(
    [
        ("tier", "galaxy"),
        ("requires", ["missing-cap"]),
        ("version", "1.0"),
        ("activationKey", "not.declared"),
        ("title", ""),
        ("skills", ["a", "a"]),
        ("role", "runtime"),
        ("extra", 1),
        ("engines", {"gsd": ">=99"}),
        ("engines", {"gsd": ">=1.0.0"}),
        ("config", {"k": {"type": "enum", "values": []}}),
        ("taskContentResolver", None),
    ]
)


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(mutations=st.lists(st.tuples(st.integers(0, 3), _MUTATIONS), max_size=6))
def test_cached_and_uncached_registries_agree(tmp_path_factory, mutations):
    """For any set of (valid and invalid) manifests, the registry built from cached verdicts
    equals the one validated from scratch, on the second call and after edits."""
    tmp = tmp_path_factory.mktemp("prop")
    root = tmp / "caps"
    manifests = [feature(f"cap-{i}") for i in range(4)]
    for i, (field, value) in mutations:
        manifests[i][field] = value
    for m in manifests:
        write_capability(root, m)
    project = tmp / "project"
    (project / ".planning").mkdir(parents=True)

    def view(reg):
        return reg.to_json(), [(f.id, [str(i) for i in f.issues]) for f in reg.failed]

    fresh = view(load_registry(project, [root], use_cache=False))
    assert view(load_registry(project, [root])) == fresh  # fills
    assert view(load_registry(project, [root])) == fresh  # from cache
