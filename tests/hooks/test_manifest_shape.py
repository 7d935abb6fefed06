"""The pydantic-free manifest check (`manifest_shape`, derived from the models, and
`VerdictCache.validate`) gives the verdict the pydantic models give: it never proves a manifest
the models reject, it proves every one they accept (ASCII text), and the issues `render-hooks`
records are those of full validation, for the 44 real manifests mutated and for generated
ones."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from looprail.hooks import manifest, manifest_rules, manifest_shape
from looprail.hooks.verdicts import VerdictCache
from looprail.points import POINTS
from tests.support import GSD_CAPABILITIES, examples, feature, needs_corpus

FILE = "/caps/x/capability.json"
# The table as the cache holds it: through JSON.
shape_ok = manifest_shape.compile_shape(json.loads(json.dumps(manifest.shape_table())))


def _light(data, folder):
    """`render-hooks`' validation of a changed manifest, its shape table already cached."""
    cache = VerdictCache(None)
    cache._shape = shape_ok
    return cache.validate(data, FILE, folder)


def _pydantic_ok(data) -> bool:
    try:
        manifest.Capability.model_validate(data)
    except ValidationError:
        return False
    return True


def _plain(value) -> bool:
    """Only ASCII text without newlines and numbers one float holds: where `shape_ok` must be
    exact."""
    if isinstance(value, str):
        return value.isascii() and "\n" not in value
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return abs(value) <= 2**53
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return all(_plain(k) and _plain(v) for k, v in value.items())


def _assert_same_verdict(data, folder="x") -> None:
    proven, accepted = shape_ok(data), _pydantic_ok(data)
    assert not proven or accepted, f"shape_ok proved a manifest pydantic rejects: {data!r}"
    if _plain(data):
        assert proven == accepted, f"pydantic accepts what shape_ok does not prove: {data!r}"
    assert _light(data, folder) == manifest.validate_declared(data, FILE, folder)[1]
    if accepted:  # the rules on the model read the same fields as on the JSON
        model = manifest.Capability.model_validate(data)
        dumped = model.model_dump(exclude_unset=True)
        assert manifest_rules.check_declared(dumped, FILE, folder) == manifest_rules.check_declared(
            data, FILE, folder
        )


# --------------------------------------------------------------------------- the table


def _nodes(value):
    if isinstance(value, dict):
        if isinstance(value.get("type"), str):
            yield value
        for child in value.values():
            yield from _nodes(child)
    elif isinstance(value, list):
        for child in value:
            yield from _nodes(child)


def test_the_derived_table_understands_every_node_of_the_models():
    """Nothing of `Capability` is left to pydantic: no node of its table is `never`."""
    kinds = {n["type"] for n in _nodes(manifest.shape_table())}
    assert "never" not in kinds
    assert {"model", "field", "str", "literal", "tagged-union", "float", "int"} <= kinds


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "str", "strict": True, "to_lower": True},  # a key it does not know
        {"type": "function-after", "function": {}, "schema": {"type": "any"}},
        {"type": "literal", "expected": [1.5]},
        {"type": "str", "pattern": "("},
        {"type": "model", "schema": {"type": "any"}, "config": {}},
        {
            "type": "model",
            "custom_init": True,
            "schema": {"type": "model-fields", "fields": {}},
            "config": {},
        },
        {
            "type": "model",
            "schema": {"type": "model-fields", "fields": {}},
            "config": {"str_to_lower": True},
        },
        "str",
    ],
)
def test_what_the_derivation_does_not_know_is_never_proven(schema):
    check = manifest_shape.compile_shape(manifest_shape.derive(schema))
    assert not check("a") and not check({})


# --------------------------------------------------------------------------- values


VOCAB = [
    "",
    " ",
    "a",
    "x",
    "s",
    "k.x",
    "k.e",
    "gsd-x",
    "x\n",
    "X",
    "1.0.0",
    "1.0",
    "01.0.0",
    "1.0.0-rc.1+b",
    "sha512-abc",
    "sha256-abc",
    "{{id}}",
    "a\0b",
    "../f.md",
    "/abs",
    "f.md",
    "*",
    "planner",
    "orchestrator",
    "skip",
    "halt",
    "fail",
    "boolean",
    "enum",
    "number",
    "string",
    "feature",
    "runtime",
    "reviewer",
    "core",
    "full",
    "spawn",
    "diff-only",
    "command-exists",
    "command-exit-zero",
    "artifact-exists",
    "config-equals",
    "artifact-frontmatter-equals",
    "workflow.research",
    "é",
    "\ud800",
    *POINTS[:3],
]
TEXT = st.sampled_from(VOCAB) | st.text(max_size=4)
NUMBERS = st.sampled_from([0, 1, -1, 3600, 3601, 120_000, 120_001, 2**53 + 1, 10**400, 0.5])
SCALARS = st.none() | st.booleans() | NUMBERS | st.floats(allow_nan=False) | TEXT
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


