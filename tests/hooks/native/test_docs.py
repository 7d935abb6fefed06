"""Every JSON example in docs/native-hooks.md marked valid validates, and every one marked
invalid does not (the docs cannot drift from the validator)."""

from __future__ import annotations

import json
import re

import pytest

from looprail.hooks.native.parsing import validate_hooks_document
from tests.support import REPO

DOC = REPO / "docs" / "native-hooks.md"
EXAMPLE = re.compile(r"<!-- example:(valid|invalid) -->\s*```json\n(.*?)```", re.S)
EXAMPLES = EXAMPLE.findall(DOC.read_text(encoding="utf-8"))


def test_the_doc_has_examples():
    kinds = [kind for kind, _ in EXAMPLES]
    assert kinds.count("valid") >= 5 and kinds.count("invalid") >= 2


@pytest.mark.parametrize(("kind", "text"), EXAMPLES)
def test_doc_example(kind, text):
    result = validate_hooks_document(json.loads(text), file=str(DOC), scope="project")
    assert (result.status == "valid") is (kind == "valid"), result.issues


def test_the_doc_shows_every_event_and_action():
    from looprail.hooks.native.actions import ACTION_TYPES
    from looprail.hooks.native.events import EVENT_NAMES

    hooks = [
        h
        for kind, text in EXAMPLES
        if kind == "valid"
        for h in validate_hooks_document(json.loads(text), file="doc", scope="project").hooks
    ]
    assert {h.entry.event for h in hooks} == set(EVENT_NAMES)
    assert {h.entry.action.type for h in hooks if h.entry.action} == set(ACTION_TYPES)
