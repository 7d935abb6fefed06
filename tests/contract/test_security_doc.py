"""docs/security.md's "Promises and the tests that prove them": every promise names a test, and
every test it names exists (`::name` is a test of the file named before it), so the list cannot
keep a promise whose proof was renamed or removed."""

from __future__ import annotations

import ast
import re

from tests.support import REPO

DOC = REPO / "docs" / "security.md"
REF = re.compile(r"`((?:tests/[\w/]+\.py)?)::(test_\w+)`")


def _promises() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text.split("## Promises and the tests that prove them", 1)[1].split("\n## ", 1)[0]


def _tests_in(rel: str) -> set[str]:
    tree = ast.parse((REPO / rel).read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def test_every_promise_names_a_test():
    items = re.split(r"\n- ", _promises())[1:]
    assert len(items) >= 25
    assert all(REF.search(item) for item in items), [i for i in items if not REF.search(i)]


def test_every_named_test_exists():
    current, named, missing = None, 0, []
    for path, name in REF.findall(_promises()):
        current = path or current
        assert current is not None, f"::{name} names no file"
        named += 1
        if name not in _tests_in(current):
            missing.append(f"{current}::{name}")
    assert named >= 30 and missing == []
