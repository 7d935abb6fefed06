"""Validation rules of capability manifests: each rule rejects with file, JSON path and reason,
and every problem of a file is reported, not only the first."""

from __future__ import annotations

import json

import pytest

from looprail.hooks.manifest import validate_manifest
from looprail.hooks.registry import load_registry
from tests.support import feature, write_capability


def issues_of(tmp_path, manifest, files=None, folder=None):
    d = write_capability(tmp_path / "caps", manifest, folder=folder, files=files)
    raw = (d / "capability.json").read_bytes()
    cap, data, issues = validate_manifest(raw, str(d / "capability.json"), d)
    return cap, data, [(i.path, i.reason) for i in issues]


def step(**kw):
    base = {
        "point": "plan:pre",
        "ref": {"skill": "s"},
        "produces": [],
        "consumes": [],
        "onError": "skip",
    }
    base.update(kw)
    return base


def test_minimal_feature_is_valid(tmp_path):
    cap, _, issues = issues_of(tmp_path, feature("ok", skills=["s"], steps=[step()]))
    assert issues == [] and cap.id == "ok"


@pytest.mark.parametrize(
    "body, path, reason",
    [
        (
            {"steps": [step(ref={"skill": "s", "agent": "a"})], "agents": ["a"]},
            "$.steps[0].ref",
            "exactly one",
        ),
        ({"steps": [step(ref={})]}, "$.steps[0].ref", "exactly one"),
        ({"steps": [step(onError="ignore")]}, "$.steps[0].onError", "must be"),
        ({"steps": [step(when="not.declared")]}, "$.steps[0].when", "not declared"),
        (
            {"steps": [step(ref={"skill": "gsd-x"})], "skills": ["gsd-x"]},
            "$.steps[0].ref.skill",
            "gsd-",
        ),
        (
            {"steps": [step(ref={"skill": "other"})]},
            "$.steps[0].ref.skill",
            "not in this capability's skills",
        ),
        (
            {"steps": [step(ref={"agent": "nobody"})]},
            "$.steps[0].ref.agent",
            "not in this capability's agents",
        ),
        ({"steps": [step(point="execute:task")]}, "$.steps[0].point", "must be"),
        ({"steps": [step(point="plan")]}, "$.steps[0].point", "must be"),
        (
            {"steps": [step(supportsReviewerLanes="yes")]},
            "$.steps[0].supportsReviewerLanes",
            "boolean",
        ),
        ({"steps": [step(produces="X")]}, "$.steps[0].produces", "list"),
        ({"steps": [step(extra=1)]}, "$.steps[0].extra", "unknown field"),
        (
            {
                "gates": [
                    {
                        "point": "ship:pre",
                        "check": {"agentVerdict": {"ref": "r", "prompt": "p"}},
                        "blocking": True,
                        "onError": "skip",
                    }
                ]
            },
            "$.gates[0].blocking",
            "advisory",
        ),
        (
            {
                "gates": [
                    {
                        "point": "ship:pre",
                        "check": {
                            "query": "a",
                            "predicate": {"kind": "artifact-exists", "artifact": "S.md"},
                        },
                        "blocking": True,
                        "onError": "skip",
                    }
                ]
            },
            "$.gates[0].check",
            "exactly one",
        ),
        (
            {"gates": [{"point": "ship:pre", "check": {"query": "a"}, "onError": "skip"}]},
            "$.gates[0].blocking",
            "required",
        ),
        (
            {
                "contributions": [
                    {
                        "point": "plan:pre",
                        "into": "executor",
                        "fragment": {"inline": "x"},
                        "produces": [],
                        "consumes": [],
                    }
                ]
            },
            "$.contributions[0].into",
            "not a role of plan:pre",
        ),
        (
            {
                "contributions": [
                    {
                        "point": "plan:pre",
                        "into": "planner",
                        "fragment": {"path": "../x.md"},
                        "produces": [],
                        "consumes": [],
                    }
                ]
            },
            "$.contributions[0].fragment.path",
            "without '..'",
        ),
        ({"activationKey": "x.enabled"}, "$.activationKey", "not declared"),
        ({"taskContentResolver": None}, "$.taskContentResolver", "null"),
        (
            {
                "taskContentResolver": {
                    "trackerPrefix": "beads",
                    "invoke": {"binary": "b", "args": ["x"], "timeoutMs": 10},
                }
            },
            "$.taskContentResolver.invoke.args",
            "{{id}}",
        ),
        (
            {
                "taskContentResolver": {
                    "trackerPrefix": "beads",
                    "invoke": {"binary": "b", "args": ["{{id}}"], "timeoutMs": 120001},
                }
            },
            "$.taskContentResolver.invoke.timeoutMs",
            "120000",
        ),
        (
            {"hooks": [{"event": "Stop", "script": "../evil.sh"}]},
            "$.hooks[0].script",
            "relative path",
        ),
        (
            {"config": {"k": {"type": "boolean", "default": "yes"}}},
            '$.config["k"].default',
            "boolean",
        ),
        (
            {"config": {"k": {"type": "enum", "values": ["a"], "default": "b"}}},
            '$.config["k"].default',
            "not one of",
        ),
        (
            {
                "reviewer": {
                    "slug": "r",
                    "flags": ["--r"],
                    "transport": "spawn",
                    "probe": {"kind": "command-exists"},
                    "invoke": {},
                    "reviewsSection": "R",
                    "evidenceClass": "diff-only",
                }
            },
            "$.reviewer",
            "only allowed on runtime",
        ),
    ],
)
def test_rule_rejects_with_path(tmp_path, body, path, reason):
    body.setdefault("skills", ["s"])
    _, _, issues = issues_of(tmp_path, feature("cap", **body))
    assert any(p == path and reason in r for p, r in issues), issues


