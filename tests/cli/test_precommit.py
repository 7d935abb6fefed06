"""The pre-commit hooks (`.pre-commit-hooks.yaml`): `looprail-validate`'s entry routes each file
to its check (in process), and `pre-commit try-repo` installs this repository as pre-commit does
for a user and runs both hooks on a project with one error, then on the project fixed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from looprail.cli.precommit import main as validate
from tests.support import EXAMPLE, EXAMPLE_CAPS, REPO

HOOKS_JSON = {
    "local": {"lint-first": {"description": "lint first", "event": "plan:pre", "shell": "true"}}
}


def test_validate_checks_each_capability_folder_and_hooks_file(tmp_path, capsys):
    good_cap = EXAMPLE_CAPS / "style-guide" / "capability.json"
    good_hooks = tmp_path / "ok" / "hooks.json"
    good_hooks.parent.mkdir()
    good_hooks.write_text(json.dumps(HOOKS_JSON))
    assert validate([str(good_cap), str(good_hooks), str(REPO / "README.md")]) == 0
    out = capsys.readouterr()
    assert "1 valid, 0 invalid" in out.out and out.err == ""

    bad_hooks = tmp_path / "bad" / "hooks.json"
    bad_hooks.parent.mkdir()
    bad_hooks.write_text(json.dumps({"local": {"x": {"event": "plan:pre"}}}))
    assert validate([str(good_cap), str(bad_hooks)]) == 1
    err = capsys.readouterr().err
    assert f"{bad_hooks}: $.local.x" in err and "Traceback" not in err

    bad_cap = tmp_path / "caps" / "style-guide"
    shutil.copytree(EXAMPLE_CAPS / "style-guide", bad_cap)
    manifest = json.loads((bad_cap / "capability.json").read_text())
    manifest["steps"][0]["onError"] = "explode"
    (bad_cap / "capability.json").write_text(json.dumps(manifest))
    assert validate([str(bad_cap / "capability.json"), str(good_hooks)]) == 1
    err = capsys.readouterr().err
    assert f"{bad_cap / 'capability.json'}: $.steps[0].onError" in err

    assert validate([str(REPO / "README.md")]) == 0  # nothing of ours staged: nothing to check


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
        },
    )


def _this_repo_as_committed(dest: Path) -> Path:
    """What pre-commit installs from: the package's files as they are in the work tree (tracked
    or not yet), committed in a repository of their own."""
    listed = (
        subprocess.run(
            [
                "git",
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
                "looprail",
                "pyproject.toml",
                "README.md",
                ".pre-commit-hooks.yaml",
            ],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "snapshot")
    return dest


def _try_repo(repo: Path, project: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pre_commit",
            "try-repo",
            str(repo),
            "--all-files",
            "--color",
            "never",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PRE_COMMIT_HOME": str(home)},
    )


# pip could not reach the package index while pre-commit installed the hook's environment.
OFFLINE = ("No matching distribution found", "Could not find a version", "Failed to establish")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_try_repo_on_a_project_with_one_error(tmp_path):
    pytest.importorskip("pre_commit")
    repo = _this_repo_as_committed(tmp_path / "looprail")
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    cap = project / ".looprail" / "capabilities" / "style-guide"
    shutil.copytree(EXAMPLE_CAPS / "style-guide", cap)
    manifest = json.loads((cap / "capability.json").read_text())
    manifest["steps"][0]["onError"] = "explode"
    (cap / "capability.json").write_text(json.dumps(manifest, indent=2))
    _git(project, "init", "-q")
    _git(project, "add", "-A")

    p = _try_repo(repo, project, tmp_path / "home")
    log = tmp_path / "home" / "pre-commit.log"
    if p.returncode != 0 and any(
        s in p.stdout + (log.read_text() if log.exists() else "") for s in OFFLINE
    ):
        pytest.skip("pre-commit could not install looprail (no package index reachable)")
    where = ".looprail/capabilities/style-guide/capability.json: $.steps[0].onError"
    assert p.returncode == 1, p.stdout + p.stderr
    lint, validate_out = p.stdout.split("looprail validate", 1)
    assert "looprail lint" in lint and "Failed" in lint and where in lint
    assert "1 error, 0 warnings" in lint
    assert "Failed" in validate_out and f"error: {where}" in validate_out
    assert "Traceback" not in p.stdout

    manifest["steps"][0]["onError"] = "halt"  # fixed: both pass (the environment is reused)
    (cap / "capability.json").write_text(json.dumps(manifest, indent=2))
    _git(project, "add", "-A")
    p = _try_repo(repo, project, tmp_path / "home")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("Passed") == 2
