"""A hostile cloned project against looprail's own programs (issue 27): an empty PATH entry never
finds the project's `./claude` or `./git`; the project's git hooks never run when looprail makes
worktrees, commits and merges; the checkpoint before a wave never commits an untracked secret
and says what it committed; `.git/info/exclude` is never written through a symlink. Through
the CLI, with the fake agent CLIs and the real git."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.agents import agent_env, calls, git, looprail

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is needed for plan worktrees",
)

REAL_GIT = subprocess.run(
    ["sh", "-c", "command -v git"], capture_output=True, text=True
).stdout.strip()


def trap(path: Path, marker: Path) -> Path:
    """An executable at `path` that records that it ran (and fails)."""
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\nexit 3\n')
    path.chmod(0o755)
    return path


def demo(tmp_path: Path, env: dict[str, str]) -> Path:
    done = looprail("init", "demo", "--agent", "claude", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    return tmp_path / "demo"


def path_without_claude(tmp_path: Path) -> str:
    """Folders for python and git, but no `claude` anywhere."""
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    for name, target in (("git", REAL_GIT), ("python3", sys.executable)):
        if not (tools / name).exists():
            (tools / name).symlink_to(target)
    return f"{tools}{os.pathsep}/usr/bin{os.pathsep}/bin"


@pytest.mark.parametrize("form", ["{dirs}:", ":{dirs}", "{dirs}::/nonexistent", "{dirs}:."])
def test_an_empty_or_dot_path_entry_never_runs_the_projects_claude(
    tmp_path: Path, form: str
) -> None:
    env = agent_env(tmp_path)
    project = demo(tmp_path, env)
    marker = tmp_path / "ran.txt"
    trap(project / "claude", marker)
    env["PATH"] = form.format(dirs=path_without_claude(tmp_path))
    done = looprail("run", "--phase", "1", cwd=project, env=env)
    assert not marker.exists(), marker.read_text()
    assert done.returncode != 0
    assert "claude: `claude` not found on PATH" in done.stderr, done.stderr
    doctor = looprail("doctor", cwd=project, env=env)
    assert not marker.exists(), marker.read_text()
    assert "✗ a run refuses: claude: `claude` not found on PATH" in doctor.stdout, doctor.stdout


def test_a_leading_empty_path_entry_never_runs_the_projects_git(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    project = demo(tmp_path, env)
    marker = tmp_path / "ran.txt"
    trap(project / "git", marker)
    env["PATH"] = os.pathsep + env["PATH"]
    doctor = looprail("doctor", cwd=project, env=env)
    assert "✓ git: parallel plans each get a worktree" in doctor.stdout, doctor.stdout
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), marker.read_text()
    # The real git did the work: two plans in their worktrees, merged back.
    assert {"01-01", "01-02"} <= {Path(c["cwd"]).name for c in calls(tmp_path)}
    assert "looprail: merge plan 01-02" in git(project, "log", "--format=%s")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entries=st.lists(
        st.sampled_from(["", ".", "./", "bin", "REAL", "/nonexistent"]), min_size=1, max_size=6
    )
)
def test_git_and_program_lookups_never_use_empty_or_relative_path_entries(
    tmp_path: Path, entries: list[str]
) -> None:
    from looprail.runtime.git import git as run_git
    from looprail.runtime.process import find_program

    project = tmp_path / "p"
    (project / "bin").mkdir(parents=True, exist_ok=True)
    marker = tmp_path / "ran.txt"
    for where in (project / "git", project / "bin" / "git"):
        trap(where, marker)
    real = str(Path(REAL_GIT).parent)
    env = {**os.environ, "PATH": os.pathsep.join(real if e == "REAL" else e for e in entries)}
    old = os.getcwd()
    os.chdir(project)  # "." and "" mean this folder to a lookup that honours them
    try:
        found = find_program("git", env)
        done = run_git(["--version"], project, env=env)
    finally:
        os.chdir(old)
    assert not marker.exists()
    assert found is None or not found.startswith(str(project))
    if "REAL" in entries:
        assert found is not None and Path(found).parent == Path(real)
        assert done.exit_code == 0 and done.stdout.startswith("git version")


HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-merge-commit",
    "post-merge",
    "post-checkout",
    "reference-transaction",
    "post-index-change",
)


@pytest.mark.parametrize("where", ["dot-git-hooks", "core-hooks-path"])
def test_the_projects_git_hooks_never_run(tmp_path: Path, where: str) -> None:
    env = agent_env(tmp_path)
    project = demo(tmp_path, env)
    git(project, "init", "-q")
    marker = tmp_path / "hooked.txt"
    if where == "dot-git-hooks":
        hooks = project / ".git" / "hooks"
    else:  # a hooks folder the project ships, named by the repository's config
        hooks = project / "githooks"
        git(project, "config", "core.hooksPath", "githooks")
    hooks.mkdir(exist_ok=True)
    for name in HOOKS:
        trap(hooks / name, marker)
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), marker.read_text()
    assert "looprail: merge plan 01-02" in git(project, "log", "--format=%s")


def test_the_checkpoint_leaves_secrets_and_ignored_files_out_and_says_what_it_committed(
    tmp_path: Path,
) -> None:
    env = agent_env(tmp_path)
    project = demo(tmp_path, env)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "start")
    (project / ".gitignore").write_text((project / ".gitignore").read_text() + "build/\n")
    (project / ".env").write_text("API_KEY=secret\n")
    (project / "config").mkdir()
    (project / "config" / "deploy.pem").write_text("-----BEGIN KEY-----\n")
    (project / ".env.example").write_text("API_KEY=\n")
    (project / "build").mkdir()
    (project / "build" / "out.bin").write_text("x")
    (project / "notes.md").write_text("notes\n")
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    tracked = set(git(project, "ls-files").split())
    assert {"notes.md", ".env.example", ".gitignore"} <= tracked
    assert not {".env", "config/deploy.pem", "build/out.bin"} & tracked
    said = [line for line in done.stderr.splitlines() if "committed the main tree" in line]
    assert len(said) == 1 and "notes.md" in said[0] and ".env," not in said[0], said
    warned = [line for line in done.stderr.splitlines() if "look like secrets" in line]
    assert len(warned) == 1, done.stderr
    assert ".env" in warned[0] and "config/deploy.pem" in warned[0]
    assert (project / ".env").read_text() == "API_KEY=secret\n"  # left alone, uncommitted


@pytest.mark.parametrize("link", ["info", "exclude"])
def test_info_exclude_is_never_written_through_a_symlink(tmp_path: Path, link: str) -> None:
    env = agent_env(tmp_path)
    project = demo(tmp_path, env)
    git(project, "init", "-q")
    outside = tmp_path / "outside"
    outside.mkdir()
    info = project / ".git" / "info"
    if link == "info":
        for child in info.iterdir() if info.is_dir() else ():
            child.unlink()
        info.rmdir() if info.is_dir() else None
        info.symlink_to(outside)
    else:
        info.mkdir(exist_ok=True)
        with_exclude = info / "exclude"
        with_exclude.unlink(missing_ok=True)
        with_exclude.symlink_to(outside / "exclude")  # dangling: it would be created outside
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=project, env=env)
    assert done.returncode == 1
    assert "info/exclude: cannot add looprail's state to it (a symlink" in done.stderr, done.stderr
    assert list(outside.iterdir()) == []


def test_report_json_says_each_finished_wave_is_done(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    project = demo(tmp_path, env)
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(looprail("report", "--json", cwd=project, env=env).stdout)
    assert [w["outcome"] for w in data["waves"]] == ["done", "done"]


def test_secrets_a_plan_writes_in_its_worktree_reach_the_main_tree_uncommitted(
    tmp_path: Path,
) -> None:
    env = agent_env(tmp_path, FAKE_AGENT_ALSO="deploy.pem")
    project = demo(tmp_path, env)
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in project.glob("*-deploy.pem"))
    assert written == ["01-01-T1-deploy.pem", "01-02-T1-deploy.pem", "01-03-T1-deploy.pem"]
    assert not [name for name in git(project, "ls-files").split() if name.endswith(".pem")]
    warned = [line for line in done.stderr.splitlines() if "wrote files that look like" in line]
    assert len(warned) == 2, done.stderr
    assert "plan 01-01 " in warned[0] and "copied into the main tree, untracked" in warned[0]
    assert (project / "01-02-T1-deploy.pem").read_text() == "written by 01-02/T1\n"


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    names=st.sets(
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"),
            min_size=1,
            max_size=12,
        ).filter(lambda n: n not in (".", "..", ".git") and n.strip() == n),
        min_size=1,
        max_size=6,
    ),
    secret=st.sampled_from([".env", "id_rsa", "prod.pem", ".env.local"]),
)
def test_a_commit_takes_every_file_whatever_its_name_but_the_secrets(
    tmp_path_factory: pytest.TempPathFactory, names: set[str], secret: str
) -> None:
    from looprail.machine.commits import Repo, is_secret

    repo = tmp_path_factory.mktemp("repo")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for name in names:
        (repo / name).write_text("x")
    (repo / "sub").mkdir()
    (repo / "sub" / secret).write_text("KEY=1\n")
    committed, secrets, head = Repo(repo).commit_all(repo, "all of it")
    expected = {n for n in names if not is_secret(n)}
    assert head and set(committed) == expected
    assert set(secrets) == {n for n in names if is_secret(n)} | {f"sub/{secret}"}
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True
    ).stdout.decode()
    assert set(filter(None, listed.split("\0"))) == expected