def test_all_errors_of_a_file_are_reported(tmp_path):
    manifest = feature(
        "cap",
        skills=["s"],
        steps=[step(when="nope"), step(ref={"agent": "ghost"})],
        gates=[
            {
                "point": "ship:pre",
                "check": {"query": "q"},
                "blocking": True,
                "onError": "skip",
                "when": "nope2",
            }
        ],
    )
    _, _, issues = issues_of(tmp_path, manifest)
    paths = {p for p, _ in issues}
    assert {"$.steps[0].when", "$.steps[1].ref.agent", "$.gates[0].when"} <= paths


def test_id_must_match_folder(tmp_path):
    _, _, issues = issues_of(tmp_path, feature("cap"), folder="other")
    assert ("$.id", "id 'cap' does not match its folder name 'other'") in issues


def test_role_forbidden_bodies(tmp_path):
    manifest = feature("rt", role="runtime", skills=["s"], steps=[])
    del manifest["runtimeCompat"]
    _, _, issues = issues_of(tmp_path, manifest)
    assert ("$.skills", "not allowed on role 'runtime'") in issues
    assert ("$.steps", "not allowed on role 'runtime'") in issues
    rev = feature("rv", role="reviewer")
    del rev["runtimeCompat"]
    _, _, issues = issues_of(tmp_path, rev)
    assert ("$.reviewer", "required for role 'reviewer'") in issues


def test_the_feature_only_bodies_are_fields_of_the_model():
    """`manifest_rules.FEATURE_ONLY` declares which bodies only a feature may have (it is on the
    pydantic-free path, so it cannot read them off the models): each is an optional field of
    `Capability`, so a renamed field cannot leave the rule behind."""
    from looprail.hooks.manifest import Capability
    from looprail.hooks.manifest_rules import FEATURE_ONLY

    fields = Capability.model_fields
    assert set(FEATURE_ONLY) <= set(fields)
    assert not any(fields[name].is_required() for name in FEATURE_ONLY)


def test_feature_needs_runtime_compat(tmp_path):
    m = feature("cap")
    del m["runtimeCompat"]
    _, _, issues = issues_of(tmp_path, m)
    assert ("$.runtimeCompat", "required for role 'feature'") in issues


@pytest.mark.parametrize("key", ["__proto__", "constructor", "prototype"])
def test_prototype_keys_rejected_anywhere(tmp_path, key):
    raw = json.dumps(feature("cap", config={"a": {"type": "boolean", "default": True, key: 1}}))
    _, _, issues = issues_of(tmp_path, raw, folder="cap")
    assert any(r == "forbidden key" and key in p for p, r in issues), issues


def test_duplicate_keys_rejected(tmp_path):
    raw = json.dumps(feature("cap"))[:-1] + ', "title": "again"}'
    _, _, issues = issues_of(tmp_path, raw, folder="cap")
    assert ("$", 'duplicate key "title"') in issues


def test_not_json_and_not_utf8(tmp_path):
    _, _, issues = issues_of(tmp_path, b"{nope", folder="a")
    assert issues[0][1].startswith("not valid JSON")
    _, _, issues = issues_of(tmp_path, b'{"id": "\xff"}', folder="b")
    assert issues[0][1].startswith("not UTF-8")


def test_deeply_nested_json_is_an_issue_not_a_crash(tmp_path):
    raw = '{"id": "cap", "x": ' + "[" * 5000 + "]" * 5000 + "}"
    _, _, issues = issues_of(tmp_path, raw, folder="cap")
    assert issues and "nested" in issues[0][1]


