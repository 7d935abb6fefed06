"""The console script pauses the cyclic garbage collector for start-up only (`looprail.gcpause`):
it is collecting again before an ordinary command's handler runs and when a run's loop starts;
`main()` (tests, embedders) never touches it; and the fast exit that follows leaves no journal
half-written and no child process behind."""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import sys

import pytest

from tests.support import REPO

sys.path.insert(0, str(REPO))

from benchmarks.run_fixed import idle_project
from looprail import gcpause
from looprail.cli import main


@pytest.fixture()
def collector():
    """Leave the interpreter's collector as it was found."""
    was = gc.isenabled()
    yield
    gcpause._paused = False
    gc.unfreeze()
    if was:
        gc.enable()


def test_main_never_pauses_the_collector(tmp_path, collector, capsys):
    project = idle_project(tmp_path)
    frozen = gc.get_freeze_count()
    assert main(["run", "--phase", "1", "-q", str(project)]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen and not gcpause.paused()


def test_ordinary_commands_collect_again_before_their_handler(tmp_path, collector, monkeypatch):
    project = idle_project(tmp_path)
    seen = []
    import looprail.cli.journal as journal_cli

    real = journal_cli._status

    def status(args):
        seen.append(gc.isenabled())
        return real(args)

    monkeypatch.setattr(journal_cli, "_status", status)  # the parser is built per call
    gcpause.pause()
    assert not gc.isenabled()
    main(["status", str(project)])
    assert seen == [True] and gc.get_freeze_count() > 0  # start-up's objects were frozen


def test_a_run_collects_again_when_its_loop_starts(tmp_path, collector, monkeypatch):
    project = idle_project(tmp_path)
    from looprail.machine import run as run_mod

    seen = []
    real = run_mod.LoopRunner.run

    def run(self):
        seen.append(gc.isenabled())
        return real(self)

    monkeypatch.setattr(run_mod.LoopRunner, "run", run)
    gcpause.pause()
    assert main(["run", "--phase", "1", "-q", str(project)]) == 0
    assert seen == [True] and gc.isenabled()


def test_pause_never_turns_a_disabled_collector_on(collector):
    gc.disable()
    gcpause.pause()
    gcpause.resume()
    assert not gc.isenabled()


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
