"""What real GSD projects write, on small synthetic plans, through the CLI (`phase plan-index`,
`lint`, `run`): issue 26's "What refuses or differs", one test (or two) per point. The same
shapes are generated and compared with the reference in test_generated_variants.py, and the
real projects in test_real_projects.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looprail.errors import PlanError
from tests.support import run_cli
from tests.support.loop import run_loop, scripted, task_xml

PHASES = Path(".planning") / "phases"


def phase_dir(project: Path, name: str) -> Path:
    folder = project / PHASES / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def plan(deps=(), *, autonomous=True, extra: str = "", body: str | None = None) -> str:
    fm = f"---\ndepends_on: {json.dumps(list(deps))}\nautonomous: {str(autonomous).lower()}\n"
    default = "<objective>\nDo it.\n</objective>\n<tasks>\n" + task_xml("t") + "\n</tasks>\n"
    return fm + extra + "---\n" + (default if body is None else body)


def index(project: Path, phase: str) -> dict:
    result = run_cli("phase", "plan-index", phase, "--raw", "--project", str(project))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def lint(project: Path) -> list[dict]:
    result = run_cli("lint", "--json", "--project", str(project))
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout)["findings"]


def codes(findings: list[dict]) -> list[str]:
    return [f["code"] for f in findings]


# 1. dependencies on plans of earlier phases -----------------------------------------------


def earlier_phase_project(tmp_path: Path) -> Path:
    project = tmp_path / "p"
    two = phase_dir(project, "02-api")
    (two / "02-01-PLAN.md").write_text(plan())
    (two / "02-01-SUMMARY.md").write_text("---\nstatus: complete\n---\n")
    (two / "02-02-PLAN.md").write_text(plan())  # not finished
    three = phase_dir(project, "03-ui")
    (three / "03-01-PLAN.md").write_text(plan(["02-01"]))  # satisfied
    (three / "03-02-PLAN.md").write_text(plan(["02-02"]))  # unfinished
    (three / "03-03-PLAN.md").write_text(plan(["05-01"]))  # missing
    (three / "03-04-PLAN.md").write_text(plan(["03-02"]))  # downstream of an unmet one
    return project


def test_dependencies_on_earlier_phases_keep_the_references_waves(tmp_path):
    idx = index(earlier_phase_project(tmp_path), "3")
    # The reference drops edges to other phases: so do the waves.
    assert idx["waves"] == {"1": ["03-01", "03-02", "03-03"], "2": ["03-04"]}
    unmet = {p["id"]: p["unmet"] for p in idx["plans"]}
    assert unmet["03-01"] == []
    assert unmet["03-02"] == ["'02-02' (phase 2) is not finished: it has no SUMMARY"]
    assert unmet["03-03"] == ["'05-01' is a plan of phase 5, which has no folder"]
    assert unmet["03-04"] == [
        "via plan 03-02: '02-02' (phase 2) is not finished: it has no SUMMARY"
    ]
    assert [p["depends_on"] for p in idx["plans"]][:2] == [["02-01"], ["02-02"]]  # as written


def test_lint_says_which_plan_halts_before_the_run(tmp_path):
    findings = lint(earlier_phase_project(tmp_path))
    unfinished = [f for f in findings if f["code"] == "plan-dependency-unfinished"]
    missing = [f for f in findings if f["code"] == "plan-dependency-missing"]
    assert [f["file"] for f in unfinished] == [".planning/phases/03-ui/03-02-PLAN.md"]
    assert "plan 03-02: '02-02' (phase 2) is not finished" in unfinished[0]["message"]
    assert missing[0]["severity"] == "error" and "'05-01'" in missing[0]["message"]
    assert "plan-invalid" not in codes(findings)


def test_run_halts_the_plan_waiting_on_an_unfinished_plan_and_runs_the_rest(tmp_path):
    project = earlier_phase_project(tmp_path)
    (project / PHASES / "03-ui" / "03-03-PLAN.md").unlink()
    rt = scripted(project, phase="03-ui")
    out = run_loop(project, rt, phase="3")
    assert out.result.status == "halted"
    assert "plan 03-02 waits: depends_on '02-02' (phase 2) is not finished" in out.result.reason
    assert [c.name for c in rt.calls_of("task")] == ["03-01/T1"]  # 03-01 ran; 03-02 did not
    assert (project / PHASES / "03-ui" / "03-01-SUMMARY.md").exists()
    assert not (project / PHASES / "03-ui" / "03-02-SUMMARY.md").exists()


# 2. plan files with slugs or short names --------------------------------------------------


def test_slugged_plan_files_resolve_by_their_canonical_id(tmp_path):
    project = tmp_path / "p"
    folder = phase_dir(project, "15-routes")
    (folder / "15-01-error-handling-PLAN.md").write_text(plan())
    (folder / "15-02-thread-routes-PLAN.md").write_text(plan(["15-01"]))
    idx = index(project, "15")
    assert idx["waves"] == {"1": ["15-01-error-handling"], "2": ["15-02-thread-routes"]}
    assert idx["warnings"] == []  # the reference resolves it the same way


def test_short_named_plan_files_resolve_the_phase_qualified_form_with_a_warning(tmp_path):
    project = tmp_path / "p"
    folder = phase_dir(project, "28-tests")
    (folder / "01-PLAN.md").write_text(plan())
    (folder / "02-PLAN.md").write_text(plan(["28-01"]))
    (folder / "28-01-SUMMARY.md").write_text("---\nstatus: complete\n---\n")
    idx = index(project, "28")
    assert idx["waves"] == {"1": ["01"], "2": ["02"]}
    assert idx["incomplete"] == ["02"]  # 28-01-SUMMARY.md is plan 01's
    assert any(
        "depends_on '28-01' is read as plan 01; the reference drops it" in w
        for w in idx["warnings"]
    )
    assert any("28-01-SUMMARY.md is read as this plan's SUMMARY" in w for w in idx["warnings"])


# 3. frontmatter-less plans ------------------------------------------------------------------


def test_a_plan_without_frontmatter_is_read_with_defaults(tmp_path):
    project = tmp_path / "p"
    folder = phase_dir(project, "02-pay")
    (folder / "02-01-PLAN.md").write_text(
        "# Plan 02-01\n\n## Objective\nWallets.\n\n### Task 1: Models\nDo.\n"
    )
    (folder / "02-02-PLAN.md").write_text("# Plan 02-02\n\nJust prose, no tasks.\n")
    idx = index(project, "2")
    assert [p["task_count"] for p in idx["plans"]] == [1, 1]  # a heading; the whole plan
    assert any(
        "02-01-PLAN.md:1: no YAML frontmatter: read with defaults" in w for w in idx["warnings"]
    )


def test_a_fenced_yaml_frontmatter_is_used_and_warned(tmp_path):
    project = tmp_path / "p"
    folder = phase_dir(project, "04-x")
    (folder / "04-01-PLAN.md").write_text(plan())
    (folder / "04-02-PLAN.md").write_text(
        '# Plan 04-02\n\n## Frontmatter\n\n```yaml\nwave: 2\ndepends_on: ["04-01"]\n'
        "autonomous: false\n```\n\n<tasks>\n" + task_xml("t") + "\n</tasks>\n"
    )
    idx = index(project, "4")
    assert idx["waves"] == {"1": ["04-01"], "2": ["04-02"]}
    assert idx["plans"][1]["autonomous"] is False and idx["has_checkpoints"] is True
    assert any(
        "04-02-PLAN.md:5: the frontmatter is in a ```yaml block" in w for w in idx["warnings"]
    )


# 4. must_haves as a list, YAML errors inside must_haves ----------------------------------------


def test_must_haves_as_a_list_or_with_bad_yaml_is_kept_raw_with_a_warning(tmp_path):
    project = tmp_path / "p"
    folder = phase_dir(project, "01-a")
    (folder / "01-01-PLAN.md").write_text(plan(extra="must_haves:\n  - a truth\n  - another\n"))
    bad = 'must_haves:\n  key_links:\n    - pattern: "fetch\\(api"\n'
    (folder / "01-02-PLAN.md").write_text(plan(["01-01"], extra=bad))
    idx = index(project, "1")
    assert idx["waves"] == {"1": ["01-01"], "2": ["01-02"]}  # depends_on still read
    warnings = "\n".join(idx["warnings"])
    assert "01-01-PLAN.md:4: must_haves: is a list, not a mapping" in warnings
    assert "01-02-PLAN.md:4: must_haves: invalid YAML (found unknown escape character" in warnings


def test_a_yaml_error_in_depends_on_still_refuses_naming_the_line(tmp_path):
    project = tmp_path / "p"
    folder = phase_dir(project, "01-a")
    (folder / "01-01-PLAN.md").write_text('---\ndepends_on: ["01-02\nwave: 1\n---\n')
    result = run_cli("phase", "plan-index", "1", "--raw", "--project", str(project))
    assert result.returncode == 1 and "01-01-PLAN.md:" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


# 5. unknown plan types --------------------------------------------------------------------------


def test_an_unknown_plan_type_is_warned_not_refused(tmp_path):
    project = tmp_path / "p"
    (phase_dir(project, "01-a") / "01-01-PLAN.md").write_text(plan(extra="type: verify\n"))
    idx = index(project, "1")
    assert idx["plans"][0]["task_count"] == 1
    assert any("type: unknown plan type 'verify'; run as execute" in w for w in idx["warnings"])


# 6. an unbalanced code fence inside <context> ------------------------------------------------


def test_an_unbalanced_fence_in_context_is_recovered(tmp_path):
    project = tmp_path / "p"
    body = (
        "<objective>\nX\n</objective>\n<context>\n<interfaces>\n```typescript\nexport type A = 1;\n"
        "</interfaces>\n</context>\n<tasks>\n"
        + task_xml("one", action="run:\n```bash\nnpm test\n```\n")
        + "\n"
        + task_xml("two")
        + "\n</tasks>\n"
    )
    (phase_dir(project, "06-a") / "06-01-PLAN.md").write_text(plan(body=body))
    idx = index(project, "6")
    assert idx["plans"][0]["task_count"] == 2
    assert any("<context> holds an unbalanced code fence" in w for w in idx["warnings"])


# 7. has_checkpoints ----------------------------------------------------------------------------


def test_has_checkpoints_keeps_the_references_meaning_and_lint_says_the_truer_thing(tmp_path):
    project = tmp_path / "p"
    body = "<tasks>\n" + task_xml("look", type="checkpoint:human-verify") + "\n</tasks>\n"
    (phase_dir(project, "01-a") / "01-01-PLAN.md").write_text(plan(body=body))
    assert index(project, "1")["has_checkpoints"] is False  # not marked autonomous: false
    finding = next(f for f in lint(project) if "checkpoint tasks" in f["message"])
    assert finding["code"] == "plan-warning" and "autonomous: false" in finding["fix"]


# 8. two folders for one phase --------------------------------------------------------------------


def test_two_folders_for_one_phase(tmp_path):
    project = tmp_path / "p"
    (phase_dir(project, "04-threading") / "04-01-PLAN.md").write_text(plan())
    (phase_dir(project, "4-threading") / "04-01-SUMMARY.md").write_text("done\n")
    idx = index(project, "4")  # the padded folder, as the reference
    assert idx["phase_dir"] == ".planning/phases/04-threading" and idx["incomplete"] == ["04-01"]
    assert "phase 4 has 2 folders: 04-threading, 4-threading" in idx["warnings"][0]
    invalid = [f for f in lint(project) if f["code"] == "plan-invalid"]
    assert len(invalid) == 1  # one finding names both folders and the fix
    assert "move the files of 4-threading into 04-threading" in invalid[0]["message"]
    rt = scripted(project, phase="04-threading")
    with pytest.raises(PlanError, match="phase 4 has 2 folders: 04-threading, 4-threading; move"):
        run_loop(project, rt, phase="4")  # refused: which folder's SUMMARYs count is unclear
    assert rt.calls_of("task") == []


# 9. plans lost in a subfolder ---------------------------------------------------------------


def test_plans_in_a_subfolder_are_named_by_lint_and_run_refuses_to_plan_over_them(tmp_path):
    project = tmp_path / "p"
    folder = phase_dir(project, "05-client")
    (folder / "05-CONTEXT.md").write_text("# ctx\n")
    (folder / "server").mkdir()
    (folder / "server" / "05-01-PLAN.md").write_text(plan())
    warning = next(f for f in lint(project) if "subfolders" in f["message"])
    assert "server/05-01-PLAN.md" in warning["message"] and "move them into" in warning["message"]
    rt = scripted(project, phase="05-client")
    out = run_loop(project, rt, phase="5")
    assert out.result.status == "halted" and "sit in subfolders" in out.result.reason
    assert "plan" not in [c.name for c in rt.calls_of("phase")]  # the planner was not called


# 10. the reference's plan vocabulary ------------------------------------------------------------


def test_the_references_vocabulary_is_read_without_unknown_key_warnings(tmp_path):
    project = tmp_path / "p"
    keys = (
        "execution_strategy: parallel\ndomain: api\nname: n\ntitle: t\ntags: [a]\n"
        "subsystem: s\nthreat_ids: [T-1]\ncheckpoint_reason: r\ngap_closure: true\n"
        "user_setup: []\n"
    )
    body = (
        "<objective>\nTDD it.\n</objective>\n<threat_model>\n| T-1 |\n</threat_model>\n"
        "<feature>\n<name>parse dates</name>\n<files>src/d.py, tests/test_d.py</files>\n"
        "<behavior>'2026-01-01' → date</behavior>\n<implementation>use fromisoformat"
        "</implementation>\n</feature>\n"
    )
    folder = phase_dir(project, "07-a")
    (folder / "07-02-PLAN.md").write_text(plan(extra=keys + "type: tdd\n", body=body))
    task = '<task type="auto" id="t-9"><name>x</name><verify><automated>pytest</automated></verify></task>'
    (folder / "07-02A-PLAN.md").write_text(plan(["07-02"], body=f"<tasks>\n{task}\n</tasks>\n"))
    idx = index(project, "7")
    assert idx["warnings"] == []
    assert idx["waves"] == {"1": ["07-02"], "2": ["07-02A"]}
    assert [p["task_count"] for p in idx["plans"]] == [1, 1]  # the <feature> is a tdd task

    from looprail.plans import load_phase

    phase = load_phase(project, "7")
    feature = phase.plans[0].tasks[0]
    assert feature.type == "tdd" and feature.files == ["src/d.py", "tests/test_d.py"]
    assert "fromisoformat" in (feature.action or "") and "→ date" in (feature.action or "")
    assert phase.plans[0].sections["threat_model"] == "| T-1 |"
    lettered = phase.plans[1].tasks[0]
    assert lettered.attributes["id"] == "t-9" and lettered.verify == "<automated>pytest</automated>"


def test_the_executor_prompt_carries_the_plans_objective_interfaces_and_threat_model(tmp_path):
    from looprail.runtime.base import PhaseRef, Request, TaskWork
    from looprail.runtime.prompts import build_prompt

    project = tmp_path / "p"
    folder = phase_dir(project, "01-a")
    body = (
        "<objective>\nShip the API.\n</objective>\n<context>\n<interfaces>\n"
        "export function login(): Token;\n</interfaces>\n</context>\n"
        "<threat_model>\n| T-01-01 | S | login | high | mitigate | rate limit |\n"
        "</threat_model>\n<tasks>\n" + task_xml("t") + "\n</tasks>\n"
    )
    (folder / "01-01-PLAN.md").write_text(plan(body=body))
    request = Request(
        kind="task",
        name="01-01/T1",
        project=str(project),
        point=None,
        cap_id=None,
        flavor="gsd",
        phase=PhaseRef(number="1", dir=str(folder)),
        plan_id="01-01",
        role="executor",
        task=TaskWork(plan_id="01-01", task_id="T1", index=1, name="t", action="do it"),
    )
    prompt = build_prompt(request, project)
    assert "### Plan objective (01-01)\n\nShip the API." in prompt
    assert "### Interfaces (01-01)\n\nexport function login(): Token;" in prompt
    assert "| T-01-01 | S | login | high | mitigate | rate limit |" in prompt