@st.composite
def mutated(draw, base):
    """`base` with one to three edits anywhere: a value replaced, a key dropped or added, an
    item added, a container emptied."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(data))))
        parent = data
        for p in path[:-1]:
            parent = parent[p]
        target = parent[path[-1]] if path else data
        edit = draw(st.sampled_from(["replace", "drop", "add", "empty", "null"]))
        if edit == "add" and isinstance(target, dict):
            target[draw(TEXT)] = draw(JSON)
        elif edit == "add" and isinstance(target, list):
            target.append(draw(JSON) if not target else draw(st.sampled_from([*target, None])))
        elif edit == "empty" and isinstance(target, (dict, list)):
            target.clear()
        elif path and edit == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif path:
            parent[path[-1]] = None if edit == "null" else draw(JSON)
    return data


# --------------------------------------------------------------------------- generated


_SECTIONS = {
    "skills": ["s", "t"],
    "agents": ["a"],
    "config": {
        "k.x": {"type": "boolean", "default": False},
        "k.e": {"type": "enum", "values": ["a", "b"], "default": "a", "description": "d"},
        "k.n": {"type": "number", "default": 1.5},
    },
    "activationKey": "k.x",
    "steps": [
        {
            "point": "plan:pre",
            "ref": {"skill": "s"},
            "produces": ["p"],
            "consumes": [],
            "onError": "skip",
            "fragment": {"inline": "text"},
            "when": "k.x",
            "supportsReviewerLanes": True,
            "pointFrom": "k.e",
        },
        {
            "point": "ship:post",
            "ref": {"command": "c"},
            "produces": [],
            "consumes": ["p"],
            "onError": "halt",
        },
    ],
    "contributions": [
        {
            "point": "plan:pre",
            "into": "planner",
            "fragment": {"path": "f.md"},
            "produces": [],
            "consumes": [],
            "onError": "fail",
            "configValues": {"a": "b"},
            "when": "k.x",
        },
    ],
    "gates": [
        {"point": "verify:pre", "check": {"query": "q"}, "blocking": True, "onError": "halt"},
        {
            "point": "verify:pre",
            "check": {"agentVerdict": {"ref": "r", "prompt": "p"}},
            "blocking": False,
            "onError": "skip",
            "when": "k.x",
        },
        {
            "point": "ship:pre",
            "check": {
                "predicate": {"kind": "command-exit-zero", "command": "true", "timeout": 2.5}
            },
            "blocking": True,
            "onError": "halt",
        },
        {
            "point": "ship:pre",
            "check": {"predicate": {"kind": "artifact-exists", "artifact": "A.md"}},
            "blocking": True,
            "onError": "halt",
        },
        {
            "point": "ship:pre",
            "check": {
                "predicate": {
                    "kind": "artifact-frontmatter-equals",
                    "artifact": "A.md",
                    "field": "f",
                    "equals": None,
                }
            },
            "blocking": False,
            "onError": "skip",
        },
        {
            "point": "ship:pre",
            "check": {"predicate": {"kind": "config-equals", "key": "k.x", "equals": [1]}},
            "blocking": False,
            "onError": "skip",
        },
    ],
    "hooks": [{"event": "PreToolUse", "script": "h.sh", "matcher": "Bash"}],
    "commands": [{"family": "f", "module": "m.cjs", "router": "r", "subcommands": ["x"]}],
    "taskContentResolver": {
        "trackerPrefix": "jira",
        "invoke": {"binary": "b", "args": ["--id", "{{id}}"], "timeoutMs": 1000},
    },
    "engines": {"gsd": ">=1.0.0"},
    "integrity": "sha512-abc",
    "provenance": {"sourceRepo": "r", "commit": "c"},
    "keywords": ["k"],
    "homepage": "https://example.org",
    "license": "MIT",
    "author": {"name": "n"},
    "repository": "r",
    "compatVersions": [1],
}
_REVIEWER = {
    "slug": "rv",
    "flags": ["--rv"],
    "transport": "spawn",
    "probe": {"kind": "command-exists", "binary": "rv"},
    "invoke": {"argv": ["rv"]},
    "timeoutFloorMs": 0,
    "reviewsSection": "RV",
    "evidenceClass": "diff-only",
    "requiresBinaries": ["rv"],
    "custom": 1,
}


@st.composite
def generated(draw):
    role = draw(st.sampled_from(["feature", "runtime", "reviewer"]))
    data = feature("x")
    if role == "feature":
        for name in draw(st.sets(st.sampled_from(sorted(_SECTIONS)))):
            data[name] = copy.deepcopy(_SECTIONS[name])
    else:
        data["role"] = role
        del data["runtimeCompat"]
        if role == "runtime":
            data["runtime"] = {"kind": "cli"}
        if role == "reviewer" or draw(st.booleans()):
            data["reviewer"] = copy.deepcopy(_REVIEWER)
    return data


def test_the_generated_sections_are_valid():
    """The generator's sections pass as they are, so mutations start from valid manifests."""
    data = feature("x", **copy.deepcopy(_SECTIONS))
    assert shape_ok(data) and _pydantic_ok(data)
    assert _light(data, "x") == []


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_generated_manifests_get_the_verdict_of_the_models(data):
    base = data.draw(generated())
    _assert_same_verdict(base)
    _assert_same_verdict(data.draw(mutated(base)))


