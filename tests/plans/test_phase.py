"""Phase discovery under `.planning/phases/`, summaries, artifacts, dependency resolution."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from looprail.errors import PlanError
from looprail.plans import find_phase, list_phases, load_phase, normalize_phase_number


def write_plan(phase_dir: Path, plan_id: str, frontmatter: str = "", body: str = "") -> Path:
    phase_dir.mkdir(parents=True, exist_ok=True)
    path = phase_dir / f"{plan_id}-PLAN.md"
    path.write_text(f"---\n{frontmatter}---\n<objective>Plan {plan_id}</objective>\n{body}")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    phases = tmp_path / ".planning" / "phases"
    write_plan(phases / "01-setup", "01-01", "wave: 1\n")
    write_plan(phases / "01-setup", "01-02", 'depends_on: ["01"]\n')
    write_plan(phases / "01-setup", "01-03", 'depends_on: ["01-01", "1-2"]\n')
    (phases / "01-setup" / "01-01-SUMMARY.md").write_text("done\n")
    (phases / "01-setup" / "01-CONTEXT.md").write_text("decisions\n")
    (phases / "01-setup" / "01-VERIFICATION.md").write_text("status: passed\n")
    (phases / "01-setup" / "01-UAT.md").write_text("ok\n")
    write_plan(phases / "02-api", "02-01")
    write_plan(phases / "02.1-hotfix", "02.1-01")
    (phases / "10-later").mkdir()
    (phases / "notes").mkdir()  # not a phase folder
    (tmp_path / ".planning" / "config.json").write_text(json.dumps({"parallelization": True}))
    return tmp_path


def test_normalize_phase_number():
    assert normalize_phase_number("01") == "1"
    assert normalize_phase_number("1") == "1"
    assert normalize_phase_number("02.1") == "2.1"
    assert normalize_phase_number("2.01") == "2.1"
    assert normalize_phase_number("12a") == "12A"
    assert normalize_phase_number("one") is None
    assert normalize_phase_number("") is None


def test_list_phases_in_phase_order(project: Path):
    phases = list_phases(project)
    assert [(p.number, p.token, p.slug) for p in phases] == [
        ("1", "01", "setup"),
        ("2", "02", "api"),
        ("2.1", "02.1", "hotfix"),
        ("10", "10", "later"),
    ]
    assert list_phases(project / "nowhere") == []


@pytest.mark.parametrize("token", ["1", "01", "001"])
def test_find_phase_by_number(project: Path, token: str):
    assert find_phase(project, token).dir.name == "01-setup"


def test_decimal_phase(project: Path):
    phase = load_phase(project, "02.1")
    assert phase.number == "2.1"
    assert phase.token == "02.1"
    assert phase.slug == "hotfix"
    assert [p.id for p in phase.plans] == ["02.1-01"]
    assert load_phase(project, "2.1").dir == phase.dir


def test_load_phase(project: Path):
    phase = load_phase(project, "1")
    assert phase.number == "1"
    assert phase.dir == (project / ".planning" / "phases" / "01-setup").resolve()
    assert [p.id for p in phase.plans] == ["01-01", "01-02", "01-03"]
    assert [p.has_summary for p in phase.plans] == [True, False, False]
    assert phase.plans[0].summary_path == phase.dir / "01-01-SUMMARY.md"
    assert phase.incomplete == ["01-02", "01-03"]
    assert phase.has_context and phase.context_path == phase.dir / "01-CONTEXT.md"
    assert phase.verification_path == phase.dir / "01-VERIFICATION.md"
    assert phase.uat_path == phase.dir / "01-UAT.md"
    assert phase.config == {"parallelization": True}
    # the one deliberate difference from the reference is said, never silent
    assert phase.warnings == [
        ".planning/phases/01-setup/01-02-PLAN.md: depends_on '01' is read as plan 01-01; "
        "the reference drops a bare plan number (write '01-01' to agree)",
        ".planning/phases/01-setup/01-03-PLAN.md: depends_on '1-2' is read as plan 01-02; "
        "the reference drops it (write '01-02' to agree)",
    ]


def test_depends_on_forms_resolve_to_plan_ids(project: Path):
    phase = load_phase(project, "1")
    assert phase.plan("01-02").depends_on == ["01-01"]
    assert phase.plan("01-03").depends_on == ["01-01", "01-02"]


def test_empty_phase_and_bare_context(project: Path):
    phase_dir = project / ".planning" / "phases" / "10-later"
    (phase_dir / "CONTEXT.md").write_text("x\n")
    phase = load_phase(project, "10")
    assert phase.plans == []
    assert phase.context_path == phase.dir / "CONTEXT.md"
    assert phase.verification_path is None and phase.uat_path is None


def test_summary_matching_ignores_zero_padding(project: Path):
    (project / ".planning" / "phases" / "02-api" / "2-1-SUMMARY.md").write_text("done\n")
    assert load_phase(project, "2").plans[0].has_summary


def test_missing_phase_lists_the_phases_found(project: Path):
    with pytest.raises(PlanError) as info:
        load_phase(project, "7")
    assert str(info.value) == (".planning/phases: phase 7 not found (phases found: 1, 2, 2.1, 10)")


def test_no_phases_folder(tmp_path: Path):
    with pytest.raises(PlanError, match=r"phase 1 not found: no \.planning/phases/ folder"):
        load_phase(tmp_path, "1")


def test_ambiguous_phase(project: Path):
    (project / ".planning" / "phases" / "1-duplicate").mkdir()
    with pytest.raises(PlanError, match="phase 1 has 2 folders: 01-setup, 1-duplicate; move"):
        find_phase(project, "1")
    assert find_phase(project, "1", as_reference=True).dir.name == "01-setup"


def test_dangling_dependency_halts_that_plan_not_the_phase(project: Path):
    write_plan(project / ".planning" / "phases" / "02-api", "02-02", 'depends_on: ["02-09"]\n')
    phase = load_phase(project, "2")
    assert phase.plan("02-02").unmet == ["'02-09' names no plan of phase 2"]
    assert (
        ".planning/phases/02-api/02-02-PLAN.md: depends_on: '02-09' names no plan of phase 2; "
        "the run halts plan 02-02 there"
    ) in phase.warnings


def test_duplicate_plan_ids_in_one_phase(project: Path):
    write_plan(project / ".planning" / "phases" / "02-api", "2-1")
    with pytest.raises(PlanError, match="duplicate plan id '2-1' in one phase"):
        load_phase(project, "2")


def test_plan_error_names_the_project_relative_file(project: Path):
    write_plan(project / ".planning" / "phases" / "02-api", "02-02", "wave: soon\n")
    assert any(
        w.startswith(".planning/phases/02-api/02-02-PLAN.md:2: wave: ")
        for w in load_phase(project, "2").warnings
    )


def test_warnings_for_odd_names_and_contradictions(project: Path):
    phase_dir = project / ".planning" / "phases" / "02-api"
    (phase_dir / "PLAN-notes.md").write_text("x\n")
    write_plan(
        phase_dir,
        "02-02",
        "plan: 05\n",
        '<tasks><task type="checkpoint:decision"><name>a</name></task></tasks>\n',
    )
    (project / ".planning" / "config.json").write_text("{broken")
    warnings = load_phase(project, "2").warnings
    assert any("config.json:1:2: not valid JSON" in w for w in warnings)
    assert any("PLAN-notes.md: looks like a plan" in w for w in warnings)
    assert any("frontmatter plan: 05 disagrees with the file name (plan 02)" in w for w in warnings)
    assert any(
        "02-02-PLAN.md: has checkpoint tasks but autonomous is not false" in w for w in warnings
    )


def test_importing_plans_does_not_import_networkx():
    import subprocess

    code = "import sys, looprail.plans; print('networkx' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_plan_paths_outside_the_project_are_warned(tmp_path):
    from looprail.plans import load_phase

    phase = tmp_path / ".planning" / "phases" / "01-x"
    phase.mkdir(parents=True)
    (phase / "01-01-PLAN.md").write_text(
        '---\nplan: "01"\nfiles_modified: ["../outside.py", "src/ok.py"]\n---\n'
        '<tasks>\n<task type="auto">\n<name>t</name>\n<files>/etc/passwd</files>\n'
        "<action>a</action>\n</task>\n</tasks>\n"
    )
    warnings = load_phase(tmp_path, "1").warnings
    assert any("'../outside.py' points outside the project" in w for w in warnings)
    assert any("T1 files: '/etc/passwd' points outside" in w for w in warnings)
    assert not any("src/ok.py" in w for w in warnings)
