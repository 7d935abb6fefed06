"""A phase step with `ctx.terminal` (what `run --interactive` asks of the discuss) from a process
that has no terminal: the local and agent runtimes fail it at once with one line, and never
start anything that would wait for a user (the pty tests are tests/e2e/test_interactive_discuss.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from looprail.runtime.base import DispatchContext, do_phase_work
from looprail.runtime.interactive import Session
from looprail.runtime.registry import RuntimeSettings, create_runtime

pytestmark = pytest.mark.skipif(
    os.isatty(0) and os.isatty(1), reason="needs a process without a terminal"
)


def project_with(tmp_path: Path) -> tuple[Path, Path]:
    phase = tmp_path / ".planning" / "phases" / "01-first"
    phase.mkdir(parents=True)
    (tmp_path / ".planning" / "ROADMAP.md").write_text("# Roadmap\n\n## Phase 1: First\n")
    agents = tmp_path / ".looprail" / "agents"
    agents.mkdir(parents=True)
    marker = tmp_path / "started"
    orchestrator = agents / "orchestrator"
    orchestrator.write_text(f"#!/bin/sh\ntouch {marker}\n")
    orchestrator.chmod(orchestrator.stat().st_mode | stat.S_IXUSR)
    return tmp_path, phase


@pytest.mark.parametrize("name", ["local", "claude", "gemini"])
def test_without_a_terminal_the_session_is_refused_not_started(tmp_path: Path, name: str) -> None:
    project, phase = project_with(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / name
    fake.write_text(f"#!/bin/sh\ntouch {tmp_path / 'started'}\n")
    fake.chmod(0o755)
    settings = RuntimeSettings(
        project=project, progress=lambda _l: None, env={"PATH": f"{bin_dir}:/usr/bin:/bin"}
    )
    runtime = create_runtime(name, settings)
    ctx = DispatchContext(project=project, phase_number="1", phase_dir=phase, terminal=True)
    outcome = do_phase_work(runtime, "orchestrator", "discuss", ctx)
    assert not outcome.ok
    assert "an interactive session needs a terminal: stdin is not a terminal" in outcome.detail
    assert not (tmp_path / "started").exists()


def test_how_a_session_ended_is_said_in_words() -> None:
    assert Session(0, 1.0).how() == "exited 0"
    assert Session(-2, 1.0).how() == "was killed by SIGINT"
    assert Session(None, 1.0, timed_out=True).how() == "timed out and was stopped"
    assert Session(None, 0.0, spawn_error="No such file").how() == "could not start: No such file"
