"""The resolver: activeness (`when` precedence, JS truthiness, activationKey, pointFrom),
ordering (topological with capId tie-break; steps → contributions → gates), projection and
the rendered markdown."""

from __future__ import annotations

import marshal
import stat
from pathlib import Path

import pytest

from looprail.hooks.compiled import load_compiled
from looprail.hooks.resolve import InvalidPointError, render, resolve
from tests.support import feature, write_capability, write_config


def step(skill, **kw):
    base = {
        "point": "plan:pre",
        "ref": {"skill": skill},
        "produces": [],
        "consumes": [],
        "onError": "skip",
    }
    base.update(kw)
    return base


def compiled_of(tmp_path, *manifests, files=None):
    root = tmp_path / "caps"
    for m in manifests:
        write_capability(root, m, files=(files or {}).get(m["id"]))
    return load_compiled(tmp_path / "project", [root], use_cache=False)


def ids(env):
    return [(h["capId"], h["kind"]) for h in env["activeHooks"]]


def test_unknown_point_lists_the_twelve(tmp_path):
    c = compiled_of(tmp_path)
    with pytest.raises(InvalidPointError) as exc:
        resolve(c, None, "execute:task")
    assert "Valid points: discuss:pre, discuss:post, plan:pre" in str(exc.value)


def test_empty_point_envelope(tmp_path):
    env = resolve(compiled_of(tmp_path), None, "ship:post")
    assert env == {
        "point": "ship:post",
        "activeHooks": [],
        "rendered": "_No active hooks at ship:post._",
    }


CFG = {"k.on": {"type": "boolean", "default": True}, "k.off": {"type": "boolean", "default": False}}


@pytest.mark.parametrize(
    "when, config, active",
    [
        (None, None, True),
        ("k.on", None, True),  # declared default true
        ("k.off", None, False),  # declared default false
        ("k.off", {"k": {"off": True}}, True),  # config overrides the default
        ("k.on", {"k": {"on": False}}, False),
        # A declared boolean counts only as a boolean; anything else is the default.
        ("k.on", {"k": {"on": 0}}, True),
        ("k.on", {"k": {"on": ""}}, True),
        ("k.off", {"k": {"off": "false"}}, False),
        ("k.off", {"k": {"off": 1}}, False),
        ("k.off", {"k": {"off": []}}, False),
        ("k.off", {"k": {"off": {}}}, False),
        ("k.on", {"k": {"on": None}}, True),
        ("k.off", {"k.off": True}, False),  # a literal dotted key is not a path (as the reference)
        ("k.off", {"k": True}, False),  # not an object on the way: falls back to default
    ],
)
def test_when_precedence_and_truthiness(tmp_path, when, config, active):
    s = step("s") if when is None else step("s", when=when)
    c = compiled_of(tmp_path, feature("cap", skills=["s"], config=CFG, steps=[s]))
    assert bool(resolve(c, config, "plan:pre")["activeHooks"]) is active


def test_prototype_segments_never_resolve(tmp_path):
    cfg = {"k.on": {"type": "boolean", "default": False}}
    c = compiled_of(
        tmp_path, feature("cap", skills=["s"], config=cfg, steps=[step("s", when="k.on")])
    )
    assert resolve(c, {"__proto__": {"k": {"on": True}}}, "plan:pre")["activeHooks"] == []


def test_activation_key_gates_the_whole_capability(tmp_path):
    cfg = {"x.enabled": {"type": "boolean", "default": False}}
    c = compiled_of(
        tmp_path,
        feature("cap", skills=["s"], config=cfg, activationKey="x.enabled", steps=[step("s")]),
    )
    assert resolve(c, None, "plan:pre")["activeHooks"] == []
    assert ids(resolve(c, {"x": {"enabled": True}}, "plan:pre")) == [("cap", "step")]


def test_point_from(tmp_path):
    cfg = {"x.point": {"type": "string", "default": "plan:post"}}
    c = compiled_of(
        tmp_path, feature("cap", skills=["s"], config=cfg, steps=[step("s", pointFrom="x.point")])
    )
    assert resolve(c, None, "plan:pre")["activeHooks"] == []
    assert len(resolve(c, {"x": {"point": "plan:pre"}}, "plan:pre")["activeHooks"]) == 1


def test_order_steps_contributions_gates_and_topology(tmp_path):
    gate = {"point": "plan:pre", "check": {"query": "q"}, "blocking": False, "onError": "skip"}
    con = {
        "point": "plan:pre",
        "into": "planner",
        "fragment": {"inline": "F"},
        "produces": [],
        "consumes": [],
    }
    c = compiled_of(
        tmp_path,
        feature("aaa", skills=["a"], steps=[step("a", consumes=["B.md"])], gates=[gate]),
        feature("bbb", skills=["b"], steps=[step("b", produces=["B.md"])], contributions=[con]),
        feature("ccc", skills=["c"], steps=[step("c")], gates=[gate]),
    )
    assert ids(resolve(c, None, "plan:pre")) == [
        ("bbb", "step"),
        ("ccc", "step"),
        ("aaa", "step"),  # aaa waits for B.md
        ("bbb", "contribution"),
        ("aaa", "gate"),
        ("ccc", "gate"),
    ]


