"""A resume never walks past the gate that halted its run (issue 40, point 7). `run
--capabilities X` halts at a blocking gate; `resume`, or `run` again, without the flag uses the
capability folders, host tool and flavor the run started with (its journal record), so the gate
still blocks; a resume that would lose a hook active at the start is refused (exit 2, one line
naming it) unless `--accept-changes` names it. Through the CLI, in real processes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support import run_cli, write_exe
from tests.support.loop import gated_project

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX")

GATE = "shipgate gate at ship:pre"


def halted(tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    project, caps = gated_project(tmp_path)
    done = run_cli("run", str(project), "--phase", "1", "--capabilities", str(caps), *extra)
    assert done.returncode == 1, done.stderr
    assert "not ready" in done.stderr and not (project / "SHIPPED").exists()
    return project, caps


@pytest.mark.parametrize("again", [["resume"], ["run", "--phase", "1"], ["run"]])
def test_a_resume_without_the_flags_keeps_the_gate_that_halted_it(
    tmp_path: Path, again: list[str]
) -> None:
    project, caps = halted(tmp_path)
    done = run_cli(*again, "--project", str(project), subprocess=True)
    assert done.returncode == 1, done.stderr + done.stdout
    assert f"started with --capabilities {caps.resolve()}: resuming with them" in done.stderr
    assert "not ready" in done.stderr
    assert "ship:pre: no active hooks" not in done.stderr
    assert not (project / "SHIPPED").exists()
    (project / ".ready").write_text("")  # the gate's condition no longer holds: it ships
    done = run_cli(*again, "--project", str(project), subprocess=True)
    assert done.returncode == 0, done.stderr
    assert (project / "SHIPPED").exists()


def test_a_resume_that_would_drop_a_hook_is_refused_unless_named(tmp_path: Path) -> None:
    project, _ = halted(tmp_path)
    other = tmp_path / "other-caps"
    other.mkdir()
    for accept in ([], ["--accept-changes"]):
        done = run_cli("resume", "--project", str(project), "--capabilities", str(other), *accept)
        assert done.returncode == 1, done.stderr
        said = [line for line in done.stderr.splitlines() if "resuming would drop" in line]
        assert len(said) == 1 and GATE in said[0], done.stderr
        assert not (project / "SHIPPED").exists()
    done = run_cli(
        "resume", "--project", str(project), "--capabilities", str(other), "--accept-changes", GATE
    )
    assert done.returncode == 0, done.stderr  # the change was named: the user chose it
    assert (project / "SHIPPED").exists()


def test_the_host_tool_and_flavor_are_remembered(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "mytool"
    # The host tool blocks; the project's own check would pass (`.ready` exists).
    write_exe(tool, 'echo \'{"block": true, "message": "the host tool says no"}\'\n')
    project, caps = gated_project(tmp_path)
    (project / ".ready").write_text("")
    args = ("--phase", "1", "--capabilities", str(caps), "--host-tool", str(tool))
    done = run_cli("run", str(project), *args, "--flavor", "gsd")
    assert done.returncode == 1 and "the host tool says no" in done.stderr, done.stderr
    done = run_cli("resume", "--project", str(project))
    assert done.returncode == 1 and "the host tool says no" in done.stderr, done.stderr
    report = json.loads(run_cli("report", "--json", "--project", str(project)).stdout)
    config = report["run"]["machineConfig"]
    assert config["capabilities"] == [str(caps.resolve())]
    assert (config["hostTool"], config["flavor"]) == (str(tool), "gsd")
    assert config["hooks"] == [GATE]


def test_the_flags_then_the_runs_record_then_the_config(tmp_path: Path) -> None:
    """Where a run's flavor comes from: the config's `looprail.flavor` for a new run without
    the flag; on resume the run's record before the config (changed since); a flag first."""
    project, caps = gated_project(tmp_path)
    write_exe(
        project / ".looprail" / "agents" / "orchestrator",
        'echo "$LOOPRAIL_FLAVOR" > "$LOOPRAIL_PROJECT/SHIPPED"\n',
    )
    config = project / ".planning" / "config.json"
    config.write_text(json.dumps({"looprail": {"flavor": "msd"}}))
    done = run_cli("run", str(project), "--phase", "1", "--capabilities", str(caps))
    assert done.returncode == 1 and "not ready" in done.stderr, done.stderr
    report = json.loads(run_cli("report", "--json", "--project", str(project)).stdout)
    assert report["run"]["machineConfig"]["flavor"] == "msd"  # the config's: no flag, no record
    config.write_text(json.dumps({"looprail": {"flavor": "ferrox"}}))
    (project / ".ready").write_text("")
    done = run_cli("resume", "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert (project / "SHIPPED").read_text().strip() == "msd"  # the record's, not the config's
    (project / "SHIPPED").unlink()
    done = run_cli("run", str(project), "--phase", "1", "--new", "--flavor", "gsd")
    assert done.returncode == 0, done.stderr  # a new run: the config's capabilities are none
    assert (project / "SHIPPED").read_text().strip() == "gsd"  # the flag's


def test_a_planted_record_never_names_the_folders_a_resume_loads(tmp_path: Path) -> None:
    """The record names first-party folders, whose code runs without consent: a record
    changed outside looprail is refused by the journal's seal before it is used."""
    import sqlite3

    project, _ = halted(tmp_path)
    planted = tmp_path / "planted-caps"
    planted.mkdir()
    db = sqlite3.connect(project / ".looprail" / "journal.sqlite")
    db.execute(
        "UPDATE runs SET machine_config = ?", (json.dumps({"capabilities": [str(planted)]}),)
    )
    db.commit()
    db.close()
    done = run_cli("resume", "--project", str(project))
    assert done.returncode != 0
    assert "its seal does not match its rows" in done.stderr, done.stderr
    assert str(planted) not in done.stderr and "Traceback" not in done.stderr
