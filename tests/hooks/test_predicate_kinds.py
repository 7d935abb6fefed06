"""Predicate kinds are declared once (`hooks.gates.predicates.PREDICATES`, one `PredicateKind` each):
evaluation, lint's field checks and the audit's text all read that record, so a new kind is one
record."""

from __future__ import annotations

import pytest

from looprail import lint
from looprail.hooks import manifest
from looprail.hooks.gates.predicates import (
    PREDICATE_KINDS,
    PREDICATES,
    REFERENCE_KINDS,
    CheckContext,
    CheckError,
    PredicateKind,
    Verdict,
    evaluate_predicate,
)
from looprail.lint.declarations import _Decl
from looprail.lint.hooks import _predicate
from looprail.trust.surfaces import _predicate_surface
from tests.support import REPO

DOCS = REPO / "docs" / "checks.md"


def test_the_table_is_the_vocabulary():
    assert tuple(PREDICATES) == PREDICATE_KINDS
    # The manifest reads its kinds off its own models (validation imports no evaluator): the
    # two declarations are one list, in one order.
    assert manifest.PREDICATE_KINDS == PREDICATE_KINDS
    assert REFERENCE_KINDS == ("command-exit-zero", "artifact-frontmatter-equals")
    assert [k.name for k in PREDICATES.values() if k.shell] == ["command-exit-zero"]
    assert [k.name for k in PREDICATES.values() if k.pure] == ["config-equals"]
    text = DOCS.read_text(encoding="utf-8")
    assert all(f"`{kind}`" in text for kind in PREDICATE_KINDS)


def test_a_new_kind_is_one_record(monkeypatch, tmp_path):
    def always(predicate, ctx):
        return Verdict(predicate["answer"] != "yes", "asked")

    spec = PredicateKind("ask-me", ("answer",), always, "answers {answer} (no process)")
    monkeypatch.setitem(PREDICATES, "ask-me", spec)
    ctx = CheckContext(tmp_path)
    assert evaluate_predicate({"kind": "ask-me", "answer": "yes"}, ctx) == Verdict(False, "asked")
    surface = _predicate_surface({"kind": "ask-me", "answer": "yes"}, "$.gates[0]", "ship:pre")
    assert surface.runs == "answers yes (no process)" and surface.refused is None
    assert not surface.shell


def _decl(predicate):
    entry = {"point": "ship:pre", "check": {"predicate": predicate}, "blocking": False}
    return _Decl("cap", "gates", 0, entry, "cap/capability.json")


@pytest.mark.parametrize("kind", PREDICATE_KINDS)
def test_lint_asks_for_each_field_the_record_names(kind, tmp_path):
    spec = PREDICATES[kind]
    data = lint.LintInput(
        tmp_path, None, {}, None, lint.Probe(lambda f, n: None, lambda c: True, lambda p: True)
    )
    findings = _predicate(data, _decl({"kind": kind}), {"kind": kind}, False, "warning")
    assert [f.code for f in findings] == ["predicate-invalid"]
    missing = (*spec.fields, *spec.values)
    assert findings[0].path.endswith(f".check.predicate.{missing[0]}")
    for field in missing:
        assert repr(field) in findings[0].message


@pytest.mark.parametrize("kind", PREDICATE_KINDS)
def test_audit_text_comes_from_the_record(kind):
    spec = PREDICATES[kind]
    predicate = {"kind": kind, **{f: f"my-{f}" for f in spec.fields}}
    surface = _predicate_surface(predicate, "$.gates[0].check.predicate", "ship:pre")
    assert surface.shell is spec.shell
    for field in spec.fields:
        assert f"my-{field}" in surface.runs


def test_an_unknown_kind_names_the_known_ones(tmp_path):
    result = evaluate_predicate({"kind": "nope"}, CheckContext(tmp_path))
    assert isinstance(result, CheckError)
    assert result.reason.endswith(f"(known: {', '.join(PREDICATE_KINDS)})")
