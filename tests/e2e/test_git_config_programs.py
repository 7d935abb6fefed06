"""Programs a copied project's own `.git/config` names never run during `looprail run`
(issue 40, point 1): filter drivers at `reset --hard` and `add -A`, a signing program at each
commit, textconv and merge drivers. Through the CLI, with the fake agent CLIs and the real
git; the user's own (global) configuration still applies."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.agents import agent_env, git, looprail

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is needed for plan worktrees",
)


def trap(path: Path, marker: Path) -> str:
    """An executable that records that it ran, passing its input through (a working filter)."""
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
    path.chmod(0o755)
    return str(path)


def planted(tmp_path: Path, env: dict[str, str], marker: Path) -> Path:
    """The demo project in a repository whose config names a trap for every program key."""
    done = looprail("init", "demo", "--agent", "claude", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "demo"
    git(project, "init", "-q")
    program = trap(tmp_path / "prog", marker)
    (project / ".gitattributes").write_text("* filter=x diff=y merge=m\n")
    settings = {
        "filter.x.clean": program,
        "filter.x.smudge": program,
        "filter.a=b.process": program,  # a subsection `-c` could not override
        "diff.y.textconv": program,
        "diff.external": program,
        "merge.m.driver": program,
        "commit.gpgsign": "true",
        "gpg.program": program,
        "core.editor": program,
        "sequence.editor": program,
    }
    for key, value in settings.items():
        git(project, "config", key, value)
    return project


def test_programs_the_repositorys_config_names_never_run(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    marker = tmp_path / "ran.txt"
    project = planted(tmp_path, env, marker)
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), marker.read_text()
    # The work was done: plans in worktrees, committed and merged back.
    assert "looprail: merge plan 01-02" in git(project, "log", "--format=%s")


def test_the_users_own_filter_still_runs(tmp_path: Path) -> None:
    """A program the user's global configuration names is theirs: it still runs, even where
    the repository names another one for the same key."""
    env = agent_env(tmp_path)
    marker = tmp_path / "ran.txt"
    project = planted(tmp_path, env, marker)
    mine = tmp_path / "mine.txt"
    home_config = tmp_path / "gitconfig"
    home_config.write_text(f'[filter "x"]\n\tclean = {trap(tmp_path / "own", mine)}\n')
    env["GIT_CONFIG_GLOBAL"] = str(home_config)
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), marker.read_text()
    assert mine.exists()
