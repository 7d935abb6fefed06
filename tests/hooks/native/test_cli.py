"""`looprail hooks validate|list` and `looprail schema hooks` through the CLI (in process; the
first test runs a real subprocess)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import run_cli


def looprail(
    *args: str, home: Path, cwd: Path, process: bool = False
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env={"LOOPRAIL_HOME": str(home)}, subprocess=process)


def write(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
    return path


@pytest.fixture
def dirs(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return home, project


GOOD = {
    "local": {
        "lint": {"description": "lint before planning", "event": "plan:pre", "shell": "true"},
        "extra": {
            "description": "off unless a preset enables it",
            "event": "task_call",
            "shell": "true",
            "default": False,
        },
        "bundle": {"description": "the extras", "preset": ["local/extra"]},
    }
}
BAD = {
    "repos": ["o/r"],
    "local": {
        "a": {"description": "d", "event": "tool_call", "shell": "true"},
        "b": {
            "description": "d",
            "event": "task_call",
            "action": {
                "type": "message",
                "outcome": "pass",
                "code": 1,
                "message": "x",
                "delivery": "nextTurn",
                "sendAs": "user",
            },
        },
    },
    "o/r": {"c": {"description": "d", "event": "plan:pre", "filter": {"x": "["}, "shell": "true"}},
}


def test_validate_reports_every_error_with_file_and_json_path(dirs):
    home, project = dirs
    bad = write(project / "bad.json", BAD)
    good = write(project / "good.json", GOOD)
    result = looprail(
        "hooks", "validate", str(bad), str(good), home=home, cwd=project, process=True
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("looprail: error:")]
    expected_paths = [
        "$.local.a.event",
        "$.local.b.action.code",
        "$.local.b.action.delivery",
        '$["o/r"].c.filter.x',
    ]
    assert len(errors) == len(expected_paths)
    for line, path in zip(errors, expected_paths, strict=True):
        assert line.startswith(f"looprail: error: {bad}: {path}: "), line
    assert f"{good}: ok (2 hooks, 1 preset)" in result.stdout
    assert "Traceback" not in result.stderr


def test_validate_json_output(dirs):
    home, project = dirs
    bad = write(project / "bad.json", BAD)
    result = looprail("hooks", "validate", "--json", str(bad), home=home, cwd=project)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False
    (entry,) = report["files"]
    assert entry["file"] == str(bad)
    assert len(entry["errors"]) == 4
    assert entry["errors"][0]["path"] == "$.local.a.event"


def test_validate_without_files_checks_the_global_and_project_files_that_exist(dirs):
    home, project = dirs
    write(home / "hooks.json", GOOD)
    result = looprail("hooks", "validate", home=home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert f"{home / 'hooks.json'}: ok" in result.stdout

    write(project / ".looprail" / "hooks.json", "{ broken")
    result = looprail("hooks", "validate", home=home, cwd=project)
    assert result.returncode == 1
    (error,) = [line for line in result.stderr.splitlines() if "error:" in line]
    assert ".looprail/hooks.json: $: not valid JSON" in error


def test_validate_with_no_files_at_all_succeeds(dirs):
    home, project = dirs
    result = looprail("hooks", "validate", home=home, cwd=project)
    assert result.returncode == 0
    assert "no native hooks files" in result.stderr


def test_validate_a_missing_file_is_an_error(dirs):
    home, project = dirs
    result = looprail("hooks", "validate", "nope.json", home=home, cwd=project)
    assert result.returncode == 1
    assert "looprail: error: nope.json: $: cannot read" in result.stderr


def test_list_shows_effective_hooks_with_their_source(dirs):
    home, project = dirs
    write(home / "hooks.json", GOOD)
    write(
        project / ".looprail" / "hooks.json",
        {"local": {"lint": {"description": "project lint", "event": "plan:pre", "shell": "true"}}},
    )
    result = looprail("hooks", "list", "--json", "--project", str(project), home=home, cwd=project)
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    active = [(e["ref"], e["source"], e["enabled"]) for e in listing["entries"]]
    # Without a trust store answer the project file is not trusted: its entry shows as inactive.
    assert active == [
        ("local/lint", "global", "yes"),
        ("local/extra", "global", "via local/bundle"),
        ("local/bundle", "global", "yes"),
        ("local/lint", "project", "no (project not trusted)"),
    ]
    assert "not trusted" in result.stderr
    text = looprail("hooks", "list", "--project", str(project), home=home, cwd=project)
    assert text.returncode == 0
    assert "local/extra" in text.stdout and "via local/bundle" in text.stdout


def test_schema_hooks_prints_the_json_schema(dirs):
    home, project = dirs
    result = looprail("schema", "hooks", home=home, cwd=project)
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert schema["$defs"]["HookEntry"]["properties"]["event"]["enum"][-1] == "custom_event"


def test_list_of_a_trusted_project_shows_the_replacing_project_entry(dirs, monkeypatch, capsys):
    import looprail.cli.hooks as hooks_cli
    from looprail.cli import main

    home, project = dirs
    write(home / "hooks.json", GOOD)
    write(
        project / ".looprail" / "hooks.json",
        {
            "local": {
                "lint": {
                    "description": "project lint",
                    "event": "verify:pre",
                    "action": {"type": "interrupt", "outcome": "block"},
                }
            }
        },
    )
    monkeypatch.setenv("LOOPRAIL_HOME", str(home))
    monkeypatch.setattr(hooks_cli, "_project_trusted", lambda path: True)
    assert main(["hooks", "list", "--json", "--project", str(project)]) == 0
    listing = json.loads(capsys.readouterr().out)
    first = listing["entries"][0]
    assert (first["ref"], first["source"], first["event"], first["action"]) == (
        "local/lint",
        "project",
        "verify:pre",
        "interrupt",
    )
    assert len(listing["entries"]) == 3
