"""`looprail check predicate` end to end through the CLI (in process; the first test runs a real
subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from looprail.hooks.gates.checks import CheckError, CheckFailedError
from tests.support import run_cli


def looprail(project: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("LOOPRAIL_")}
    env["LOOPRAIL_HOME"] = str(project / ".home")
    return run_cli("check", "predicate", *args, cwd=project, env=env, subprocess=process)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    phase = tmp_path / ".planning" / "phases" / "01-setup"
    phase.mkdir(parents=True)
    (phase / "01-SECURITY.md").write_text("---\nthreats_open: 0\n---\n# Security\n")
    (tmp_path / ".planning" / "config.json").write_text(
        json.dumps({"workflow": {"security_enforcement": True}})
    )
    return tmp_path


def verdict(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_pass_prints_the_verdict(project):
    result = looprail(
        project, "--predicate", '{"kind":"command-exit-zero","command":"true"}', process=True
    )
    assert verdict(result) == {"block": False, "message": "command exited 0"}
    assert result.stdout.count("\n") == 1


def test_block_is_still_exit_zero(project):
    result = looprail(
        project, "--predicate", '{"kind":"command-exit-zero","command":"exit 2"}', "--raw"
    )
    assert verdict(result) == {"block": True, "message": "command exited 2"}


def test_phase_folder_is_found_from_the_phase_number(project):
    pred = json.dumps(
        {
            "kind": "artifact-frontmatter-equals",
            "artifact": "SECURITY.md",
            "field": "threats_open",
            "equals": 0,
        }
    )
    assert verdict(looprail(project, "--predicate", pred, "--phase", "1"))["block"] is False
    assert verdict(looprail(project, "--predicate", pred, "--phase-number", "01"))["block"] is False
    assert verdict(looprail(project, "--predicate", pred, "--phase", "2"))["block"] is True


def test_phase_dir_option_is_relative_to_the_project(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    pred = '{"kind":"artifact-exists","artifact":"SECURITY.md"}'
    result = run_cli(
        "check",
        "predicate",
        "--predicate",
        pred,
        "--project",
        str(project),
        "--phase-dir",
        ".planning/phases/01-setup",
        cwd=elsewhere,
    )
    assert verdict(result)["block"] is False


def test_phase_values_reach_the_command_as_environment(project):
    hostile = "'; touch SENTINEL; echo '"
    command = 'printf "%s|%s|%s" "$PHASE_NUMBER" "$PHASE_DIR" "$PHASE_REQ_IDS" > env.txt'
    pred = json.dumps({"kind": "command-exit-zero", "command": command})
    result = looprail(project, "--predicate", pred, "--phase", "1", "--phase-req-ids", hostile)
    assert verdict(result)["block"] is False
    number, phase_dir, req_ids = (project / "env.txt").read_text().split("|")
    assert number == "1"
    assert Path(phase_dir) == (project / ".planning/phases/01-setup").resolve()
    assert req_ids == hostile
    assert not (project / "SENTINEL").exists()


def test_config_equals_reads_the_project_config(project):
    pred = '{"kind":"config-equals","key":"workflow.security_enforcement","equals":true}'
    assert verdict(looprail(project, "--predicate", pred))["block"] is False


@pytest.mark.parametrize(
    ("pred", "reason"),
    [
        ("{not json", "check.predicate is not valid JSON"),
        ("[]", "check.predicate must be a JSON object, got array"),
        ('{"kind":"no-such-kind"}', "check.predicate.kind: unknown kind 'no-such-kind'"),
        ('{"kind":"command-exit-zero"}', "check.predicate (command-exit-zero): 'command'"),
        (
            '{"kind":"artifact-exists","artifact":"../x"}',
            "check.predicate (artifact-exists): 'artifact'",
        ),
    ],
)
def test_a_check_that_cannot_look_exits_non_zero_with_one_line(project, pred, reason):
    result = looprail(project, "--predicate", pred)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"looprail: error: {reason}")
    assert result.stderr.count("\n") == 1


def test_usage_errors(project):
    assert looprail(project).returncode == 2
    missing_dir = looprail(project, "--predicate", "{}", "--phase-dir", "nope")
    assert missing_dir.returncode == 2
    assert "--phase-dir" in missing_dir.stderr
    (project / ".planning" / "phases" / "1-dup").mkdir()
    ambiguous = looprail(project, "--predicate", "{}", "--phase", "1")
    assert ambiguous.returncode == 1
    assert "phase 1 has 2 folders: 01-setup, 1-dup; move the files of 1-dup into 01-setup" in (
        ambiguous.stderr
    )
    assert looprail(project, "--predicate", "{}", "--phase", "one").returncode == 2


def test_unavailable_maps_to_exit_69():
    assert CheckFailedError(CheckError("no shell", unavailable=True)).exit_code == 69
    assert CheckFailedError(CheckError("malformed")).exit_code == 1
    assert str(CheckFailedError(CheckError("malformed"))) == "malformed"


def test_an_over_long_phase_dir_is_a_usage_error_not_a_traceback(project):
    pred = json.dumps({"kind": "artifact-exists", "artifact": "x"})
    result = looprail(project, "--predicate", pred, "--phase-dir", "d" * 5000)
    assert result.returncode == 2
    assert result.stderr.startswith("looprail: error: --phase-dir:")
    assert result.stderr.count("\n") == 1