def test_released_entries_queue_fifo_not_resorted(tmp_path):
    """The reference's Kahn queue: `zzz` (ready at start) stays before `mmm` (released later)."""
    c = compiled_of(
        tmp_path,
        feature("aaa", skills=["a"], steps=[step("a", produces=["A"])]),
        feature("mmm", skills=["m"], steps=[step("m", consumes=["A"])]),
        feature("zzz", skills=["z"], steps=[step("z")]),
    )
    assert [h["capId"] for h in resolve(c, None, "plan:pre")["activeHooks"]] == [
        "aaa",
        "zzz",
        "mmm",
    ]


def test_projection_only_present_fields(tmp_path):
    cfg = {"w.x": {"type": "boolean", "default": True}, "w.level": {"type": "number", "default": 2}}
    con = {
        "point": "plan:pre",
        "into": "planner",
        "fragment": {"inline": "F"},
        "produces": [],
        "consumes": ["C"],
        "configValues": {"level": "w.level", "ghost": "w.nothing"},
    }
    c = compiled_of(
        tmp_path,
        feature(
            "cap",
            skills=["s"],
            config=cfg,
            contributions=[con],
            steps=[step("s", when="w.x", supportsReviewerLanes=True)],
        ),
    )
    hooks = resolve(c, {"w": {"level": 3}}, "plan:pre")["activeHooks"]
    assert hooks[0] == {
        "capId": "cap",
        "kind": "step",
        "ref": {"skill": "s"},
        "when": "w.x",
        "onError": "skip",
        "supportsReviewerLanes": True,
    }
    assert hooks[1] == {
        "capId": "cap",
        "kind": "contribution",
        "into": "planner",
        "fragment": {"inline": "F"},
        "consumes": ["C"],
        "configValues": {"level": 3},
    }


def test_render_format():
    hooks = [
        {
            "capId": "a",
            "kind": "step",
            "ref": {"skill": "s"},
            "produces": ["P"],
            "when": "w",
            "onError": "skip",
        },
        {"capId": "b", "kind": "step", "ref": {"command": "x y"}, "fragment": {"inline": "body\n"}},
        {"capId": "c", "kind": "step", "ref": {"agent": "ag"}, "fragment": {"path": "f.md"}},
        {
            "capId": "d",
            "kind": "contribution",
            "into": "planner",
            "fragment": {"inline": "T"},
            "consumes": ["C"],
        },
        {
            "capId": "e",
            "kind": "gate",
            "check": {"query": "q"},
            "blocking": True,
            "onError": "halt",
            "when": "k",
        },
    ]
    assert render("plan:pre", hooks) == (
        "### Step 1: skill:s (a)\n- produces: P\n- when: `w`\n- onError: skip\n\n"
        '### Step 2: {"command":"x y"} (b)\n\nbody\n\n\n'
        "### Step 3: agent:ag (c)\n\n_Step fragment path is declared but not rendered by loop-resolver: f.md_\n\n"
        '<contribution from="d" into="planner">\nT\n- consumes: C\n</contribution>\n\n'
        '**Gate** (e): check={"query":"q"}, blocking=true, onError=halt\n- when: `k`'
    )


def test_failed_overlay_with_gate_fails_open_with_warning(tmp_path):
    project = tmp_path / "project"
    bad = feature(
        "third",
        gates=[{"point": "ship:pre", "check": {"query": "q"}, "blocking": True, "onError": "oops"}],
    )
    write_capability(project / ".looprail" / "capabilities", bad)
    c = load_compiled(project, [], use_cache=False)
    env = resolve(c, None, "ship:pre")
    assert env["activeHooks"] == []
    assert env["warnings"][0].startswith('capability "third" failed to load (')
    assert "its gate at ship:pre is SKIPPED and NOT enforced (failing open)" in env["warnings"][0]
    assert "Run `looprail capability remove third` to remove it" in env["warnings"][0]
    assert "warnings" not in resolve(c, None, "ship:post")


def test_first_party_wins_over_overlay(tmp_path):
    project = tmp_path / "project"
    write_capability(tmp_path / "fp", feature("cap", skills=["s"], steps=[step("s")]))
    write_capability(
        project / ".looprail" / "capabilities", feature("cap", skills=["t"], steps=[step("t")])
    )
    c = load_compiled(project, [tmp_path / "fp"], use_cache=False)
    assert resolve(c, None, "plan:pre")["activeHooks"][0]["ref"] == {"skill": "s"}


