"""Frontmatter YAML on libyaml's C parser (`looprail.plans.yamlload`, `plans.planyaml`): the same
limits as the pure-Python loader (aliases refused before expansion, nesting bounded at 200
levels) and the same values; any document the C path refuses is loaded again by the pure
loader, so every error a user reads is the pure loader's. Property tests compare both."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.plans import planyaml, yamlload
from looprail.plans.yamlload import MAX_DEPTH, NoAliasCSafeLoader, NoAliasSafeLoader, safe_load
from tests.support import examples

pytestmark = pytest.mark.skipif(
    NoAliasCSafeLoader is None, reason="PyYAML was built without libyaml"
)


def outcome(fn, *args):
    """("ok", repr(value)) or ("error", exception class, message)."""
    try:
        return ("ok", repr(fn(*args)))
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


def c_load(text: str):
    return yamlload._load(NoAliasCSafeLoader, text)


def py_load(text: str):
    return yamlload._load(NoAliasSafeLoader, text)


# --------------------------------------------------------------------------- limits


def nested(depth: int, flow: bool) -> str:
    if flow:
        return "[" * depth + "]" * depth
    return "".join(f"{'  ' * i}k{i}:\n" for i in range(depth - 1)) + f"{'  ' * (depth - 1)}k: v\n"


@pytest.mark.parametrize("flow", [True, False])
def test_depth_bound_is_the_same_on_both_paths(flow):
    # A document of depth d has d+1 nodes nested on its deepest path in a block mapping chain
    # (the scalar leaf counts); find the largest accepted depth on each path.
    def accepted(load, depth):
        try:
            load(nested(depth, flow))
            return True
        except RecursionError:
            return False

    limit_c = max(d for d in range(MAX_DEPTH - 5, MAX_DEPTH + 5) if accepted(c_load, d))
    limit_py = max(d for d in range(MAX_DEPTH - 5, MAX_DEPTH + 5) if accepted(py_load, d))
    assert limit_c == limit_py
    assert not accepted(c_load, limit_c + 1)


def test_very_deep_documents_are_refused_without_crashing_the_c_parser():
    for text in ("[" * 100_000, "[" * 50_000 + "]" * 50_000, "- " * 20_000 + "x\n"):
        with pytest.raises((RecursionError, yaml.YAMLError)):
            c_load(text)
        with pytest.raises((RecursionError, yaml.YAMLError)):
            safe_load(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",
        "- &a [1, 2]\n- *a\n",
        # nine levels of nine aliases: a "billion laughs" of a few hundred bytes
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
            for i in range(8)
        ),
    ],
)
def test_aliases_are_refused_on_the_c_path(text):
    with pytest.raises(yaml.composer.ComposerError, match="alias"):
        c_load(text)
    assert outcome(safe_load, text) == outcome(py_load, text)


def test_errors_are_the_pure_loaders():
    for text in ["a: b: c", "a: [1, 2", "a: 1\n- b", "\x01", "a: '\ud800'", "--- a\n--- b\n"]:
        assert outcome(safe_load, text) == outcome(py_load, text)


# --------------------------------------------------------------------------- properties

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
data = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(0, 99), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(150), deadline=None)
@given(value=data, flow=st.sampled_from([None, True, False]), width=st.integers(10, 200))
def test_both_loaders_agree_on_dumped_documents(value, flow, width):
    text = yaml.safe_dump(value, default_flow_style=flow, width=width, allow_unicode=True)
    assert outcome(c_load, text) == outcome(py_load, text)
    assert outcome(safe_load, text) == outcome(py_load, text)


# Single characters and the multi-character pieces YAML documents are made of.
TOKENS = [*"ab01 :-[]{},#&*!|>'\"\n?%@`.~=+\\\t\r", "\u00e9", "\u2028", "\x85", "\ufeff", "\x7f"]
TOKENS += ["---", "...", "\\x4", "\\u00e9", "- ", ": ", "\n  ", "\n- ", "%YAML 1.1\n", "0o7", "0x1"]
TOKENS += ["1e3", ".inf", "2001-12-14", "~", "null", "yes", "<<", " #c", "'#'", '"a\\"', "\\n"]
yamlish = st.lists(st.sampled_from(TOKENS), max_size=25).map("".join)


@settings(max_examples=examples(600), deadline=None)
@given(text=yamlish)
def test_c_path_never_accepts_what_the_pure_loader_refuses_or_reads_it_otherwise(text):
    """Where the C path is taken (`c_path_ok`) and loads a document, the pure loader loads the
    same value; and `safe_load` always answers exactly as the pure loader (value or error)."""
    if yamlload.c_path_ok(text):
        c = outcome(c_load, text)
        if c[0] == "ok":
            assert c == outcome(py_load, text)
    assert outcome(safe_load, text) == outcome(py_load, text)


@pytest.mark.parametrize(
    "text", ["0\t", "!", " !", "|#", ">#", "[b`?~]", "[a?b]", "\x85\ufeffa", "\n\ufeff"]
)
def test_where_the_parsers_disagree_the_pure_loader_answers(text):
    """Found by the fuzzing above: libyaml accepts or reads these otherwise."""
    c, py = outcome(c_load, text), outcome(py_load, text)
    assert c != py  # the disagreement is real...
    assert not yamlload.c_path_ok(text)  # ...so the C path is not taken
    assert outcome(safe_load, text) == py


def plan_outcome(loader_class, text):
    try:
        return ("ok", repr(planyaml._compose(loader_class, text, 2)))
    except Exception as exc:
        return ("error", type(exc).__name__)


frontmatter = st.dictionaries(
    st.sampled_from(["phase", "plan", "wave", "depends_on", "files_modified", "autonomous"]),
    st.sampled_from(["01", "1", "007", "-3", "+4", "0x1f", "1_000", "[01, 02]", "true", "~", "a"]),
    max_size=6,
)


@settings(max_examples=examples(150), deadline=None)
@given(fields=frontmatter, dupe=st.booleans())
def test_plan_frontmatter_reads_the_same_on_both_paths(fields, dupe):
    text = "".join(f"{k}: {v}\n" for k, v in fields.items())
    if dupe and fields:
        text += next(iter(fields)) + ": again\n"
    assert planyaml._PlanYamlCLoader is not None
    c = plan_outcome(planyaml._PlanYamlCLoader, text)
    py = plan_outcome(planyaml._PlanYamlLoader, text)
    if c[0] == "ok":
        assert c == py
    # What a user sees (values, or the PlanError's words) is what the pure loader gives.
    with_c = outcome(planyaml._load_yaml, text, 2, "PLAN.md")
    saved, planyaml._PlanYamlCLoader = planyaml._PlanYamlCLoader, None
    try:
        assert with_c == outcome(planyaml._load_yaml, text, 2, "PLAN.md")
    finally:
        planyaml._PlanYamlCLoader = saved


def test_plan_ids_stay_strings_and_duplicates_are_refused_on_the_c_path():
    data, lines = planyaml._compose(planyaml._PlanYamlCLoader, "phase: 01\nplan: 002\nwave: 1\n", 2)
    assert data == {"phase": "01", "plan": "002", "wave": 1}
    assert lines == {"phase": 2, "plan": 3, "wave": 4}
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key"):
        planyaml._compose(planyaml._PlanYamlCLoader, "a: 1\na: 2\n", 2)
