"""The `looprail` console script ends with a fast exit once everything is flushed and closed:
the output is whole, the exit code is main()'s, and the journal is complete."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.run_fixed import idle_project


def looprail_cmd() -> list[str]:
    script = Path(sys.executable).with_name("looprail")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from looprail.cli import console; console()"]


def test_console_script_exits_fast_with_whole_output_and_journal(tmp_path):
    project = idle_project(tmp_path)
    out = subprocess.run(
        [*looprail_cmd(), "run", "--phase", "1"], cwd=project, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.rstrip().endswith("● shipped")  # progress goes to stderr
    assert out.stdout.rstrip().endswith("hooks dispatched)")
    with sqlite3.connect(project / ".looprail" / "journal.sqlite") as conn:
        assert conn.execute("SELECT status FROM runs").fetchall() == [("shipped",)]
    # The lock was released and the journal closed: the next command reads it.
    again = subprocess.run([*looprail_cmd(), "status"], cwd=project, capture_output=True, text=True)
    assert again.returncode == 0 and "shipped" in again.stdout


def test_console_script_keeps_the_exit_code_of_an_error(tmp_path):
    out = subprocess.run(
        [*looprail_cmd(), "run", "--phase", "1"], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 2 or out.returncode == 1
    assert out.stderr.startswith("looprail: error:") and "Traceback" not in out.stderr


@pytest.mark.skipif(shutil.which("head") is None, reason="needs head")
def test_console_script_into_a_closed_pipe(tmp_path):
    project = idle_project(tmp_path)
    subprocess.run([*looprail_cmd(), "run", "--phase", "1", "-q"], cwd=project, check=True)
    proc = subprocess.run(
        f"{' '.join(looprail_cmd())} history | head -c 1",
        shell=True,
        cwd=project,
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert "Traceback" not in proc.stderr


def test_console_run_leaves_a_whole_journal_and_no_child(tmp_path):
    """The fast exit (`os._exit` once flushed and idle) after a run whose agent is a real
    child process: the run is journaled complete and intact, and the agent's process is gone
    (waited for, not left running)."""
    project = idle_project(tmp_path)
    pid_file = tmp_path / "agent.pid"
    agent = project / ".looprail" / "agents" / "orchestrator"
    agent.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexit 0\n")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from looprail.cli import console; console()",
            "run",
            "--phase",
            "1",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with sqlite3.connect(project / ".looprail" / "journal.sqlite") as conn:
        assert conn.execute("SELECT status FROM runs").fetchall() == [("shipped",)]
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
