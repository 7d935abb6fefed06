"""End to end with the real GSD capability set and the reference as the host tool.

The 44 first-party manifests unmodified, the reference's config template with the workflow
features on, a GSD-format phase with three plans in two waves, role agents and skills from
`tests/support/gsd.py`, and `gsd_run` = the reference. The run ships; every active gate is evaluated
(none refused); a state that makes a first-party gate block halts where the reference's
workflow would, with the host's message and details in the output, the journal and `report`.

Skips without `LOOPRAIL_REFERENCE` (and node, git) or without `../shared`.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import GSD_CAPABILITIES
from tests.support.gsd import (
    config_with_features,
    make_gsd_project,
    write_executables,
    write_ledger,
)

REFERENCE = os.environ.get("LOOPRAIL_REFERENCE")
CLI = [sys.executable, "-c", "from looprail.cli import main; raise SystemExit(main())"]

pytestmark = [
    pytest.mark.skipif(not REFERENCE, reason="LOOPRAIL_REFERENCE is not set"),
    pytest.mark.skipif(not GSD_CAPABILITIES.is_dir(), reason="../shared conformance not here"),
    pytest.mark.skipif(
        not (shutil.which("node") and shutil.which("git")), reason="needs node and git"
    ),
]

# Every first-party gate that is active with the features on, in dispatch order, per point.
ACTIVE_GATES = {
    "plan:pre": ["drift", "ui"],
    "plan:post": ["gap-analysis"],
    "execute:wave:post": ["drift", "drift", "ui"],
    "execute:post": ["tdd"],
    "verify:pre": ["ai-integration"],
    "ship:pre": ["broken-windows", "security"],
}


@pytest.fixture
def host_path(tmp_path: Path) -> str:
    """A `gsd_run` on PATH that is the reference."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "gsd_run"
    tool.write_text(f'#!/bin/sh\nexec node "{REFERENCE}" "$@"\n')
    tool.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def looprail(project: Path, path: str, *args: str, **env: str):
    return subprocess.run(
        [*CLI, *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PATH": path, **env},
    )


def run(project: Path, path: str, *extra: str, **env: str):
    return looprail(
        project,
        path,
        "run",
        "--phase",
        "1",
        "--host-tool",
        "gsd_run",
        "--capabilities",
        str(GSD_CAPABILITIES),
        *extra,
        **env,
    )


def gate_events(project: Path) -> list[tuple[str, str, str, str | None, str]]:
    """(point, capId, outcome, message, data) of every gate event of the latest run."""
    with sqlite3.connect(project / ".looprail" / "journal.sqlite") as con:
        cols = [r[1] for r in con.execute("pragma table_info(events)")]
        rows = con.execute("select * from events order by seq").fetchall()
    events = [dict(zip(cols, r, strict=True)) for r in rows]
    last_run = events[-1]["run_id"]
    out = []
    for e in events:
        if e["run_id"] != last_run or e.get("kind") != "hook":
            continue
        data = json.loads(e.get("data") or "{}")
        if e.get("hook_kind") == "gate":
            out.append((e["point"], e["cap_id"], e["outcome"], e["message"], data))
    return out


def test_the_gsd_set_ships_with_every_active_gate_evaluated(tmp_path, host_path):
    project = make_gsd_project(tmp_path)
    write_executables(project, GSD_CAPABILITIES)
    lint = looprail(
        project,
        host_path,
        "lint",
        "--host-tool",
        "gsd_run",
        "--capabilities",
        str(GSD_CAPABILITIES),
    )
    assert "query-grammar" not in lint.stdout and "check-missing" not in lint.stdout, lint.stdout
    result = run(project, host_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "shipped" in result.stdout
    output = result.stdout + result.stderr
    assert "fails the grammar" not in output and "gate check failed" not in output
    gates = gate_events(project)
    by_point: dict[str, list[str]] = {}
    for point, cap, outcome, _message, _data in gates:
        assert outcome in ("pass", "advisory"), (point, cap, outcome)
        by_point.setdefault(point, []).append(cap)
    # execute:wave:post once per wave
    expected = {**ACTIVE_GATES, "execute:wave:post": ACTIVE_GATES["execute:wave:post"] * 2}
    assert by_point == expected
    for name in ("01-01", "01-02", "01-03"):
        assert (project / ".planning/phases/01-demo" / f"{name}-SUMMARY.md").is_file()


def test_a_frontend_phase_without_ui_spec_halts_at_plan_pre_with_the_hosts_details(
    tmp_path, host_path
):
    project = make_gsd_project(tmp_path)
    roadmap = project / ".planning" / "ROADMAP.md"
    roadmap.write_text(
        roadmap.read_text().replace(
            "Build the demo", "Build the dashboard UI with React components and a settings page"
        )
    )
    write_executables(project, GSD_CAPABILITIES)
    # what the reference's plan-phase.md §5.6 runs, and its verdict
    reference = subprocess.run(
        ["node", REFERENCE, "check", "ui-plan-gate", "1", "--raw"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(reference.stdout)["block"] is True
    result = run(project, host_path)
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "(no message)" not in output
    assert "gate query ui.plan-gate (ui) BLOCKED: details: {" in output
    assert '"frontend": true' in output and '"hasUiSpec": false' in output
    assert "blocked at plan:pre by gate ui" in output
    point, cap, outcome, message, data = gate_events(project)[-1]
    assert (point, cap, outcome) == ("plan:pre", "ui", "blocked")
    assert '"frontend": true' in message and data["details"]["hasUiSpec"] is False
    report = looprail(project, host_path, "report")
    assert '"frontend": true' in report.stdout, report.stdout
    # the planner never ran: the reference's workflow stops before planning
    assert not list((project / ".planning/phases/01-demo").glob("*-SUMMARY.md"))

    # the same project with the UI gate switched off in config: the gate is not active. The
    # halted run is resumed only once each gate it loses is named (issue 40, point 7); then
    # it ships.
    config = config_with_features(ui_safety_gate=False)
    (project / ".planning" / "config.json").write_text(json.dumps(config))
    dropped = ("ui gate at execute:wave:post", "ui gate at plan:pre")
    refused = run(project, host_path, "--accept-changes")
    assert refused.returncode == 1, refused.stdout[-3000:] + refused.stderr[-3000:]
    assert f"resuming would drop 2 hooks active when it started: {'; '.join(dropped)}" in (
        refused.stderr
    )
    named = [arg for hook in dropped for arg in ("--accept-changes", hook)]
    result = run(project, host_path, *named)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "ui.plan-gate" not in result.stderr and "ui.safety-gate" not in result.stderr


def test_an_open_broken_window_halts_at_ship_pre(tmp_path, host_path):
    project = make_gsd_project(tmp_path)
    write_executables(project, GSD_CAPABILITIES)
    write_ledger(project, ["fixed", "open"])
    status = subprocess.run(
        ["node", REFERENCE, "windows", "status", "--raw"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(status.stdout)["ledger"]["open_count"] == 1
    result = run(project, host_path)
    assert result.returncode == 1
    assert "blocked at ship:pre by gate broken-windows" in result.stdout + result.stderr
    assert "WINDOWS.md has 1 open window(s)" in result.stderr
    point, cap, outcome, message, data = gate_events(project)[-1]
    assert (point, cap, outcome) == ("ship:pre", "broken-windows", "blocked")
    assert data["details"]["openCount"] == 1
