"""The checkpoint presentation (`looprail/plans/checkpoint.py`) over every checkpoint task of the
real GSD projects, and what an answer means (`interpret`), as properties."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.plans.checkpoint import Checkpoint, CheckpointOption, checkpoint_of, interpret, render
from looprail.plans.planfile import parse_plan, read_plan
from tests.support import CONFORMANCE, examples

REAL = CONFORMANCE / "real-projects"


def _real_checkpoint_plans() -> list[Path]:
    if not REAL.is_dir():
        return []
    return sorted(
        p for p in REAL.rglob("*-PLAN.md") if "checkpoint:" in p.read_text(errors="replace")
    )


@pytest.mark.skipif(not REAL.is_dir(), reason="needs ../shared/conformance/real-projects")
def test_every_real_checkpoint_is_presented_with_its_own_words():
    kinds: dict[str, int] = {}
    for path in _real_checkpoint_plans():
        plan = read_plan(path)
        for task in plan.tasks:
            if not task.is_checkpoint:
                continue
            cp = checkpoint_of(plan, task)
            kinds[cp.kind] = kinds.get(cp.kind, 0) + 1
            shown = render(cp, 0, len(plan.tasks))
            assert f"Task: {task.id}" in shown
            assert "YOUR ACTION:" in shown
            if cp.resume_signal:
                assert " ".join(cp.resume_signal.split()) in shown
            if cp.kind == "human-verify":
                assert cp.what_built or cp.how_to_verify or cp.action, path
                for line in cp.how_to_verify.splitlines():
                    assert line.strip() in shown
                assert interpret(cp, "approved").kind == "approved"
                assert interpret(cp, "the login button does nothing").kind == "issues"
            if cp.kind == "decision":
                assert cp.options, path  # from <options> or its action's `Options:` lines
                assert interpret(cp, cp.options[-1].id).option == cp.options[-1].id
                assert interpret(cp, "nonsense-id").problem
    assert kinds.get("human-verify", 0) >= 20
    assert kinds.get("decision", 0) >= 1
    assert kinds.get("human-action", 0) >= 1


def test_words_come_from_the_resume_signal():
    text = (
        '---\nphase: 01-x\nplan: "01"\ntype: execute\nautonomous: false\n---\n<tasks>\n'
        '<task type="checkpoint:human-verify"><what-built>it</what-built>\n'
        '<resume-signal>Type "verified" if all 5 checks pass, or describe which failed.'
        "</resume-signal></task>\n</tasks>\n"
    )
    plan = parse_plan(text, path="01-01-PLAN.md")
    cp = checkpoint_of(plan, plan.tasks[0])
    assert cp.words == ("approved", "verified")
    assert interpret(cp, "Verified.").kind == "approved"
    assert interpret(cp, "check 3 failed: 500 on /login").kind == "issues"
    assert interpret(cp, "   ").problem == "an empty answer"


def test_a_secret_is_what_the_signal_asks_for():
    def action(signal: str) -> Checkpoint:
        text = (
            '---\nphase: 01-x\nplan: "01"\ntype: execute\nautonomous: false\n---\n<tasks>\n'
            f'<task type="checkpoint:human-action"><action>a</action>\n'
            f"<resume-signal>{signal}</resume-signal></task>\n</tasks>\n"
        )
        plan = parse_plan(text, path="01-01-PLAN.md")
        return checkpoint_of(plan, plan.tasks[0])

    for signal, secret in (
        ("Paste your API key", True),
        ("Paste the deploy token here", True),
        ("Enter the database password", True),
        ("Paste the webhook secret", True),
        ('Type "done" when authenticated', False),
        ('Type "done" when you have updated .env.local with real credentials', False),
        ("Press Enter on the keyboard when ready", False),
    ):
        assert action(signal).secret is secret, signal
    cp = action("Paste your API key")
    assert interpret(cp, "sk-1").kind == "secret"
    assert interpret(cp, "approved").kind == "secret"  # whatever is typed is the secret


IDS = st.lists(
    st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True), min_size=1, max_size=5, unique=True
)


@given(ids=IDS, answer=st.text(min_size=1, max_size=30))
@settings(max_examples=examples(200))
def test_a_decision_takes_exactly_its_option_ids_or_numbers(ids, answer):
    cp = Checkpoint(
        task_id="01-01/T2",
        plan_id="01-01",
        kind="decision",
        options=tuple(CheckpointOption(id=i) for i in ids),
    )
    got = interpret(cp, answer)
    numbers = {str(n): i for n, i in enumerate(ids, 1)}
    wanted = answer.strip()
    if wanted.lower() in ids or wanted in numbers:
        assert got.kind == "chosen"
        assert got.option == (wanted.lower() if wanted.lower() in ids else numbers[wanted])
    else:
        assert got.kind is None and got.problem
        if wanted:
            assert ", ".join(ids) in got.problem  # names the ones it offers
