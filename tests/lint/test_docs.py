"""docs/lint.md's findings table and `lint.RULES` name the same codes with the same severities
(the docs cannot drift from the linter), and every finding lint makes follows its rule."""

from __future__ import annotations

import re

import pytest

from looprail.lint import RULES, SEVERITIES, Finding
from tests.support import REPO

DOC = REPO / "docs" / "lint.md"
ROW = re.compile(r"^\| `(?P<code>[a-z0-9-]+)` \| (?P<severity>[^|]+) \| (?P<what>.+) \|$", re.M)


def _documented() -> dict[str, tuple[str, ...]]:
    rows = {}
    for m in ROW.finditer(DOC.read_text(encoding="utf-8")):
        words = re.findall(r"\b(error|warning|info)\b", m["severity"])
        rows[m["code"]] = tuple(s for s in SEVERITIES if s in words)
    return rows


def test_every_rule_is_documented_with_its_severities():
    documented = _documented()
    assert len(documented) >= 30
    assert sorted(documented) == sorted(RULES)
    for code, rule in RULES.items():
        assert documented[code] == rule.severities, code
        assert rule.summary and rule.code == code


def test_a_finding_outside_the_table_is_refused():
    Finding(severity="warning", code="plan-warning", file="f", message="m")
    with pytest.raises(ValueError, match=r"not in lint\.RULES"):
        Finding(severity="error", code="no-such-rule", file="f", message="m")
    with pytest.raises(ValueError, match="cannot be 'error'"):
        Finding(severity="error", code="plan-warning", file="f", message="m")
