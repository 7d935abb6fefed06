"""`<read_first>` as real plans write it (plans/readfirst.py), the plan checks
(plans/plancheck.py) through `lint`, and the bound on what a prompt takes from a plan."""

from __future__ import annotations

import json
from pathlib import Path

from looprail.machine.tasks import task_work
from looprail.plans import load_phase, parse_plan
from looprail.plans.plancheck import check_phase_plans
from looprail.plans.readfirst import ReadFirst, read_first_entries, resolve
from looprail.runtime.prompts import build_prompt
from looprail.runtime.request import DispatchContext, build_request
from tests.support import run_cli


def test_entries_take_the_path_part_and_keep_the_rest_as_the_note():
    text = """
    - 01-RESEARCH.md (§Architecture Patterns → Pattern 1; §Common Pitfalls 2, 3)
    - 01-CONTEXT.md (D-01, D-02)
    - src/server/gameState.js i src/server/socketHandlers.js (…)
    - frontend/src/Sidebar.tsx — read the full file: the reducer, TYPE_ORDER, FOLDER_ORDER
    engine/api.py, engine/db.py
    Read the module's public functions first.
    """
    assert read_first_entries(text) == [
        ReadFirst("01-RESEARCH.md", "(§Architecture Patterns → Pattern 1; §Common Pitfalls 2, 3)"),
        ReadFirst("01-CONTEXT.md", "(D-01, D-02)"),
        ReadFirst("src/server/gameState.js", "(…)"),
        ReadFirst("src/server/socketHandlers.js", "(…)"),
        ReadFirst(
            "frontend/src/Sidebar.tsx", "read the full file: the reducer, TYPE_ORDER, FOLDER_ORDER"
        ),
        ReadFirst("engine/api.py"),
        ReadFirst("engine/db.py", "Read the module's public functions first."),
    ]


def test_a_bare_name_alone_is_a_file_and_prose_is_a_note():
    text = """
    - Makefile
    src/a.py, LICENSE, `Dockerfile`
    Read them first.
    """
    assert read_first_entries(text) == [
        ReadFirst("Makefile"),
        ReadFirst("src/a.py"),
        ReadFirst("LICENSE"),
        ReadFirst("Dockerfile", "Read them first."),
    ]


def test_a_bare_phase_file_name_resolves_against_the_phase_folder(tmp_path: Path):
    phase = tmp_path / ".planning" / "phases" / "01-x"
    phase.mkdir(parents=True)
    (phase / "01-RESEARCH.md").write_text("r")
    (tmp_path / "setup.sh").write_text("s")
    assert resolve(tmp_path, phase, "01-RESEARCH.md") == ".planning/phases/01-x/01-RESEARCH.md"
    assert resolve(tmp_path, phase, "setup.sh") == "setup.sh"  # not the phase's: the project's
    assert resolve(tmp_path, phase, "01-GONE.md") == "01-GONE.md"  # named as written


PLAN = """---
phase: 01-x
plan: "01"
depends_on: []
files_modified: [src/a.py]
requirements: [R-1]
must_haves:
  artifacts:
    - path: src/a.py
    - path: src/b.py
---
<tasks>
<task type="auto">
<name>one</name>
<files>src/a.py</files>
<action>write it</action>
<verify><automated>pytest -q</automated></verify>
<done>written</done>
</task>
<task type="auto">
<name>two</name>
<action>write more</action>
<verify>look at it</verify>
</task>
<task type="auto">
<name>three</name>
<files>src/a.py</files>
<action>more</action>
<verify><automated>MISSING — no test harness yet</automated></verify>
<done>done</done>
</task>
</tasks>
"""


def _project(tmp_path: Path, plan: str = PLAN) -> Path:
    phase = tmp_path / ".planning" / "phases" / "01-x"
    phase.mkdir(parents=True)
    (tmp_path / ".planning" / "ROADMAP.md").write_text(
        "## Phase 1: X\n**Requirements**: R-1, R-2\n"
    )
    (phase / "01-01-PLAN.md").write_text(plan)
    return tmp_path


def test_the_plan_checks_name_each_gap(tmp_path: Path):
    project = _project(tmp_path)
    report = check_phase_plans(project, load_phase(project, "1"))
    where = ".planning/phases/01-x/01-01-PLAN.md"
    assert [f.line() for f in report.findings] == [
        f"{where}: task T2 (two) has no <files>, <done>",
        f"{where}: must_haves artifact src/b.py is in no plan's files_modified or <files>",
        ".planning/phases/01-x: requirement R-2 of the phase's ROADMAP section is in no plan's "
        "requirements",
    ]
    assert [f.message for f in report.unchecked] == [
        "task T2 (two) is unchecked (<verify> is prose only)",
        "task T3 (three) is unchecked (<automated> is MISSING)",
    ]


def test_lint_warns_about_a_users_plans_and_never_refuses_them(tmp_path: Path):
    project = _project(tmp_path)
    done = run_cli("lint", str(project), "--json")
    found = json.loads(done.stdout)["findings"]
    checks = [(f["severity"], f["code"]) for f in found]
    assert checks.count(("warning", "plan-check")) == 3
    assert checks.count(("info", "task-unchecked")) == 2
    assert not [f for f in found if f["severity"] == "error" and f["code"].startswith("plan-")]


def test_the_dry_run_warns_the_plan_check_findings(tmp_path: Path):
    project = _project(tmp_path)
    done = run_cli("run", "--phase", "1", "--dry-run", cwd=project)
    assert "plan check: .planning/phases/01-x/01-01-PLAN.md: task T2 (two) has no" in done.stdout


def test_what_a_prompt_takes_from_a_plan_is_bounded_and_says_what_was_cut(tmp_path: Path):
    big = "x" * (70 * 1024)
    project = _project(
        tmp_path, PLAN.replace("<tasks>", f"<verification>\n{big}\n</verification>\n<tasks>")
    )
    phase = load_phase(project, "1")
    plan = phase.plans[0]
    work = task_work(plan, plan.tasks[0], project)
    ctx = DispatchContext(project=project, phase_number="1", phase_dir=phase.dir)
    prompt = build_prompt(build_request("task", work.key, ctx, role="executor", task=work), project)
    assert "x" * 1024 in prompt
    assert "(the plan's verification cut at 64 KiB: 6144 bytes more)" in prompt
    assert len(prompt.encode()) < 80 * 1024


def test_a_plans_frontmatter_keys_are_kept_as_written():
    plan = parse_plan(PLAN, path="01-01-PLAN.md")
    assert plan.written["requirements"] == "requirements: [R-1]"
    assert plan.written["must_haves"].splitlines()[-1] == "    - path: src/b.py"
