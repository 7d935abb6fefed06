"""`looprail phase plan-index` / `phase list` end to end through the CLI (in process; the first
test runs a real subprocess)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import run_cli


def looprail(
    *args: str, cwd: Path | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, subprocess=process)


def write_plan(phase_dir: Path, plan_id: str, frontmatter: str, body: str = "") -> None:
    phase_dir.mkdir(parents=True, exist_ok=True)
    (phase_dir / f"{plan_id}-PLAN.md").write_text(
        f"---\n{frontmatter}---\n<objective>\nDo {plan_id}.\n\nMore.\n</objective>\n{body}"
    )


TASKS = "<tasks>\n<task type='auto'><name>a</name></task>\n<task><name>b</name></task>\n</tasks>\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    phase = tmp_path / ".planning" / "phases" / "01-setup"
    write_plan(phase, "01-01", "wave: 1\nfiles_modified: [src/a.py]\n", TASKS)
    write_plan(phase, "01-02", "wave: 1\nfiles_modified: [src/a.py, src/b.py]\n")
    write_plan(
        phase,
        "01-03",
        'wave: 1\ndepends_on: ["01"]\nautonomous: false\n',
        "<tasks><task type='checkpoint:human-verify'><name>look</name></task></tasks>\n",
    )
    (phase / "01-01-SUMMARY.md").write_text("done\n")
    (tmp_path / ".planning" / "phases" / "02-next").mkdir()
    return tmp_path


def test_plan_index_raw(project: Path):
    result = looprail("phase", "plan-index", "01", "--raw", "--project", str(project), process=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    index = json.loads(result.stdout)
    assert index == {
        "phase": "01",
        "phase_dir": ".planning/phases/01-setup",
        "plans": [
            {
                "id": "01-01",
                "wave": 1,
                "declared_wave": 1,
                "depends_on": [],
                "autonomous": True,
                "objective": "Do 01-01.",
                "files_modified": ["src/a.py"],
                "task_count": 2,
                "has_summary": True,
                "halted": False,
                "blocked_by": [],
                "unmet": [],
            },
            {
                "id": "01-02",
                "wave": 1,
                "declared_wave": 1,
                "depends_on": [],
                "autonomous": True,
                "objective": "Do 01-02.",
                "files_modified": ["src/a.py", "src/b.py"],
                "task_count": 0,
                "has_summary": False,
                "halted": False,
                "blocked_by": [],
                "unmet": [],
            },
            {
                "id": "01-03",
                "wave": 2,
                "declared_wave": 1,
                "depends_on": ["01-01"],
                "autonomous": False,
                "objective": "Do 01-03.",
                "files_modified": [],
                "task_count": 1,
                "has_summary": False,
                "halted": False,
                "blocked_by": [],
                "unmet": [],
            },
        ],
        "waves": {"1": ["01-01", "01-02"], "2": ["01-03"]},
        "incomplete": ["01-02", "01-03"],
        "runnable": ["01-02", "01-03"],
        "has_checkpoints": True,
        "sequential_waves": {"1": ["src/a.py"]},
        "warnings": [
            ".planning/phases/01-setup/01-03-PLAN.md: depends_on '01' is read as plan 01-01; "
            "the reference drops a bare plan number (write '01-01' to agree)",
            "plan 01-03: declared wave 1 but depends_on places it in wave 2",
        ],
    }


def test_plan_index_halted_plan_blocks_its_dependents(project: Path):
    phase = project / ".planning" / "phases" / "01-setup"
    (phase / "01-01-SUMMARY.md").write_text("---\nstatus: Halted # designed stop\n---\n")
    write_plan(phase, "01-04", 'depends_on: ["01-03"]\n')
    index = json.loads(looprail("phase", "plan-index", "1", "--raw", cwd=project).stdout)
    by_id = {p["id"]: p for p in index["plans"]}
    assert by_id["01-01"]["halted"] is True and by_id["01-01"]["has_summary"] is True
    assert by_id["01-03"]["blocked_by"] == ["01-01"]
    assert by_id["01-04"]["blocked_by"] == ["01-01"]  # transitively
    assert index["incomplete"] == ["01-02", "01-03", "01-04"]
    assert index["runnable"] == ["01-02"]


def test_plan_index_from_the_project_folder(project: Path):
    result = looprail("phase", "plan-index", "1", "--raw", cwd=project)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["phase_dir"] == ".planning/phases/01-setup"


def test_plan_index_human_table(project: Path):
    result = looprail("phase", "plan-index", "1", "--project", str(project))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Phase 01 (.planning/phases/01-setup): 3 plans, 1 done"
    assert lines[1].split() == ["wave", "plan", "tasks", "done", "depends", "on", "objective"]
    assert lines[2].split() == ["1", "01-01", "2", "yes", "-", "Do", "01-01."]
    assert lines[4].split() == ["2", "01-03", "1", "no", "01-01", "Do", "01-03."]
    assert "wave 1 runs sequentially: plans share src/a.py" in result.stdout
    assert "looprail: warning: plan 01-03: declared wave 1" in result.stderr


def test_unknown_phase_is_one_line_without_traceback(project: Path):
    result = looprail("phase", "plan-index", "7", "--raw", "--project", str(project))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "looprail: error: .planning/phases: phase 7 not found (phases found: 1, 2)\n"
    )


def test_bad_plan_is_one_line_without_traceback(project: Path):
    phase = project / ".planning" / "phases" / "02-next"
    write_plan(
        phase, "02-01", "wave: 1\n", "<tasks>\n<task type='auto'>\n<name>x</name>\n</tasks>\n"
    )
    result = looprail("phase", "plan-index", "2", "--raw", "--project", str(project))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "looprail: error: .planning/phases/02-next/02-01-PLAN.md:10: <task> has no </task>"
    )
    assert "Traceback" not in result.stderr


def test_cycle_is_an_error(project: Path):
    phase = project / ".planning" / "phases" / "02-next"
    write_plan(phase, "02-01", 'depends_on: ["02"]\n')
    write_plan(phase, "02-02", 'depends_on: ["01"]\n')
    result = looprail("phase", "plan-index", "2", "--raw", "--project", str(project))
    assert result.returncode == 1
    assert "depends_on: plans form a cycle: 02-01 → 02-02 → 02-01" in result.stderr


def test_missing_phase_argument_is_a_usage_error(project: Path):
    result = looprail("phase", "plan-index", "--project", str(project))
    assert result.returncode == 2


def test_phase_list(project: Path):
    result = looprail("phase", "list", "--raw", "--project", str(project))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        {"phase": "1", "slug": "setup", "phase_dir": ".planning/phases/01-setup"},
        {"phase": "2", "slug": "next", "phase_dir": ".planning/phases/02-next"},
    ]
