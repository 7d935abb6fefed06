"""A GSD project taken as it is (issue 39): the project root found upward from a subfolder, as
git finds it, by every command that reads a project. Where a real project from
`../shared/conformance/real-projects` shows the problem, a copy of it is used (skipped
without `../shared`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import CONFORMANCE, GSD_CAPABILITIES, needs_corpus, run_cli
from tests.support.phases import build

REAL = CONFORMANCE / "real-projects"
ASTORIA = "thomasdwood+astoria-runners-backend"


def real_project(tmp_path: Path, name: str = ASTORIA) -> Path:
    """A copy of a real GSD project's `.planning/` in a fresh git repository (committed)."""
    if not (REAL / name).is_dir():
        pytest.skip("../shared/conformance/real-projects is absent")
    project = tmp_path / "project"
    shutil.copytree(REAL / name / ".planning", project / ".planning")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the project as GSD left it")
    return project


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


# ---------------------------------------------------------------- 3: the root, found upward


def test_status_run_and_report_from_a_subfolder_read_the_project(tmp_path):
    project = build(tmp_path)
    shipped = run_cli("run", str(project), "--phase", "1", "-q")
    assert shipped.returncode == 0, shipped.stderr
    deep = project / "src" / "deep"
    deep.mkdir(parents=True)
    for argv in (["status", "--json"], ["history", "--json"], ["report", "--json"]):
        here, there = run_cli(*argv, cwd=deep), run_cli(*argv, cwd=project)
        assert here.returncode == there.returncode == 0, (argv, here.stderr)
        assert json.loads(here.stdout) == json.loads(there.stdout), argv
    status = json.loads(run_cli("status", "--json", cwd=deep).stdout)
    assert status["run"]["status"] == "shipped"
    dry = run_cli("run", "--dry-run", "--phase", "1", cwd=deep)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("dry run: phase 1 ") and str(project.resolve()) in dry.stdout


def test_lint_and_phase_list_from_a_subfolder_of_a_real_project(tmp_path):
    project = real_project(tmp_path)
    sub = project / "client" / "src"
    sub.mkdir(parents=True)
    for argv in (["lint", "--json"], ["phase", "list", "--raw"]):
        here, there = run_cli(*argv, cwd=sub), run_cli(*argv, cwd=project)
        assert here.returncode == there.returncode, (argv, here.stderr)
        assert here.stdout == there.stdout and here.stdout.strip(), argv
    # a path given on the command line is searched upward too, as `git -C sub` is
    assert run_cli("phase", "list", "--project", str(sub)).stdout == run_cli(
        "phase", "list", "--project", str(project)
    ).stdout


def test_the_search_stops_at_a_nested_repository(tmp_path):
    project = real_project(tmp_path)
    nested = project / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    out = run_cli("run", "--dry-run", cwd=nested)
    assert out.returncode != 0
    assert out.stderr.strip().endswith(": not a project (no .planning/ folder)")


@needs_corpus
def test_render_hooks_from_a_subfolder_reads_the_project_config(tmp_path):
    project = tmp_path / "project"
    (project / ".planning").mkdir(parents=True)
    off = {"workflow": {"ui_phase": False, "ui_review": False, "ui_safety_gate": False}}
    (project / ".planning" / "config.json").write_text(json.dumps(off))
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    argv = ["loop", "render-hooks", "plan:pre", "--active-cap", "ui"]
    argv += ["--capabilities", str(GSD_CAPABILITIES)]
    assert run_cli(*argv, cwd=tmp_path).stdout == "true\n"  # no project: the defaults
    for _ in range(2):  # the second call is not replayed from a memo of another folder
        assert run_cli(*argv, cwd=deep).stdout == "false\n"
