"""The hooks.json JSON Schema is generated from the document models, and they agree: the reader
looprail runs (`validate_hooks_document`, which is the pydantic models, `HooksDocument`, with
the file's scope) and the generated schema (checked with `jsonschema`), on generated documents,
the documented examples and the hostile corpus."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.cli import main
from looprail.hooks.native.actions import ACTION_TYPES
from looprail.hooks.native.document import hooks_json_schema
from looprail.hooks.native.events import EVENT_NAMES, EVENTS
from looprail.hooks.native.parsing import validate_hooks_document
from tests.support import REPO, examples

jsonschema = pytest.importorskip("jsonschema")
from pydantic import ValidationError  # noqa: E402

from looprail.hooks.native.document import SCHEMA_CANNOT_SAY, HooksDocument  # noqa: E402

ROOT = REPO
SCHEMA = hooks_json_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def verdicts(doc: Any) -> tuple[bool, bool, bool, bool]:
    """(reader accepts, models accept, schema accepts, a rule the schema cannot say failed)."""
    reader = validate_hooks_document(doc, file="t.json", scope="global").status == "valid"
    try:
        HooksDocument.model_validate(doc)
        model, cannot_say = True, False
    except ValidationError as exc:
        model = False
        cannot_say = any(e["type"] == "schema_cannot_say" for e in exc.errors())
    return reader, model, VALIDATOR.is_valid(doc), cannot_say


def assert_agree(doc: Any) -> None:
    reader, model, schema, cannot_say = verdicts(doc)
    assert model == reader, (doc, reader, model)
    if model:
        assert schema, list(VALIDATOR.iter_errors(doc))[:3]
    elif not cannot_say:
        assert not schema, doc


# --------------------------------------------------------------------------- the schema itself


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["title"] == "looprail native hooks (hooks.json)"


def test_the_cli_prints_the_generated_schema_the_same_every_time(capsys):
    outputs = []
    for _ in range(2):
        assert main(["schema", "hooks"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0]) == json.loads(json.dumps(SCHEMA))


def test_the_schema_is_generated_from_the_models():
    generated = HooksDocument.model_json_schema(by_alias=True)
    assert {k: v for k, v in SCHEMA.items() if k != "$schema"} == generated
    hook = SCHEMA["$defs"]["HookEntry"]
    assert hook["properties"]["event"]["enum"] == list(EVENT_NAMES)
    refs = [v["$ref"] for v in hook["properties"]["action"]["oneOf"]]
    consts = [SCHEMA["$defs"][r.rsplit("/", 1)[1]]["properties"]["type"]["const"] for r in refs]
    assert consts == list(ACTION_TYPES)


def test_what_the_schema_cannot_say_is_named():
    assert set(SCHEMA_CANNOT_SAY) == {"regex", "pairing", "nested-preset"}


# --------------------------------------------------------------------------- real documents

DOC = ROOT / "docs" / "native-hooks.md"
EXAMPLE = re.compile(r"<!-- example:(valid|invalid) -->\s*```json\n(.*?)```", re.S)
EXAMPLES = EXAMPLE.findall(DOC.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("kind", "text"), EXAMPLES)
def test_every_documented_example(kind, text):
    doc = json.loads(text)
    # the project-only rule (owner/repo Sections listed in `repos`) is not the schema's business
    reader = validate_hooks_document(doc, file="doc", scope="project").status == "valid"
    assert reader is (kind == "valid")
    assert_agree(doc)
    if kind == "valid":
        assert VALIDATOR.is_valid(doc)


HOSTILE = sorted((ROOT / "tests" / "hostile" / "hooks").glob("*.json"))


@pytest.mark.parametrize("path", HOSTILE, ids=lambda p: p.name)
def test_every_hostile_file_that_is_json(path):
    try:
        doc = json.loads(path.read_bytes())
    except ValueError:
        pytest.skip("not JSON: refused before any schema applies")
    assert_agree(doc)


def test_a_bad_regex_is_what_only_the_reader_catches():
    doc = {"local": {"h": {"description": "d", "event": "task_call", "filter": {"x": "["}}}}
    doc["local"]["h"]["shell"] = "true"
    reader, model, schema, cannot_say = verdicts(doc)
    assert (reader, model, schema, cannot_say) == (False, False, True, True)


@pytest.mark.parametrize("filter_", [{"phase": []}, {"phase": "x"}, {"outcome": []}, {"code": []}])
def test_a_hook_result_filter_field_is_checked_even_with_no_values(filter_):
    """Found by the property below: `"phase": []` on a hook_result Hook was refused by the
    reader and the schema and accepted by the models (their field check ran once per value)."""
    hook = {"description": "d", "event": "hook_result", "shell": "exit 0", "filter": filter_}
    doc = {"local": {"h": hook}}
    assert_agree(doc)
    assert verdicts(doc)[0] == ("phase" not in filter_)


# --------------------------------------------------------------------------- generated documents

_floats = st.sampled_from([0.5, -1.5, 2.25])  # integral floats are JSON Schema integers
_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | _floats
    | st.sampled_from(["", " ", "x", "[", "a.*", "pass", "block", "report", "\x1c", "steer"])
)
_filter = st.dictionaries(
    st.sampled_from(["event", "hookRef", "outcome", "code", "phase", "name", "invocationId"]),
    _scalar | st.lists(_scalar, max_size=3) | st.just({}),
    max_size=3,
)
_outcome = st.sampled_from(["pass", "block", "report", "nope"])
_code = st.none() | st.sampled_from([0, 1, -1, 0.5, "1", True])
_ACTION_POOL: dict[str, st.SearchStrategy[Any]] = {
    "type": st.sampled_from([*ACTION_TYPES, "nope"]),
    "outcome": _outcome | st.lists(_outcome, max_size=3) | st.just(3),
    "code": _code | st.lists(_code, max_size=3),
    "interrupt": st.booleans() | st.just(1),
    "instructions": st.sampled_from(["keep it", "", 5]),
    "message": st.sampled_from(["hi", " ", "", 1]),
    "sendAs": st.sampled_from(["custom", "user", "bot"]),
    "delivery": st.sampled_from(["steer", "followUp", "nextTurn", "later"]),
    "triggerTurn": st.booleans() | st.just("yes"),
    "name": st.sampled_from(["done", "\t", 3]),
    "data": st.none() | st.integers() | st.lists(st.text(max_size=2), max_size=2),
    "extra": st.just(1),
}
_action = st.fixed_dictionaries({}, optional=_ACTION_POOL)
_HOOK_POOL: dict[str, st.SearchStrategy[Any]] = {
    "description": st.sampled_from(["d", ""]) | st.just(3),
    "event": st.sampled_from([*EVENT_NAMES, "nope"]),
    "filter": _filter | st.just([]),
    "when": st.sampled_from(["true", ""]) | st.just(None),
    "shell": st.sampled_from(["exit 0", ""]) | st.booleans(),
    "action": _action | st.just("interrupt"),
    "default": st.booleans() | st.just(1),
    "timeoutMs": st.sampled_from([1, 5000, 3_600_000, 0, 3_600_001, "5", 2.5, None, True]),
    "maxSelections": st.sampled_from([1, 3, 0, -1, 1.5, None]),
    "timeout": st.just(5),
}
_hook = st.fixed_dictionaries({}, optional=_HOOK_POOL)
_ref = st.sampled_from(["local/a", "local/p", "o/r/x", "local/", "bad", "a/b/c/d", 3])
_PRESET_POOL: dict[str, st.SearchStrategy[Any]] = {
    "preset": st.lists(_ref, max_size=3) | st.just("local/a"),
    "description": st.sampled_from(["p"]) | st.just(None),
    "default": st.booleans() | st.just(0),
    "event": st.just("task_call"),
}
_preset = st.fixed_dictionaries(
    {"preset": _PRESET_POOL["preset"]},
    optional={k: v for k, v in _PRESET_POOL.items() if k != "preset"},
)
_section = st.dictionaries(
    st.sampled_from(["a", "p", "b", "a/b", "__proto__", "constructor", "", "x\x00"]),
    _hook | _hook | _preset | st.just(3),
    max_size=3,
)
_DOCUMENT_POOL: dict[str, st.SearchStrategy[Any]] = {
    "$schema": st.sampled_from(["./schema.json"]) | st.just(1),
    "repos": st.lists(st.sampled_from(["o/r", "x/y", "bad"]), max_size=3) | st.just("o/r"),
    "local": _section | st.just([]),
    "o/r": _section,
    "bad-section": _section,
}
_document = st.fixed_dictionaries({}, optional=_DOCUMENT_POOL)


# Mostly-valid documents with a few mutations drawn from the noisy pools above: a random
# document is almost never valid, and the interesting cases are one rule away from valid.
_FAILURE = {name: spec.failure for name, spec in EVENTS.items()}
_VALID_FILTER = st.dictionaries(
    st.sampled_from(["phase", "name", "point"]),
    st.sampled_from(["x", "a.*", "^0?1$"]) | st.integers(0, 3) | st.booleans() | st.none(),
    max_size=2,
)
_VALID_RESULT_FILTER = st.fixed_dictionaries(
    {},
    optional={
        "hookRef": st.sampled_from(["local/.*", "x", 3]),
        "outcome": st.sampled_from(["pass", "block", "report", "nope"]),
        "code": st.sampled_from([0, 1, None]) | st.lists(st.sampled_from([0, 1, None])),
    },
)
_VARIANT = {
    "interrupt": {},
    "shutdown": {"interrupt": True},
    "compact": {"instructions": "short"},
    "message": {"message": "hi", "delivery": "steer"},
    "emit-custom-event": {"name": "done", "data": {"k": [1, None]}},
}


# Strategies are built once here, not inside the composites: a strategy made per draw is
# validated again on every example, and that (not the oracle) was most of this file's time.
_PICK = {n: st.integers(0, n - 1) for n in range(1, 33)}
_HOW_MANY = st.integers(0, 2)
_SET_OR_REMOVE = st.integers(0, 3)
_POOL_KEYS = {id(pool): sorted(pool) for pool in (_ACTION_POOL, _HOOK_POOL, _PRESET_POOL)}
_POOL_KEYS[id(_DOCUMENT_POOL)] = sorted(_DOCUMENT_POOL)


def _pick(draw, options: list[Any]) -> Any:
    """`draw(st.sampled_from(options))` without building a strategy for each draw."""
    return options[draw(_PICK[len(options)])]


@st.composite
def _mutated(draw, base: dict[str, Any], pool: dict[str, st.SearchStrategy[Any]]) -> dict:
    """`base` with up to two members set from `pool` (often invalid) or removed."""
    out = dict(base)
    for _ in range(draw(_HOW_MANY)):
        if not out or draw(_SET_OR_REMOVE):
            key = _pick(draw, _POOL_KEYS[id(pool)])
            out[key] = draw(pool[key])
        else:
            out.pop(_pick(draw, sorted(out)))
    return out


_KINDS = list(ACTION_TYPES)
_OUTCOMES = {
    event: ["pass", failure, "pass", failure, "block", "report"]
    for event, failure in _FAILURE.items()
}
_FAILED_CODE = st.sampled_from([1, None, [2, None]])
_SEND_AS = st.sampled_from(["custom", "user"])
_DELIVERY = st.sampled_from(["steer", "followUp", "nextTurn"])
_EVENT_LIST = list(EVENT_NAMES)
_MAX_SELECTIONS = st.sampled_from([1, 2, 0])
_RESULT_FILTER = _VALID_RESULT_FILTER | _VALID_FILTER
_TIMEOUT_MS = st.sampled_from([1, 5000, 3_600_000, 0, 3_600_001])


@st.composite
def _valid_ish_action(draw, event: str) -> dict[str, Any]:
    kind = _pick(draw, _KINDS)
    outcome = _pick(draw, _OUTCOMES[event])
    action: dict[str, Any] = {"type": kind, "outcome": outcome, **_VARIANT[kind]}
    if draw(st.booleans()):
        action["code"] = 0 if outcome == "pass" else draw(_FAILED_CODE)
    if kind == "message":  # every combination, valid or not
        if draw(st.booleans()):
            action["sendAs"] = draw(_SEND_AS)
        action["delivery"] = draw(_DELIVERY)
        if draw(st.booleans()):
            action["triggerTurn"] = draw(st.booleans())
    return draw(_mutated(action, _ACTION_POOL))


@st.composite
def _valid_ish_hook(draw) -> dict[str, Any]:
    event = _pick(draw, _EVENT_LIST)
    hook: dict[str, Any] = {"description": "d", "event": event}
    if draw(st.booleans()):
        hook["shell"] = "exit 0"
    if "shell" not in hook or draw(st.booleans()):
        hook["action"] = draw(_valid_ish_action(event))
        if draw(st.booleans()):
            hook["maxSelections"] = draw(_MAX_SELECTIONS)
    if draw(st.booleans()):
        result = event == "hook_result"
        hook["filter"] = draw(_RESULT_FILTER if result else _VALID_FILTER)
    if draw(st.booleans()):
        hook["timeoutMs"] = draw(_TIMEOUT_MS)
    return draw(_mutated(hook, _HOOK_POOL))


_VALID_ISH_HOOK = _valid_ish_hook()
_NAMES = st.sampled_from(["a", "b", "p", "q", "a", "b", "__proto__", "x/y"])
_LOCAL = st.dictionaries(_NAMES, _VALID_ISH_HOOK, max_size=3)
_REPO_SECTION = st.dictionaries(_NAMES, _VALID_ISH_HOOK, max_size=2)
_PRESET_NAMES = st.lists(st.sampled_from(["p", "q"]), max_size=2, unique=True)
_PRESET_REFS = st.lists(st.sampled_from(["local/a", "local/b", "local/p", "o/r/x"]), max_size=3)


@st.composite
def _valid_ish_document(draw) -> dict[str, Any]:
    local = draw(_LOCAL)
    for name in draw(_PRESET_NAMES):
        refs = draw(_PRESET_REFS)
        local[name] = draw(_mutated({"description": "p", "preset": refs}, _PRESET_POOL))
    doc: dict[str, Any] = {"local": local}
    if draw(st.booleans()):
        doc["o/r"] = draw(_REPO_SECTION)
        doc["repos"] = ["o/r"]
    return draw(_mutated(doc, _DOCUMENT_POOL))


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_valid_ish_document())
def test_reader_models_and_schema_agree_near_valid_documents(doc):
    assert_agree(doc)


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_VALID_ISH_HOOK.map(lambda hook: {"local": {"h": hook}}))
def test_reader_models_and_schema_agree_near_valid_hooks(doc):
    assert_agree(doc)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_document)
def test_reader_models_and_schema_agree_on_noisy_documents(doc):
    assert_agree(doc)
