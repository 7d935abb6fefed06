"""Property-based hostile input: whatever bytes a manifest, hooks file or plan holds, the loader
answers with its own validation error (never another exception), and audit never fails on what
the loader accepted."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.errors import Issue, PlanError
from looprail.hooks.manifest import validate_manifest
from looprail.plans.planfile import parse_plan
from looprail.trust.audit import capability_surfaces
from tests.support import examples, feature

SETTINGS = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

KEYS = st.sampled_from(
    [
        "id", "role", "version", "title", "description", "tier", "requires", "runtimeCompat",
        "skills", "agents", "hooks", "config", "steps", "contributions", "gates", "point", "ref",
        "skill", "agent", "command", "check", "query", "predicate", "kind", "fragment", "inline",
        "path", "when", "onError", "blocking", "produces", "consumes", "into", "script",
        "taskContentResolver", "invoke", "binary", "args", "timeoutMs", "reviewer", "slug",
        "__proto__", "constructor", "prototype", "", "a.b", "ünï",
    ]
)  # fmt: skip
HOSTILE_TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        ["x; touch s", "$(id)", "`id`", "../../etc/passwd", "/etc/passwd", "-rf", "a\nb", "\x00",
         "{{id}}", "discuss:pre", "skip", "halt", "true", "gsd-x", "1.0.0", "*"]
    ),
)  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), HOSTILE_TEXT
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(KEYS, st.text(max_size=8)), inner, max_size=5),
    ),
    max_leaves=30,
)


def mutate(base: dict, data: st.DataObject) -> dict:
    """A valid manifest with a few fields replaced, removed or added at random depths."""
    manifest = json.loads(json.dumps(base))
    for _ in range(data.draw(st.integers(1, 4))):
        target = manifest
        for _ in range(data.draw(st.integers(0, 2))):
            children = [v for v in target.values() if isinstance(v, dict)] + [
                i for v in target.values() if isinstance(v, list) for i in v if isinstance(i, dict)
            ]
            if not children:
                break
            target = data.draw(st.sampled_from(children))
        key = data.draw(st.one_of(st.sampled_from(sorted(target) or ["id"]), KEYS))
        if data.draw(st.booleans()) and key in target:
            del target[key]
        else:
            target[key] = data.draw(JSON_VALUES)
    return manifest


RICH = feature(
    "hostile",
    skills=["s"],
    agents=["a"],
    config={"k.on": {"type": "boolean", "default": True}},
    hooks=[{"event": "Stop", "script": "h.sh"}],
    steps=[
        {"point": "plan:pre", "ref": {"skill": "s"}, "produces": ["X"], "consumes": [], "onError": "skip", "when": "k.on", "fragment": {"path": "f.md"}},
        {"point": "plan:post", "ref": {"command": "do it"}, "produces": [], "consumes": [], "onError": "halt"},
    ],
    contributions=[{"point": "plan:pre", "into": "planner", "fragment": {"inline": "t"}, "produces": [], "consumes": []}],
    gates=[{"point": "ship:pre", "check": {"predicate": {"kind": "command-exit-zero", "command": "true"}}, "blocking": True, "onError": "halt"}],
    taskContentResolver={"trackerPrefix": "t", "invoke": {"binary": "b", "args": ["{{id}}"], "timeoutMs": 10}},
)  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("caps") / "hostile"
    d.mkdir()
    (d / "f.md").write_text("fragment\n")
    (d / "h.sh").write_text("#!/bin/sh\n")
    return d


def check_manifest(raw: bytes, folder: Path) -> None:
    file = str(folder / "capability.json")
    cap, data, issues = validate_manifest(raw, file, folder)
    assert isinstance(issues, list) and all(isinstance(i, Issue) for i in issues)
    assert (cap is None) == bool(issues)
    for issue in issues:
        assert issue.file == file and issue.path.startswith("$")
    if cap is not None:
        capability_surfaces(data)  # whatever loads can be audited


@SETTINGS
@given(data=st.data())
def test_mutated_manifests_only_ever_yield_issues(folder, data):
    manifest = mutate(RICH, data)
    check_manifest(json.dumps(manifest).encode(), folder)


@SETTINGS
@given(value=JSON_VALUES)
def test_arbitrary_json_only_ever_yields_issues(folder, value):
    check_manifest(json.dumps(value).encode(), folder)


@SETTINGS
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_only_ever_yield_issues(folder, raw):
    check_manifest(raw, folder)


@SETTINGS
@given(depth=st.integers(1, 3000), opener=st.sampled_from(["[", '{"a":']))
def test_any_nesting_depth_only_ever_yields_issues(folder, depth, opener):
    closer = "]" if opener == "[" else "}"
    check_manifest((opener * depth + "1" + closer * depth).encode(), folder)


# ── plans ────────────────────────────────────────────────────────────────────────────────────

# Text YAML accepts: printable characters plus tab and newline. (Control characters and deep
# nesting are known findings, pinned by xfail tests in test_hostile.py.)
YAML_SAFE = st.characters(
    blacklist_categories=("Cs", "Cc", "Cn", "Co"), whitelist_characters="\t\n"
)
FRONTMATTER_LINES = st.one_of(
    st.sampled_from(
        [
            "phase: 01-x", "plan: 01", "type: execute", "type: nope", "wave: 1", "wave: -1",
            "wave: '1'", "depends_on: [01]", "depends_on: 01", "depends_on: [[a]]",
            "files_modified: [a.py, ../../etc/passwd]", "autonomous: false", "autonomous: maybe",
            "requirements: []", "must_haves: [a]", "a: &x [1, 2]", "b: *x", "c: *undefined",
            "d: !!python/name:os.system", "e: !!binary aGVsbG8=", "f: {g: [h, {i: j}]}", "? k",
            "- item", "  nested: 1", "wave: 1", "x: 'unterminated", "y: [", "z: }",
        ]
    ),
    st.text(YAML_SAFE, max_size=40),
)  # fmt: skip
BODY_PARTS = st.one_of(
    st.sampled_from(
        [
            "<tasks>", "</tasks>", '<task type="auto">', '<task type="checkpoint:decision" gate="blocking">',
            '<task type="bogus">', '<task type="auto" tracker-id="beads:X-1">', "<task", "</task>",
            "<name>n</name>", "<read_first>../../etc/passwd</read_first>", "<action>", "</action>",
            "<files>a.py, b.py</files>", "```", "`<task>`", "<!--", "-->", "<objective>o</objective>",
            "<verify>v", "&amp;", "<task type='auto' x=\"y\" >", "\n",
        ]
    ),
    st.text(YAML_SAFE, max_size=30),
)  # fmt: skip


@st.composite
def plans(draw) -> str:
    parts = []
    if draw(st.booleans()):
        parts.append("---")
        parts += draw(st.lists(FRONTMATTER_LINES, max_size=8))
        if draw(st.integers(0, 9)):  # usually closed
            parts.append("---")
    parts += draw(st.lists(BODY_PARTS, max_size=25))
    return "\n".join(parts)


@SETTINGS
@given(text=plans())
def test_generated_plans_only_ever_raise_plan_error(text):
    try:
        plan = parse_plan(text, path="01-01-PLAN.md")
    except PlanError as exc:
        message = str(exc)
        assert message.startswith("01-01-PLAN.md") and "\n" not in message
    else:
        assert plan.id == "01-01"


@SETTINGS
@given(text=st.text(YAML_SAFE, max_size=300))
def test_arbitrary_plan_text_only_ever_raises_plan_error(text):
    with contextlib.suppress(PlanError):
        parse_plan(text, path="01-01-PLAN.md")


def test_a_null_manifest_is_an_issue(folder):
    file = str(folder / "capability.json")
    cap, _, issues = validate_manifest(b"null", file, folder)
    assert cap is None and issues and issues[0].path == "$"


def test_a_null_fragment_path_is_an_issue(folder):
    manifest = json.loads(json.dumps(RICH))
    manifest["steps"][0]["fragment"] = {"path": None}
    file = str(folder / "capability.json")
    cap, _, issues = validate_manifest(json.dumps(manifest).encode(), file, folder)
    assert cap is None and issues[0].path == "$.steps[0].fragment"
