"""A positional PROJECT on every command that reads a project and has no other positional:
run from another folder, `looprail CMD PROJECT` reads PROJECT exactly as `--project PROJECT`
does. The commands whose positional is something else (a capability folder, an id, a file,
a point) and the GSD contract commands keep `--project`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import REPO, cli_leaf_commands, run_cli

CAPS = REPO / "examples" / "capabilities"

# Commands that read a project but whose positional is something else, or whose argv the GSD
# host contract spells (they take --project DIR).
OTHER_POSITIONAL = {
    "loop render-hooks": "POINT",
    "capability validate": "DIR (a capability folder)",
    "capability remove": "ID",
    "capability audit": "ID",
    "capability install": "DIR (a capability folder)",
    "hooks validate": "FILE",
    "revoke": "ID",
    "phase plan-index": "GSD contract",
    "phase list": "GSD contract",
    "check predicate": "GSD contract",
    "check artifacts": "PLAN (GSD contract)",
    "check key-links": "PLAN (GSD contract)",
    "task resolve-content": "GSD contract",
    "review-lane dispatch-step": "GSD contract",
    "review-lane explicit-from-argv": "GSD contract",
}


def test_every_command_that_reads_a_project_takes_it_as_a_positional():
    for name, parser in cli_leaf_commands():
        if "--project" not in parser._option_string_actions or name in OTHER_POSITIONAL:
            continue
        metavars = [a.metavar for a in parser._actions if not a.option_strings]
        assert "PROJECT" in metavars, name


def _cli(*args: str, cwd: Path, env: dict[str, str | None] | None = None):
    # In process: the positional is argument parsing, the same in a process of its own.
    return run_cli(*args, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A project with a run to show, made once per module (init + run):
    tests get a copy. Built before the per-test home exists, so it gets a home of its own."""
    root = tmp_path_factory.mktemp("template")
    home = tmp_path_factory.mktemp("template-home")
    env: dict[str, str | None] = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    for name in (
        "LOOPRAIL_HOME",
        "LOOPRAIL_CAPABILITIES",
        "LOOPRAIL_CACHE_DIR",
        "LOOPRAIL_NO_CACHE",
    ):
        env[name] = None
    done = _cli("init", "demo", cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    demo = root / "demo"
    hook = {"description": "say hi", "event": "plan:pre", "shell": "true"}
    (demo / ".looprail" / "hooks.json").write_text(json.dumps({"local": {"hi": hook}}))
    shutil.copytree(CAPS / "changelog", demo / ".looprail" / "capabilities" / "changelog")
    done = _cli("run", str(demo), "--phase", "1", cwd=root, env=env)  # status has a run to show
    assert done.returncode == 0, done.stderr
    return demo


@pytest.fixture
def project(template: Path, tmp_path: Path) -> Path:
    demo = tmp_path / "demo"
    shutil.copytree(template, demo, symlinks=True)
    return demo


@pytest.mark.parametrize(
    "argv",
    [
        ["doctor", "--json"],
        ["capability", "list", "--json"],
        ["hooks", "list", "--json"],
        ["lint", "--json"],
        ["status", "--json"],
    ],
    ids=lambda a: a[0] if a[0] != "capability" and a[0] != "hooks" else " ".join(a[:2]),
)
def test_positional_project_is_read_as_project(project: Path, tmp_path: Path, argv: list[str]):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    positional = _cli(*argv[:-1], str(project), argv[-1], cwd=elsewhere)
    option = _cli(*argv, "--project", str(project), cwd=elsewhere)
    assert positional.returncode == option.returncode == 0, positional.stderr + option.stderr
    assert json.loads(positional.stdout) == json.loads(option.stdout)
    here = _cli(*argv, cwd=elsewhere)  # not the project: a different answer (or an error)
    assert here.returncode != 0 or json.loads(here.stdout) != json.loads(option.stdout)


def test_trust_takes_project_positionally(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = _cli("trust", str(project), "--yes", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert "hooks.json" in done.stdout + done.stderr