def test_fragment_path_is_materialised_and_kept(tmp_path):
    m = feature(
        "cap",
        contributions=[
            {
                "point": "plan:pre",
                "into": "planner",
                "fragment": {"path": "fragments/a.md"},
                "produces": [],
                "consumes": [],
            }
        ],
    )
    _, data, issues = issues_of(tmp_path, m, files={"fragments/a.md": "hello\n"})
    assert issues == []
    assert data["contributions"][0]["fragment"] == {"inline": "hello\n", "path": "fragments/a.md"}


def test_fragment_symlink_out_of_folder_rejected(tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("secret")
    m = feature(
        "cap",
        contributions=[
            {
                "point": "plan:pre",
                "into": "planner",
                "fragment": {"path": "f.md"},
                "produces": [],
                "consumes": [],
            }
        ],
    )
    d = write_capability(tmp_path / "caps", m)
    (d / "f.md").symlink_to(outside)
    _, _, issues = validate_manifest((d / "capability.json").read_bytes(), "f", d)
    assert any("outside" in i.reason for i in issues)


def test_missing_fragment_file(tmp_path):
    m = feature(
        "cap",
        contributions=[
            {
                "point": "plan:pre",
                "into": "planner",
                "fragment": {"path": "nope.md"},
                "produces": [],
                "consumes": [],
            }
        ],
    )
    _, _, issues = issues_of(tmp_path, m)
    assert any(p == "$.contributions[0].fragment.path" and "does not exist" in r for p, r in issues)


# ----------------------------------------------------------------------------- set-level rules


def test_duplicate_owner_of_skill_fails_the_later_capability(tmp_path):
    root = tmp_path / "caps"
    write_capability(root, feature("aaa", skills=["shared"]))
    write_capability(root, feature("bbb", skills=["shared"]))
    reg = load_registry(tmp_path, [root])
    assert "aaa" in reg.capabilities and "bbb" not in reg.capabilities
    assert "already owned by capability 'aaa'" in str(reg.failed[0].issues[0])


@pytest.mark.parametrize(
    "field, value",
    [
        ("agents", ["ag"]),
        ("config", {"k.x": {"type": "boolean", "default": False}}),
        (
            "taskContentResolver",
            {"trackerPrefix": "bd", "invoke": {"binary": "b", "args": ["{{id}}"], "timeoutMs": 5}},
        ),
    ],
)
def test_duplicate_owners(tmp_path, field, value):
    root = tmp_path / "caps"
    write_capability(root, feature("aaa", **{field: value}))
    write_capability(root, feature("bbb", **{field: value}))
    reg = load_registry(tmp_path, [root])
    assert list(reg.capabilities) == ["aaa"]


def test_requires_missing_and_cycle(tmp_path):
    root = tmp_path / "caps"
    write_capability(root, feature("aaa", requires=["bbb"]))
    write_capability(root, feature("bbb", requires=["aaa"]))
    write_capability(root, feature("ccc", requires=["zzz"]))
    reg = load_registry(tmp_path, [root])
    reasons = " | ".join(str(i) for i in reg.issues)
    assert "requires cycle" in reasons and "requires 'zzz', which is not loaded" in reasons
    assert "ccc" not in reg.capabilities


def test_tier_monotone(tmp_path):
    root = tmp_path / "caps"
    write_capability(root, feature("big", tier="full"))
    write_capability(root, feature("small", tier="core", requires=["big"]))
    reg = load_registry(tmp_path, [root])
    assert "small" not in reg.capabilities


def test_duplicate_producers_and_cycles_at_a_point(tmp_path):
    root = tmp_path / "caps"
    write_capability(root, feature("aaa", skills=["s"], steps=[step(produces=["X.md"])]))
    write_capability(
        root, feature("bbb", skills=["t"], steps=[step(ref={"skill": "t"}, produces=["X.md"])])
    )
    reg = load_registry(tmp_path, [root])
    assert "bbb" not in reg.capabilities
    assert "also produced by 'aaa'" in str(reg.failed[0].issues[0])

    root2 = tmp_path / "caps2"
    write_capability(
        root2, feature("ccc", skills=["s"], steps=[step(produces=["A"], consumes=["B"])])
    )
    write_capability(
        root2,
        feature(
            "ddd", skills=["t"], steps=[step(ref={"skill": "t"}, produces=["B"], consumes=["A"])]
        ),
    )
    reg = load_registry(tmp_path, [root2])
    assert "cycle" in str(reg.failed[0].issues[0])


def test_reserved_prefix_only_for_first_party(tmp_path):
    project = tmp_path / "proj"
    write_capability(project / ".looprail" / "capabilities", feature("gsd-evil"))
    write_capability(tmp_path / "fp", feature("gsd-good"))
    reg = load_registry(project, [tmp_path / "fp"])
    assert "gsd-good" in reg.capabilities and "gsd-evil" not in reg.capabilities
    assert "reserved" in str(reg.failed[0].issues[0])


def test_json_schema_is_emitted():
    from looprail.hooks.manifest import capability_json_schema

    schema = capability_json_schema()
    assert schema["title"] == "looprail capability.json"
    assert "steps" in schema["properties"]


def _reviewer(cap_id, slug, flags, section):
    manifest = feature(cap_id, role="reviewer")
    manifest.pop("runtimeCompat")
    manifest["reviewer"] = {
        "slug": slug,
        "flags": flags,
        "transport": "spawn",
        "probe": {"kind": "command-exists"},
        "invoke": {},
        "reviewsSection": section,
        "evidenceClass": "diff-only",
    }
    return manifest


@pytest.mark.parametrize(
    "second, reason",
    [
        (_reviewer("bbb", "b", ["--a"], "B"), "reviewer flag '--a' is already owned"),
        (_reviewer("bbb", "b", ["--b"], "A"), "reviewsSection 'A' is already owned"),
        (_reviewer("bbb", "a", ["--b"], "B"), "reviewer slug 'a' is already owned"),
    ],
)
def test_reviewer_lane_slug_flags_and_section_have_one_owner(tmp_path, second, reason):
    # One flag selecting two lanes, or two lanes writing one review section, is ambiguous.
    root = tmp_path / "caps"
    write_capability(root, _reviewer("aaa", "a", ["--a", "--aa"], "A"))
    write_capability(root, second)
    reg = load_registry(tmp_path, [root])
    assert list(reg.capabilities) == ["aaa"]
    assert reason in str(reg.failed[0].issues[0])


def test_two_steps_of_one_capability_producing_one_artifact_at_a_point(tmp_path):
    root = tmp_path / "caps"
    write_capability(
        root,
        feature(
            "aaa",
            skills=["s", "t"],
            steps=[step(produces=["X.md"]), step(ref={"skill": "t"}, produces=["X.md"])],
        ),
    )
    write_capability(root, feature("bbb", skills=["u"], steps=[step(ref={"skill": "u"})]))
    reg = load_registry(tmp_path, [root])
    assert list(reg.capabilities) == ["bbb"]
    assert "'X.md' at plan:pre is also produced by 'aaa'" in str(reg.failed[0].issues[0])


def test_one_step_listing_an_artifact_twice_is_not_two_producers(tmp_path):
    root = tmp_path / "caps"
    write_capability(root, feature("aaa", skills=["s"], steps=[step(produces=["X.md", "X.md"])]))
    assert list(load_registry(tmp_path, [root]).capabilities) == ["aaa"]


@pytest.mark.parametrize("module", ["../evil.cjs", "lib/router.cjs", "/abs.cjs", "..", "-x.cjs"])
def test_command_module_is_a_bare_basename(tmp_path, module):
    body = {"commands": [{"family": "fam", "module": module, "router": "route"}]}
    _, _, issues = issues_of(tmp_path, feature("cap", **body))
    assert any(p == "$.commands[0].module" and "bare file name" in r for p, r in issues), issues


@pytest.mark.parametrize("key", ["mode", "workflow.verifier", "git.branch", "looprail.x", "gates"])
def test_config_key_of_the_central_settings_is_rejected(tmp_path, key):
    body = {"config": {key: {"type": "boolean", "default": False}}}
    _, _, issues = issues_of(tmp_path, feature("cap", **body))
    assert any(p == f"$.config[{json.dumps(key)}]" and "central setting" in r for p, r in issues), (
        issues
    )


def test_config_keys_outside_the_central_settings_are_fine(tmp_path):
    keys = ["workflow.research", "review.models.codex", "mode_x", "gitlab.enabled"]
    body = {"config": {k: {"type": "boolean", "default": False} for k in keys}}
    _, _, issues = issues_of(tmp_path, feature("cap", **body))
    assert issues == []


@pytest.mark.parametrize("field", ["binary", "args"])
def test_task_content_resolver_argv_has_no_nul_byte(tmp_path, field):
    invoke = {"binary": "bd", "args": ["show", "{{id}}"], "timeoutMs": 5000}
    invoke[field] = "b\0d" if field == "binary" else ["{{id}}", "x\0"]
    body = {"taskContentResolver": {"trackerPrefix": "beads", "invoke": invoke}}
    _, _, issues = issues_of(tmp_path, feature("cap", **body))
    assert any(
        p.startswith(f"$.taskContentResolver.invoke.{field}") and "NUL" in r for p, r in issues
    ), issues
