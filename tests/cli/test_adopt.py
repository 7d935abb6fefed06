"""A GSD project taken as it is (issue 39): `init` adopts it, adding only what is missing, and
`doctor` suggests only commands that then work; the starter role agents run on any machine and
a new repository gets a first commit; the project root found upward from a subfolder, as git
finds it, by every command that reads a project. Where a real project from
`../shared/conformance/real-projects` shows the problem, a copy of it is used (skipped
without `../shared`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import CONFORMANCE, GSD_CAPABILITIES, needs_corpus, run_cli
from tests.support.agents import agent_env, looprail
from tests.support.phases import build, ship_gate

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


def files_of(project: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(project)): p.read_bytes()
        for p in project.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(project).parts
    }


# ---------------------------------------------------------------- 1: init adopts a GSD project


def test_init_adopts_a_real_project_adding_only_what_is_missing(tmp_path):
    project = real_project(tmp_path)
    before = files_of(project)
    env = agent_env(tmp_path)
    done = looprail("init", "--agent", "claude", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    config = ".planning/config.json"
    assert done.stdout.splitlines()[:6] == [
        f"added the looprail section to {config} (agent: claude)",
        *(
            f"added .looprail/roles/{role}.md"
            for role in ("orchestrator", "planner", "executor", "verifier")
        ),
        "added .gitignore",
    ]
    after = files_of(project)
    # every file the project had is as it was, but config.json, which only gained the section
    assert {k: v for k, v in after.items() if k in before and k != config} == {
        k: v for k, v in before.items() if k != config
    }
    old, new = before[config].decode(), after[config].decode()
    assert new.startswith(old.rstrip()[:-1].rstrip())
    assert json.loads(new) == {**json.loads(old), "looprail": {"agent": "claude"}}
    # no phase folder, ROADMAP or role executables of its own: claude does the work
    assert sorted(set(after) - set(before)) == [
        ".gitignore",
        *(
            f".looprail/roles/{role}.md"
            for role in ("executor", "orchestrator", "planner", "verifier")
        ),
    ]
    assert git(project, "log", "--format=%s").splitlines() == ["the project as GSD left it"]
    again = looprail("init", cwd=project, env=env)
    assert (again.returncode, again.stdout.splitlines()[0]) == (
        0,
        "nothing to add: . has what looprail init adds",
    )
    assert files_of(project) == after
    other = looprail("init", "--agent", "codex", cwd=project, env=env)
    assert other.returncode == 1 and "init never changes a setting" in other.stderr
    assert files_of(project) == after


def test_init_help_says_it_adds_only_what_is_missing():
    out = run_cli("init", "--help").stdout
    assert "adding only what is missing" in " ".join(out.split())
    assert "a second init adds nothing" in " ".join(out.split())


@pytest.mark.parametrize("configured", [None, "local"])
def test_every_init_doctor_suggests_then_works(tmp_path, configured):
    """doctor's advice for a GSD project's missing role agents: each command it names runs
    (exit 0) on a copy, and doctor then finds that runtime ready."""
    project = real_project(tmp_path)
    if configured:
        path = project / ".planning" / "config.json"
        path.write_text(
            json.dumps({**json.loads(path.read_text()), "looprail": {"agent": configured}})
        )
    env = agent_env(tmp_path)
    doctor = looprail("doctor", cwd=project, env=env)
    assert doctor.returncode == 1
    suggested = sorted(set(re.findall(r"`(looprail init[^`]*)`", doctor.stdout)))
    assert suggested == (
        ["looprail init"] if configured else ["looprail init", "looprail init --agent claude"]
    )
    for i, command in enumerate(suggested):
        copy = tmp_path / f"copy{i}"
        shutil.copytree(project, copy)
        done = looprail(*command.split()[1:], cwd=copy, env=env)
        assert done.returncode == 0, (command, done.stderr)
        ready = looprail("doctor", cwd=copy, env=env)
        assert ready.returncode == 0, (command, ready.stdout)


# ---------------------------------------------------------------- 12: role agents, first commit


def test_starter_role_agents_run_on_any_python3_and_the_repository_has_a_first_commit(tmp_path):
    env = agent_env(tmp_path)
    done = looprail("init", "new", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "new"
    assert "initialised a git repository in new, with a first commit of the files above" in (
        done.stdout
    )
    # the first commit holds everything init wrote (and the tree is clean after it)
    assert sorted(git(project, "ls-files").split()) == sorted(files_of(project))
    assert git(project, "status", "--porcelain") == ""
    agent = project / ".looprail" / "agents" / "planner"
    assert agent.read_text().splitlines()[0] == "#!/usr/bin/env python3"
    # the standard library alone (-I -S: no site-packages, so no looprail): any python3 runs it
    phase = project / ".planning" / "phases" / "01-first"
    request = {
        "kind": "phase",
        "step": "plan",
        "project": str(project),
        "phase": {"dir": str(phase), "number": "1"},
    }
    ran = subprocess.run(
        [sys.executable, "-I", "-S", str(agent)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr
    assert (phase / "01-01-PLAN.md").is_file()


def test_no_role_executables_for_an_agent_cli(tmp_path):
    env = agent_env(tmp_path)
    assert looprail("init", "new", "--agent", "codex", cwd=tmp_path, env=env).returncode == 0
    assert not (tmp_path / "new" / ".looprail" / "agents").exists()
    assert sorted(p.name for p in (tmp_path / "new" / ".looprail" / "roles").iterdir()) == [
        "executor.md",
        "orchestrator.md",
        "planner.md",
        "verifier.md",
    ]


def test_init_says_why_there_is_no_repository(tmp_path):
    env = {**agent_env(tmp_path), "PATH": str(Path(sys.executable).parent)}
    done = looprail("init", "new", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "no git repository: git is not on PATH" in done.stdout
    assert not (tmp_path / "new" / ".git").exists()


# ---------------------------------------------------------------- 4: the loop, previewed


def test_dry_run_of_a_real_projects_next_phase_with_no_folder(tmp_path):
    """secondbrain's next phase (50) is named by its ROADMAP and has no folder yet: the dry
    run says what discuss and plan would do there, and creates nothing."""
    project = real_project(tmp_path, "demoshane+secondbrain")
    before = files_of(project)
    folders = sorted(p.name for p in (project / ".planning" / "phases").iterdir())
    out = run_cli("run", "--dry-run", cwd=project)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "next unfinished phase: 50 (not started, no folder yet: a run makes it)"
    assert (
        lines[1].startswith("dry run: phase 50 (50-")
        and "no folder yet, a run makes it" in (lines[1])
    )
    assert "  then orchestrator does the discuss work: nothing there yet, it writes CONTEXT.md" in (
        lines
    )
    assert "  then planner does the plan work: nothing there yet, it writes PLAN.md" in lines
    plan = json.loads(run_cli("run", "--dry-run", "--json", cwd=project).stdout)
    assert (plan["phase"], plan["phaseDirExists"]) == ("50", False)
    assert plan["phaseDir"] not in folders
    assert files_of(project) == before
    assert sorted(p.name for p in (project / ".planning" / "phases").iterdir()) == folders


def test_dry_run_all_and_through_say_which_phases_in_order_and_why(tmp_path):
    project = build(tmp_path)
    caps = ship_gate(tmp_path, project)
    (project / ".block-2").write_text("")  # phase 1 ships, phase 2's run halts at ship:pre
    halted = run_cli("run", str(project), "--through", "2", "--capabilities", str(caps), "--json")
    assert halted.returncode == 1
    summary = json.loads(halted.stdout)
    assert summary["shipped"] == ["1"]
    run_id = summary["phases"][1]["runId"]
    everything = run_cli("run", str(project), "--dry-run", "--all", "--json")
    assert everything.returncode == 0, everything.stderr
    doc = json.loads(everything.stdout)
    assert [(p["phase"], p["phaseDirExists"], p["why"]) for p in doc["phases"]] == [
        ("2", True, f"run {run_id} is halted; a run resumes it"),
        ("3", False, "not started, no folder yet: a run makes it"),
    ]
    assert doc["finishedBefore"] == ["1"] and doc["first"]["phase"] == "2"
    text = run_cli("run", str(project), "--dry-run", "--through", "3").stdout.splitlines()
    assert text[1:3] == [
        f"  1. phase 2: Core Work (02-core-work): run {run_id} is halted; a run resumes it",
        "  2. phase 3: Polish & Ship (03-polish-ship): not started, no folder yet: a run makes it",
    ]
    assert text[3] == "finished already, not run: 1"
    through = json.loads(
        run_cli("run", str(project), "--dry-run", "--through", "2", "--json").stdout
    )
    assert [p["phase"] for p in through["phases"]] == ["2"]
    assert not (project / ".planning" / "phases" / "03-polish-ship").exists()


# ---------------------------------------------------------------- 13: one start-refusal rule


def _refusal(stderr: str) -> str:
    """The reason of a run's start refusal (`looprail: error: REASON; the run did not start`)."""
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("looprail: error: ") and line.endswith("; the run did not start"), line
    return line.removeprefix("looprail: error: ").removesuffix("; the run did not start")