def test_cache_is_invalidated_by_manifest_and_fragment_changes(tmp_path):
    root = tmp_path / "caps"
    con = {
        "point": "plan:pre",
        "into": "planner",
        "fragment": {"path": "f.md"},
        "produces": [],
        "consumes": [],
    }
    d = write_capability(root, feature("cap", contributions=[con]), files={"f.md": "one"})
    project = tmp_path / "project"
    first = load_compiled(project, [root])
    assert resolve(first, None, "plan:pre")["activeHooks"][0]["fragment"]["inline"] == "one"
    (d / "f.md").write_text("two, longer")
    assert (
        resolve(load_compiled(project, [root]), None, "plan:pre")["activeHooks"][0]["fragment"][
            "inline"
        ]
        == "two, longer"
    )
    write_capability(root, feature("new", skills=["n"], steps=[step("n")]))
    assert [
        h["capId"] for h in resolve(load_compiled(project, [root]), None, "plan:pre")["activeHooks"]
    ] == ["new", "cap"]


def test_cache_hit_returns_same_result(tmp_path):
    root = tmp_path / "caps"
    write_capability(root, feature("cap", skills=["s"], steps=[step("s")]))
    a = load_compiled(tmp_path, [root])
    b = load_compiled(tmp_path, [root])
    assert a == b


def test_malformed_config_is_absent_with_one_warning(tmp_path):
    from looprail.config import load_project_config

    write_config(tmp_path, "{not json")
    cfg, warnings = load_project_config(tmp_path)
    assert cfg is None and len(warnings) == 1 and "not valid JSON" in warnings[0]
    write_config(tmp_path, "[1, 2]")
    cfg, warnings = load_project_config(tmp_path)
    assert cfg is None and "not a JSON object" in warnings[0]


