"""`plans/taskchecks.py`: each task's `<verify><automated>` commands, read by the one PLAN.md
parser (`Task.automated`), and the tasks no command checks."""

from __future__ import annotations

import re

import pytest

from looprail.errors import PlanError
from looprail.plans.planfile import parse_plan, read_plan
from looprail.plans.taskchecks import task_checks, unchecked_tasks
from tests.support import CONFORMANCE

PLAN = """\
---
phase: 01-x
plan: 01
---
<tasks>
<task type="auto">
  <name>checked</name>
  <verify>
    <automated>pytest -q tests/test_a.py</automated>
    <automated>
      grep -q "<main>" src/app.ts 2>&1 | head -3
    </automated>
    <manual>look at it</manual>
  </verify>
</task>
<task type="auto"><name>prose</name><verify>It works when you open it.</verify></task>
<task type="auto"><name>bare</name></task>
<task type="auto"><name>missing</name>
  <verify><automated>MISSING — Wave 0 must create tests/test_b.py first</automated></verify>
</task>
<task type="checkpoint:human-verify" gate="blocking"><name>look</name>
  <verify>Open the page.</verify>
</task>
</tasks>
"""


def test_commands_and_unchecked_tasks() -> None:
    plan = parse_plan(PLAN, path="01-01-PLAN.md")
    checks = task_checks(plan)
    assert [(c.name, c.commands, c.reason) for c in checks] == [
        (
            "checked",
            ["pytest -q tests/test_a.py", 'grep -q "<main>" src/app.ts 2>&1 | head -3'],
            None,
        ),
        ("prose", [], "<verify> is prose only"),
        ("bare", [], "no <verify>"),
        ("missing", [], "<automated> is MISSING"),
        ("look", [], None),  # a checkpoint: a person checks it
    ]
    assert [c.task_id for c in unchecked_tasks(plan)] == ["01-01/T2", "01-01/T3", "01-01/T4"]
    assert checks[1].prose == "It works when you open it."  # for the verifier


def test_a_tdd_feature_carries_its_commands() -> None:
    text = "---\nphase: 01-x\n---\n<feature><name>f</name><verify><automated>npm test</automated></verify></feature>\n"
    (checks,) = task_checks(parse_plan(text, path="01-02-PLAN.md"))
    assert (checks.commands, checks.unchecked) == (["npm test"], False)


REAL = CONFORMANCE / "real-projects"


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/conformance/real-projects needed")
def test_every_automated_command_of_the_real_plans_is_read() -> None:
    """Each `<automated>` of a real plan is one command of one task, as written."""
    seen = commands = 0
    for path in sorted(REAL.rglob("*PLAN*.md")):
        try:
            plan = read_plan(path)
        except PlanError:
            continue
        text = path.read_text(encoding="utf-8")
        written = re.findall(r"<automated>\s*(.*?)\s*</automated>", text, re.S)
        got = [c for task in plan.tasks for c in task.automated]
        assert got == [w for w in written if w], path
        seen += len(written)
        commands += sum(len(c.commands) for c in task_checks(plan))
    assert seen > 100 and 0 < commands <= seen