@pytest.mark.parametrize("why", ["cli-missing", "settings-not-consented"])
def test_doctor_and_lint_fail_where_run_refuses_to_start(tmp_path, why):
    """The issue's case (interactive discuss with claude not installed) and a project that
    chose claude's binary without the user's consent: `run` refuses; doctor and lint say the
    same reason and fail, and doctor draws no ✓ for the interactive discuss."""
    project = real_project(tmp_path)
    env = agent_env(tmp_path)
    assert looprail("init", "--agent", "claude", cwd=project, env=env).returncode == 0
    path = project / ".planning" / "config.json"
    config = json.loads(path.read_text())
    config["looprail"]["interactive"] = True
    if why == "cli-missing":
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"
    else:
        config["looprail"]["agents"] = {"claude": {"binary": "tools/claude"}}
    path.write_text(json.dumps(config))
    run = looprail("run", "--phase", "1", "--no-interactive", cwd=project, env=env)
    assert run.returncode != 0
    reason = _refusal(run.stderr)
    doctor = looprail("doctor", cwd=project, env=env)
    assert doctor.returncode == 1
    assert f"✗ a run refuses: {reason}" in doctor.stdout.splitlines()
    assert "✓ interactive" not in doctor.stdout and "✓ looprail.interactive" not in doctor.stdout
    lint = looprail("lint", "--json", cwd=project, env=env)
    assert lint.returncode == 1
    refused = [f for f in json.loads(lint.stdout)["findings"] if f["code"] == "run-refused"]
    assert [f["message"] for f in refused] == [f"{reason}; `looprail run` refuses to start"]


