"""`looprail task resolve-content` end to end: a real project, capability folder, resolver
process and the CLI (in process; the first test runs a real subprocess) for every row of the
exit/result matrix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import run_cli

PLAN = ".planning/phases/01-setup/01-01-PLAN.md"

RESOLVER = """\
import json, sys
ident = sys.argv[1]
if ident == "GSD-1":
    print(json.dumps({
        "description": "Build the login form",
        "verify": "pytest -q",
        "acceptance_criteria": ["renders"],
        "read_first": ["src/app.py"],
        "done": "form works",
    }))
elif ident == "EMPTY":
    print(json.dumps({"description": "   "}))
elif ident == "FAIL":
    print("bd: issue FAIL not found\\nsecond line", file=sys.stderr)
    sys.exit(4)
elif ident == "LIST":
    print("[]")
else:
    print("not json")
"""


def manifest(cap_id: str, prefix: str, script: Path) -> dict:
    return {
        "id": cap_id,
        "role": "feature",
        "version": "1.0.0",
        "title": cap_id,
        "description": "resolves tasks from a tracker",
        "tier": "standard",
        "requires": [],
        "runtimeCompat": {"supported": ["*"], "unsupported": []},
        "taskContentResolver": {
            "trackerPrefix": prefix,
            "invoke": {
                "binary": sys.executable,
                "args": [str(script), "{{id}}"],
                "timeoutMs": 20000,
            },
        },
    }


def add_capability(caps: Path, cap_id: str, prefix: str = "beads") -> None:
    folder = caps / cap_id
    folder.mkdir(parents=True)
    script = folder / "resolve.py"
    script.write_text(RESOLVER)
    (folder / "capability.json").write_text(json.dumps(manifest(cap_id, prefix, script)))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    plan = root / PLAN
    plan.parent.mkdir(parents=True)
    tasks = "\n".join(
        f'<task type="auto" tracker-id="{tid}">\n<name>{tid}</name>\n'
        "<action>inline</action>\n</task>"
        for tid in (
            "beads:GSD-1",
            "beads:EMPTY",
            "beads:FAIL",
            "beads:LIST",
            "beads:BAD",
            "nocolon",
            "jira:ABC-1",
        )
    )
    plan.write_text(
        textwrap.dedent(
            """\
            ---
            phase: 01-setup
            plan: 01
            type: execute
            wave: 1
            depends_on: []
            files_modified: []
            autonomous: true
            requirements: [REQ-1]
            ---
            <objective>Set up</objective>
            <tasks>
            """
        )
        + tasks
        + "\n</tasks>\n"
    )
    add_capability(tmp_path / "caps", "beads")
    return root


def resolve_content(
    project: Path, *args: str, caps: bool = True, process: bool = False
) -> subprocess.CompletedProcess:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("LOOPRAIL_")}
    env["LOOPRAIL_HOME"] = str(project.parent / "home")
    env["LOOPRAIL_CACHE_DIR"] = str(project.parent / "cache")
    extra = ["--capabilities", str(project.parent / "caps")] if caps else []
    return run_cli(
        "task", "resolve-content", *args, "--raw", *extra, cwd=project, env=env, subprocess=process
    )


def ok_json(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1
    return json.loads(result.stdout)


def test_resolved(project):
    result = resolve_content(project, "--plan", PLAN, "--task-id", "beads:GSD-1", process=True)
    assert ok_json(result) == {
        "resolved": True,
        "content": {
            "action": "Build the login form",
            "verify": "pytest -q",
            "acceptanceCriteria": ["renders"],
            "readFirst": ["src/app.py"],
            "done": "form works",
        },
    }


def test_not_applicable(project):
    result = resolve_content(project, "--plan", PLAN, "--task-id", "nocolon")
    assert ok_json(result) == {"resolved": False}


def test_no_resolver(project):
    result = resolve_content(project, "--plan", PLAN, "--task-id", "jira:ABC-1")
    assert ok_json(result) == {"resolved": False, "reason": "no-resolver"}


def test_no_resolver_without_any_capability(project):
    result = resolve_content(project, "--plan", PLAN, "--task-id", "beads:GSD-1", caps=False)
    assert ok_json(result) == {"resolved": False, "reason": "no-resolver"}


def test_empty(project):
    result = resolve_content(project, "--plan", PLAN, "--task-id", "beads:EMPTY")
    assert ok_json(result) == {"resolved": False, "reason": "empty"}


def test_a_project_overlay_capability_resolves_only_with_consent(project):
    from looprail.trust import folder_hash, grant

    caps = project / ".looprail" / "capabilities"
    add_capability(caps, "tracker", prefix="jira")
    # Without consent the project's own capability runs nothing, and the task halts: never a
    # silent fallback to the inline plan.
    result = resolve_content(project, "--plan", PLAN, "--task-id", "jira:ABC-1", caps=False)
    assert result.returncode == 1 and "looprail trust" in result.stderr
    grant(project, {"tracker": folder_hash(caps / "tracker")}, home=project.parent / "home")
    result = resolve_content(project, "--plan", PLAN, "--task-id", "jira:ABC-1", caps=False)
    # The overlay resolver answers "not json" for ABC-1: it ran, and that is a hard error.
    assert result.returncode == 1
    assert "capability tracker" in result.stderr


@pytest.mark.parametrize(
    ("task_id", "needle"),
    [
        ("beads:FAIL", "exited 4; stderr: bd: issue FAIL not found\\nsecond line"),
        ("beads:LIST", "stdout is JSON array, not an object"),
        ("beads:BAD", "stdout is not valid JSON"),
    ],
)
def test_resolver_failures_halt_with_one_line(project, task_id, needle):
    result = resolve_content(project, "--plan", PLAN, "--task-id", task_id)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        f"looprail: error: task content for tracker-id '{task_id}' (prefix 'beads', "
        "capability beads): "
    )
    assert needle in result.stderr


def test_two_capabilities_claiming_one_prefix_halt(project):
    add_capability(project.parent / "caps", "beads-fork", prefix="beads")
    result = resolve_content(project, "--plan", PLAN, "--task-id", "beads:GSD-1")
    assert result.returncode != 0
    assert result.stdout == ""
    assert "beads-fork" in result.stderr


def test_usage_missing_options(project):
    for args in (("--task-id", "beads:GSD-1"), ("--plan", PLAN)):
        result = resolve_content(project, *args)
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1
        assert "is required" in result.stderr


def test_usage_plan_outside_the_project(project, tmp_path):
    outside = tmp_path / "outside-PLAN.md"
    outside.write_text((project / PLAN).read_text())
    (project / "link-PLAN.md").symlink_to(outside)
    for given in ("../outside-PLAN.md", str(outside), "link-PLAN.md", f"{PLAN}/../../../../.."):
        result = resolve_content(project, "--plan", given, "--task-id", "beads:GSD-1")
        assert result.returncode == 2, given
        assert "is outside the project" in result.stderr
        assert result.stderr.count("\n") == 1


def test_usage_plan_not_found(project):
    result = resolve_content(project, "--plan", "missing-PLAN.md", "--task-id", "beads:GSD-1")
    assert result.returncode == 2
    assert "--plan: missing-PLAN.md does not exist" in result.stderr


def test_usage_no_task_with_that_tracker_id(project):
    result = resolve_content(project, "--plan", PLAN, "--task-id", "beads:GSD-404")
    assert result.returncode == 2
    assert result.stderr == (
        f"looprail: error: {PLAN}: no task with tracker-id 'beads:GSD-404' in the plan\n"
    )


def test_absolute_plan_inside_the_project_is_fine(project):
    result = resolve_content(project, "--plan", str(project / PLAN), "--task-id", "nocolon")
    assert ok_json(result) == {"resolved": False}


def test_an_over_long_plan_or_project_path_is_a_usage_error(project):
    for args in (("--plan", "p" * 5000), ("--plan", PLAN, "--project", "d" * 5000)):
        result = resolve_content(project, *args, "--task-id", "beads:GSD-1")
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("looprail: error: --")
        assert result.stderr.count("\n") == 1
