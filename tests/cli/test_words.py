"""What the CLI says, in words people expect (issue 15): counts are pluralised right, states are
written `a/b`, and `status --json` calls a Ctrl-C'd run interrupted."""

from __future__ import annotations

import json
import os
import shutil
import signal

from tests.support import REPO, feature, run_cli, write_capability
from tests.support.procs import start_run, wait_for

EXAMPLE = REPO / "examples" / "hello-loop"
CAPS = REPO / "examples" / "capabilities"


def test_capability_validate_says_1_error(tmp_path):
    root = tmp_path / "caps"
    write_capability(root, feature("good"))
    write_capability(root, feature("bad", tier="enormous"))
    p = run_cli("capability", "validate", str(root))
    assert p.returncode == 1
    errors = len([line for line in p.stderr.splitlines() if line.startswith("error:")])
    assert errors == 1, p.stderr
    assert p.stdout.strip() == "1 valid, 1 invalid (1 error)"

    write_capability(root, feature("worse", tier="enormous", version="x"))
    p = run_cli("capability", "validate", str(root))
    errors = len([line for line in p.stderr.splitlines() if line.startswith("error:")])
    assert errors > 1 and p.stdout.strip() == f"1 valid, 2 invalid ({errors} errors)"


def test_run_summary_and_wave_lines_are_pluralised(tmp_path):
    project = tmp_path / "hello"
    shutil.copytree(EXAMPLE, project)
    p = run_cli("run", str(project), "--phase", "1", "--capabilities", str(CAPS))
    assert p.returncode == 0, p.stderr
    assert "(4 tasks run, 2 waves, " in p.stdout and "hooks dispatched)" in p.stdout
    assert "  wave 1: 2 plans, " in p.stderr and "  wave 2: 1 plan, " in p.stderr
    assert "(s)" not in p.stdout + p.stderr

    # The report writes configurations as the run does: `execute/wave_ready`, never a list.
    text = run_cli("report", "--project", str(project)).stdout
    assert "['" not in text
    assert "  idle → discuss  (begin)" in text.splitlines()
    assert "  execute/wave_ready → execute/wave_running  (start_wave)" in text.splitlines()
    assert "  state: shipped" in text.splitlines()
    report = json.loads(run_cli("report", "--project", str(project), "--json").stdout)
    assert (report["transitions"][2]["source"], report["transitions"][2]["target"]) == (
        "plan",
        "execute/wave_ready",
    )
    status = run_cli("status", "--project", str(project)).stdout
    assert "state: shipped" in status.splitlines()


def test_status_json_calls_a_ctrl_c_run_interrupted(tmp_path):
    project = tmp_path / "hello"
    shutil.copytree(EXAMPLE, project)
    marker = project / "executor-started"
    executor = project / ".looprail" / "agents" / "executor"
    executor.write_text(f"#!/bin/sh\ntouch '{marker}'\nsleep 30\n")
    proc = start_run(project, caps=CAPS)
    try:
        wait_for(lambda: marker.exists() or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, "the executor never ran"
        os.kill(proc.pid, signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    status = json.loads(run_cli("status", "--project", str(project), "--json").stdout)
    assert status["run"]["haltReason"] == "interrupted (Ctrl-C)"
    assert status["run"]["status"] == "halted"
    assert (status["interrupted"], status["live"], status["refusedAt"]) == (True, False, None)