def test_doctor_lint_and_run_agree_when_the_cli_is_there(tmp_path):
    project = real_project(tmp_path)
    env = agent_env(tmp_path)  # a claude on PATH
    assert looprail("init", "--agent", "claude", cwd=project, env=env).returncode == 0
    assert looprail("doctor", cwd=project, env=env).returncode == 0
    lint = json.loads(looprail("lint", "--json", cwd=project, env=env).stdout)
    assert [f for f in lint["findings"] if f["code"] == "run-refused"] == []


# ---------------------------------------------------------------- 7: .looprail/ state untracked


@pytest.mark.parametrize("nested", [False, True], ids=["repo-top", "repo-folder"])
def test_a_run_leaves_no_untracked_state(tmp_path, nested):
    """After a run, `git status` shows nothing of looprail's state (journal, logs, lock), with
    no .gitignore of the project's, for a project at the repository's top or in a folder of
    it; the project's own role agents stay the user's to commit."""
    project = build(tmp_path)
    top = tmp_path if nested else project
    git(top, "init", "-q")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "start")
    done = run_cli("run", str(project), "--phase", "1", "--jobs", "1", "-q")
    assert done.returncode == 0, done.stderr
    assert (project / ".looprail" / "journal.sqlite").is_file()
    assert any((project / ".looprail" / "logs").iterdir())
    status = git(top, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert [line for line in status if ".looprail/" in line] == []
    assert not (project / ".gitignore").exists()


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
    assert (
        run_cli("phase", "list", "--project", str(sub)).stdout
        == run_cli("phase", "list", "--project", str(project)).stdout
    )


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