# One wrong value where a valid one was: the edits that find a table wider than its model.
NEAR_MISSES = ["", "x\n", "é", "\ud800", None, 0, -1, 1.5, True, 3601, 120_001, 2**53 + 1]
NEAR_MISSES += [[], {}, [None]]


def _single_edits(data):
    """Every manifest one edit away from `data`: each value replaced by each near miss, each
    key dropped, an unknown key added to each object, an item added to each array."""
    for path in _paths(data):
        if not path:
            continue
        *head, last = path

        def edited(change, head=head, last=last):
            out = copy.deepcopy(data)
            parent = out
            for p in head:
                parent = parent[p]
            change(parent, last)
            return out

        for value in NEAR_MISSES:
            yield edited(lambda parent, key, value=value: parent.__setitem__(key, value))
        if isinstance(last, str):
            yield edited(lambda parent, key: parent.pop(key))
        target = edited(lambda parent, key: None)
        for p in path:
            target = target[p]
        if isinstance(target, dict):
            for name in ("unknownField", "\ud800"):  # pydantic-core refuses the second's name
                yield edited(lambda parent, key, name=name: parent[key].__setitem__(name, 1))
        elif isinstance(target, list):
            yield edited(lambda parent, key: parent[key].append(None))


_REVIEWER_FULL = {
    **_REVIEWER,
    "timeoutConfigKey": "k",
    "emptyOutput": "e",
    "promptBudgetKey": "b",
    "modelConfigKey": "m",
    "handler": "h",
}


@pytest.mark.parametrize(
    "base",
    [
        feature(
            "x",
            runtimeCompat={"supported": ["a"], "unsupported": ["b"], "notes": {"a": "n"}},
            **copy.deepcopy(_SECTIONS),
        ),
        {**feature("x", role="reviewer"), "reviewer": _REVIEWER_FULL, "runtimeCompat": None},
        {**feature("x", role="runtime"), "runtime": {"kind": "cli"}, "reviewer": _REVIEWER_FULL},
    ],
    ids=["feature", "reviewer", "runtime"],
)
def test_every_single_edit_gets_the_verdict_of_the_models(base):
    """Each field of every model, one near miss at a time (a property test rarely lands one
    exact wrong value on one exact field; this walk does, for all of them)."""
    assert shape_ok(base) and _light(base, "x") == []
    count = 0
    for data in _single_edits(base):
        _assert_same_verdict(data)
        count += 1
    assert count > 100


@settings(max_examples=examples(100), deadline=None)
@given(JSON)
def test_any_json_gets_the_verdict_of_the_models(value):
    if isinstance(value, dict):
        _assert_same_verdict(value)
    else:
        assert not shape_ok(value)


# --------------------------------------------------------------------------- real manifests


def _real() -> list[tuple[str, dict]]:
    if not GSD_CAPABILITIES.is_dir():
        return []
    return [
        (m.parent.name, json.loads(m.read_text()))
        for m in sorted(GSD_CAPABILITIES.glob("*/capability.json"))
    ]


@needs_corpus
def test_every_real_manifest_is_proven_without_pydantic():
    real = _real()
    assert len(real) == 44
    for folder, data in real:
        assert shape_ok(data), folder
        _assert_same_verdict(data, folder)


@needs_corpus
@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_mutated_real_manifests_get_the_verdict_of_the_models(data):
    folder, base = data.draw(st.sampled_from(_real()))
    _assert_same_verdict(data.draw(mutated(base)), folder)


@pytest.mark.parametrize(
    "data",
    [
        feature("x", version="1.0.0\n"),  # Rust's `$` is the end of the text: refused
        feature("x", id="x\n"),
        feature("x", version="١.0.0"),  # an Arabic-Indic digit: not proven, pydantic decides
        feature("x", title="\ud800"),  # a lone surrogate: pydantic-core refuses it
        feature(
            "x",
            gates=[
                {
                    "point": "ship:pre",
                    "blocking": True,
                    "onError": "halt",
                    "check": {
                        "predicate": {
                            "kind": "command-exit-zero",
                            "command": "c",
                            "timeout": 10**400,
                        }
                    },
                }
            ],
        ),
        feature(
            "x",
            gates=[
                {
                    "point": "ship:pre",
                    "blocking": True,
                    "onError": "halt",
                    "check": {
                        "predicate": {"kind": "command-exit-zero", "command": "c", "timeout": True}
                    },
                }
            ],
        ),
        feature(
            "x",
            taskContentResolver={
                "trackerPrefix": "t",
                "invoke": {"binary": "b", "args": ["{{id}}"], "timeoutMs": 1.0},
            },
        ),
    ],
)
def test_edge_cases_get_the_verdict_of_the_models(data):
    _assert_same_verdict(data)
    assert not shape_ok(data)
