"""`--json`, one flag, on every command that prints data: its stdout is exactly one JSON
document (`json.loads` reads all of it), whatever the command says for people goes to stderr.
Commands that print no data (they act, or print a script, a picture or a schema that is
already JSON) are listed with why, so a new data command without `--json` fails here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO, cli_leaf_commands
from tests.support.agents import looprail

CAPS = REPO / "examples" / "capabilities"

# Leaf commands without --json, and why that is right.
NO_JSON = {
    "init": "acts (scaffolds a project); says what it wrote",
    "capability remove": "acts",
    "capability install": "acts",
    "trust": "acts (asks for consent)",
    "revoke": "acts",
    "diagram": "prints a picture (--format svg, png, dot, mermaid)",
    "schema capability": "prints a JSON Schema (always JSON)",
    "schema hooks": "prints a JSON Schema (always JSON)",
    "completion": "prints a shell script",
    "ui": "serves a web page",
    # The GSD host contract names these and their `--raw` (JSON) form; they stay as it says.
    "loop render-hooks": "GSD contract: prints JSON",
    "phase plan-index": "GSD contract: --raw",
    "phase list": "GSD contract: --raw",
    "check predicate": "GSD contract: --raw",
    "check artifacts": "GSD contract: --raw",
    "check key-links": "GSD contract: --raw",
    "task resolve-content": "GSD contract: --raw",
    "review-lane dispatch-step": "GSD contract: --raw",
    "review-lane explicit-from-argv": "GSD contract: prints the lane slugs",
}


def test_every_command_that_prints_data_takes_json():
    leaves = dict(cli_leaf_commands())
    with_json = {name for name, p in leaves.items() if "--json" in p._option_string_actions}
    assert set(leaves) == with_json | set(NO_JSON), set(leaves) ^ (with_json | set(NO_JSON))
    assert not with_json & set(NO_JSON)
    assert with_json == {name for name, _ in COMMANDS}


def _halted_project(root: Path) -> Path:
    """A project whose one run halted on a failing task (so every reader has data)."""
    project = root / "p"
    phase = project / ".planning" / "phases" / "01-tiny"
    phase.mkdir(parents=True)
    (phase / "01-01-PLAN.md").write_text(
        "---\nphase: 01-tiny\nplan: 01\ntype: execute\nwave: 1\ndepends_on: []\n"
        "files_modified: []\nautonomous: true\n---\n<tasks>\n"
        '<task type="auto"><name>work</name><action>work</action></task>\n</tasks>\n'
    )
    (phase / "01-CONTEXT.md").write_text("x")
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    for role in ("orchestrator", "planner", "verifier"):
        (agents / role).write_text("#!/bin/sh\nexit 0\n")
    (agents / "executor").write_text("#!/bin/sh\necho 'it broke' >&2\nexit 1\n")
    for exe in agents.iterdir():
        exe.chmod(0o755)
    (project / ".looprail" / "hooks.json").write_text('{"hooks": []}\n')
    done = _cli("run", str(project), "--phase", "1")
    assert done.returncode == 1, done.stderr
    return project


HOME: dict[str, str] = {}  # one looprail home for the module (the journal's key lives there)


def _cli(*args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """In process, or with `process=True` a real one: for `run` and `resume`, whose agents and
    steps are processes too, stdout must hold the one document whatever they print."""
    env = {**os.environ, **HOME}
    env.pop("LOOPRAIL_HOME", None)
    return looprail(*args, cwd=Path.cwd(), env=env, process=process)


# (command, its arguments after the project's placeholder P and the capabilities' C)
COMMANDS = [
    ("run", ["run", "P", "--phase", "1", "--json"]),
    ("resume", ["resume", "P", "--json"]),
    ("answer", ["answer", "P", "--json"]),
    ("doctor", ["doctor", "P", "--json"]),
    ("status", ["status", "P", "--json"]),
    ("history", ["history", "P", "--json"]),
    ("report", ["report", "P", "--json"]),
    ("capability validate", ["capability", "validate", "C", "--json"]),
    ("capability list", ["capability", "list", "P", "--capabilities", "C", "--json"]),
    (
        "capability audit",
        ["capability", "audit", "--project", "P", "--capabilities", "C", "--json"],
    ),
    ("hooks validate", ["hooks", "validate", "P/.looprail/hooks.json", "--json"]),
    ("hooks list", ["hooks", "list", "P", "--json"]),
    ("lint", ["lint", "P", "--json"]),
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real halted run for the module; tests that need a fresh one copy it."""
    root = tmp_path_factory.mktemp("json")
    HOME["HOME"] = str(root / "home")
    return _halted_project(root)


@pytest.fixture(scope="module")
def halted(pristine: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("halted") / "p"
    shutil.copytree(pristine, project, symlinks=True)
    return project


@pytest.mark.parametrize(("name", "argv"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_json_output_is_one_document(halted: Path, name: str, argv: list[str]) -> None:
    args = [
        a.replace("P", str(halted), 1) if a.startswith("P") else str(CAPS) if a == "C" else a
        for a in argv
    ]
    done = _cli(*args, process=name in ("run", "resume"))
    assert done.returncode in (0, 1), (name, done.returncode, done.stderr)
    assert done.stdout.strip(), (name, done.stderr)
    value = json.loads(done.stdout)  # all of stdout, one document
    assert isinstance(value, dict) and value, (name, done.stdout)
    assert done.stdout.count("\n") == 1, name  # one line


def test_dry_run_json_is_one_document_of_what_would_run(halted: Path) -> None:
    done = _cli("run", str(halted), "--phase", "1", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["dryRun"] is True and plan["ran"] is False and plan["phase"] == "1"
    events = [t["event"] for t in plan["transitions"]]
    assert events[0] == "begin" and "start_wave" in events
    points = [p["point"] for t in plan["transitions"] for p in t["points"]]
    assert len(set(points)) == 12  # every extension point, once
    (wave_step,) = [t for t in plan["transitions"] if t["event"] == "start_wave"]
    (wave,) = wave_step["waves"]
    assert wave["planIds"] == ["01-01"] and wave["tasks"][0]["id"] == "01-01/T1"
    roles = [t["roleWork"]["role"] for t in plan["transitions"] if t["roleWork"]]
    assert roles[:2] == ["orchestrator", "planner"]
    # the text form is drawn from the same plan
    text = _cli("run", str(halted), "--phase", "1", "--dry-run").stdout
    assert "  wave 1: 01-01 [to run, parallel]" in text and text.endswith("nothing was run\n")
    for p in points:
        assert f"  {p}" in text


def test_dry_run_json_lists_each_active_hook(pristine: Path, tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(pristine, project, symlinks=True)
    done = _cli(
        "run", str(project), "--phase", "1", "--dry-run", "--json", "--capabilities", str(CAPS)
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    hooks = [h for t in plan["transitions"] for p in t["points"] for h in p["hooks"]]
    assert hooks, "the example capabilities have active hooks"
    for h in hooks:
        assert h["capId"] and h["kind"] in ("step", "gate", "contribution")
    text = _cli("run", str(project), "--phase", "1", "--dry-run", "--capabilities", str(CAPS))
    for h in hooks:
        assert f"({h['capId']}" in text.stdout