def test_public_api_is_lazy_and_complete():
    import subprocess
    import sys

    code = (
        "import sys, looprail\n"
        "assert 'pydantic' not in sys.modules and 'statemachine' not in sys.modules\n"
        "for name in looprail.__all__: getattr(looprail, name)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


# --------------------------------------------------------------------------- cache safety


def _cache_files(tmp_path):
    import os

    base = os.path.join(os.environ["XDG_CACHE_HOME"], "looprail")
    return [Path(base, n) for n in os.listdir(base) if n.startswith("registry-")]


def _contribution(path):
    return {
        "point": "plan:pre",
        "into": "planner",
        "fragment": {"path": path},
        "produces": [],
        "consumes": [],
    }


def _inline(compiled):
    return [h["fragment"]["inline"] for h in resolve(compiled, None, "plan:pre")["activeHooks"]]


def test_a_corrupted_cache_entry_is_rebuilt_never_served(tmp_path):
    root = tmp_path / "caps"
    write_capability(
        root, feature("cap", contributions=[_contribution("f.md")]), files={"f.md": "alpha"}
    )
    project = tmp_path / "project"
    assert _inline(load_compiled(project, [root])) == ["alpha"]
    (cache,) = _cache_files(tmp_path)
    raw = cache.read_bytes()
    # A flipped byte that still parses must not become a wrong envelope.
    cache.write_bytes(raw.replace(b"alpha", b"omega"))
    assert _inline(load_compiled(project, [root])) == ["alpha"]
    for broken in (raw[: len(raw) // 2], b"", b"\xff\xfe", b"[" * 100_000, b'{"key": 1}'):
        cache.write_bytes(broken)
        assert _inline(load_compiled(project, [root])) == ["alpha"]


def _one_cached_capability(tmp_path):
    """A capability whose fragment says "alpha", its set cached: (project, root, the cache
    entry, its (key, code stamp, deps, the set's data))."""
    root = tmp_path / "caps"
    write_capability(
        root, feature("cap", contributions=[_contribution("f.md")]), files={"f.md": "alpha"}
    )
    project = tmp_path / "project"
    load_compiled(project, [root])
    (cache,) = _cache_files(tmp_path)
    return project, root, cache, marshal.loads(cache.read_bytes().partition(b"\n")[2])


def _omega(data):
    """The set's data with its fragment saying "omega" (a set this code never built)."""
    return marshal.loads(marshal.dumps(data).replace(b"alpha", b"omega"))


def _checked(body: bytes) -> bytes:
    """`body` behind a good header: the set cache's format and its CRC-32."""
    import zlib

    from looprail.hooks import compiled as compiled_mod

    return f"{compiled_mod.CACHE_FORMAT} {zlib.crc32(body):08x}\n".encode() + body


def test_a_well_checksummed_cache_of_the_wrong_shape_is_rebuilt(tmp_path):
    project, root, cache, (key, stamp, deps, good) = _one_cached_capability(tmp_path)
    (cap,) = good["capabilities"]
    no_id = [{k: v for k, v in cap[0].items() if k != "id"}, *cap[1:]]
    bodies = [
        marshal.dumps((key, stamp, deps, caps))
        for caps in (
            {},
            {**good, "failed": {}},
            {**good, "capabilities": [cap[:3]]},
            {**good, "capabilities": [no_id]},
            {**good, "roots": [[1, "first-party"]]},
        )
    ]
    # the entry itself of another shape (a dict, a triple, deps not a dict, the set as bytes),
    # or of other code (another stamp)
    bodies += [
        marshal.dumps({"key": key, "stamp": stamp, "deps": deps, "caps": good}),
        marshal.dumps((key, deps, good)),
        marshal.dumps((key, stamp, list(deps), good)),
        marshal.dumps((key, stamp, deps, marshal.dumps(good))),
        marshal.dumps((key, [stamp[0], 0], deps, _omega(good))),
    ]
    for body in bodies:
        cache.write_bytes(_checked(body))
        assert _inline(load_compiled(project, [root])) == ["alpha"]


def test_the_cache_sees_a_missing_fragment_appear(tmp_path):
    root = tmp_path / "caps"
    folder = write_capability(root, feature("cap", contributions=[_contribution("frag/f.md")]))
    (folder / "frag").mkdir()
    project = tmp_path / "project"
    first = load_compiled(project, [root])
    assert [f.id for f in first.failed] == ["cap"]
    (folder / "frag" / "f.md").write_text("now here")
    assert _inline(load_compiled(project, [root])) == ["now here"]


def test_the_cache_sees_a_fragment_symlink_retargeted(tmp_path):
    import os

    root = tmp_path / "caps"
    folder = write_capability(
        root,
        feature("cap", contributions=[_contribution("a/link.md")]),
        files={"b/x.md": "x text", "b/y.md": "y text"},
    )
    (folder / "a").mkdir()
    os.symlink("../b/x.md", folder / "a" / "link.md")
    project = tmp_path / "project"
    assert _inline(load_compiled(project, [root])) == ["x text"]
    os.remove(folder / "a" / "link.md")
    os.symlink("../b/y.md", folder / "a" / "link.md")
    assert _inline(load_compiled(project, [root])) == ["y text"]


def test_a_fragment_edited_while_the_cache_is_built_is_not_cached_stale(tmp_path, monkeypatch):
    from looprail.hooks import registry

    root = tmp_path / "caps"
    folder = write_capability(
        root, feature("cap", contributions=[_contribution("f.md")]), files={"f.md": "one"}
    )
    project = tmp_path / "project"
    original = registry.load_registry
    edits = []

    def load_then_edit(*args, **kwargs):
        out = original(*args, **kwargs)
        if not edits:  # an editor saves right after the fragment was read, before its stat
            edits.append((folder / "f.md").write_text("two, longer"))
        return out

    monkeypatch.setattr(registry, "load_registry", load_then_edit)
    load_compiled(project, [root])
    monkeypatch.setattr(registry, "load_registry", original)
    assert _inline(load_compiled(project, [root])) == ["two, longer"]


def test_the_cache_sees_a_dangling_capability_symlink_come_alive(tmp_path):
    import os

    root = tmp_path / "caps"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    os.symlink(elsewhere / "cap", root / "cap")  # dangling for now
    project = tmp_path / "project"
    assert load_compiled(project, [root]).capabilities == {}
    write_capability(elsewhere, feature("cap", skills=["s"], steps=[step("s")]))
    assert list(load_compiled(project, [root]).capabilities) == ["cap"]


def test_a_cache_entry_others_could_have_written_is_never_read(tmp_path):
    """An entry says which hooks run: one writable by others (or a symlink) is rebuilt, even
    with a good checksum; this user's own file is trusted, as looprail's own code is."""
    project, root, cache, (key, stamp, deps, good) = _one_cached_capability(tmp_path)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600  # written private, so it is read
    planted = _checked(marshal.dumps((key, stamp, deps, _omega(good))))
    cache.write_bytes(planted)
    cache.chmod(0o600)
    assert _inline(load_compiled(project, [root])) == ["omega"]
    for mode in (0o622, 0o660):
        cache.write_bytes(planted)
        cache.chmod(mode)
        assert _inline(load_compiled(project, [root])) == ["alpha"]
    elsewhere = tmp_path / "planted.bin"
    elsewhere.write_bytes(planted)
    cache.unlink()
    cache.symlink_to(elsewhere)
    assert _inline(load_compiled(project, [root])) == ["alpha"]
