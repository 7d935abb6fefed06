"""The role briefs looprail ships (looprail/runtime/roles/*.md, issue 42 point 2) say what each
role needs to do quality work: a few kB each, not the reference's 50 kB, and every rule the
issue lists, found by its words in the brief a run hands the agent (`role_brief`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from looprail.runtime.prompts import role_brief

# role → what its brief must say (each a phrase of the shipped text, case-insensitive)
MUST_SAY = {
    "executor": {
        "deviation rules: what to fix without asking": "what you fix without asking",
        "what to stop for": "do not make it. stop and report it",
        "no package substitution": "never swap a package that fails to install",
        "at most three attempts": "at most three attempts at one failure",
        "red then green": "goes red, then green",
        "run the checks": "run the task's verify command",
        "no stubs": "leave no stubs",
        "the closing paragraph: deviations": "`deviations:`",
        "the closing paragraph: blocked": "`blocked: <reason>`",
        "the plan's must_haves": "must_haves",
    },
    "planner": {
        "must_haves backward from the goal": "plan from the goal backwards",
        "truths, artifacts, key links": "key links",
        "read_first on every task": "`read_first`: the files the executor must read",
        "acceptance criteria": "acceptance criteria that can be checked",
        "an automated verify": "an `<automated>` command in `<verify>`",
        "concrete actions": "an action concrete enough",
        "interfaces": "<interfaces>",
        "when a task is tdd": '`tdd="true"` with a `<behavior>` when',
        "context's decisions honoured": "decisions (d-01, d-02, …) are binding",
        "no silent scope cuts": "do not cut scope silently",
        "every requirement id covered": "every requirement id of the phase goes into some",
    },
    "verifier": {
        "adversarial: a summary is no evidence": "none of them is\nevidence",
        "exists": "**exists**",
        "substantive, not a stub": "**substantive**",
        "wired": "**wired**",
        "key links": "check each key link",
        "anti-patterns": "anti-patterns",
        "run the tests when allowed": "run the project's tests",
        "say so when it could not": "when you cannot run them",
        "passed": "`passed`",
        "gaps_found": "`gaps_found`",
        "human_needed": "`human_needed`",
    },
    "orchestrator": {
        "the context template": "<decisions>",
        "numbered decisions": "**d-01:**",
        "canonical references": "<canonical_refs>",
        "deferred ideas": "<deferred>",
        "the ship step": "## the ship step",
    },
}


@pytest.mark.parametrize("role", sorted(MUST_SAY))
def test_each_shipped_brief_says_what_its_role_needs(tmp_path: Path, role: str) -> None:
    brief, source = role_brief(tmp_path, role)  # a project without its own briefs
    assert source == f"looprail/runtime/roles/{role}.md", source
    assert 1_000 < len(brief.encode()) < 6_000, len(brief.encode())  # a few kB
    text = brief.lower()
    missing = [what for what, words in MUST_SAY[role].items() if words.lower() not in text]
    assert not missing, missing


def test_the_executor_brief_no_longer_says_what_issue_42_found_wrong(tmp_path: Path) -> None:
    brief, _ = role_brief(tmp_path, "executor")
    assert "change the files it names" not in brief  # the opposite of the deviation rules
    assert "Do not touch .planning/" not in brief  # real plans' <files> live there
