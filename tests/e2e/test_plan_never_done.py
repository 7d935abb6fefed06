"""A plan is never left "never done" with the run starting its wave again forever (issue 40,
point 4): the marker looprail writes is the file the phase scan reads (a bare `PLAN.md`'s is
`SUMMARY.md`); a marker path that is not a regular file (a folder, a link to `/dev/null`)
halts the plan with one line; a wave whose finished plan is still not seen done is never
started again, whatever removed its SUMMARY (here a user's native hook). Real `looprail run`
processes, each bounded: before the fix they spin until killed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.test_checkpoints import auto, project_with
from tests.support.agents import looprail

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX")


def run(project: Path, home: Path) -> tuple[int, str]:
    env = {"LOOPRAIL_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home)}
    done = looprail(
        "run", str(project), "--phase", "1", cwd=project, env=env, process=True, timeout=60
    )
    return done.returncode, done.stderr


def one_plan(tmp_path: Path) -> tuple[Path, Path]:
    project = project_with(tmp_path, auto("second"), after=0)
    return project, project / ".planning" / "phases" / "01-demo"


def test_a_bare_plan_md_is_marked_done_by_the_file_the_scan_reads(tmp_path: Path) -> None:
    project, phase = one_plan(tmp_path)
    (phase / "01-01-PLAN.md").rename(phase / "PLAN.md")
    code, err = run(project, tmp_path / "home")
    assert code == 0, err
    assert (phase / "SUMMARY.md").is_file()
    assert "status: complete" in (phase / "SUMMARY.md").read_text()
    assert (phase / "PLAN.md").read_text().startswith("---\nphase: 01-demo")  # untouched
    assert (project / "SHIPPED").exists()


@pytest.mark.parametrize("kind", ["folder", "link-to-dev-null"])
def test_a_marker_that_is_not_a_regular_file_halts_the_plan_in_one_line(
    tmp_path: Path, kind: str
) -> None:
    project, phase = one_plan(tmp_path)
    marker = phase / "01-01-SUMMARY.md"
    if kind == "folder":
        marker.mkdir()
    else:
        marker.symlink_to("/dev/null")
    code, err = run(project, tmp_path / "home")
    assert code == 1, err
    said = [line for line in err.splitlines() if "01-01-SUMMARY.md" in line]
    assert len(said) == 1 and "could never be seen done" in said[0], err
    assert "Traceback" not in err
    assert not (project / "SHIPPED").exists()


def test_a_wave_whose_plan_is_still_not_done_is_never_started_again(tmp_path: Path) -> None:
    project, phase = one_plan(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    ran = tmp_path / "ran.txt"
    hook = {
        "description": "removes the SUMMARY (a stand-in for anything that does)",
        "event": "execute:wave:post",
        "shell": f"echo wave >> {ran}; rm -f {phase / '01-01-SUMMARY.md'}",
    }
    (home / "hooks.json").write_text(json.dumps({"local": {"eraser": hook}}))
    code, err = run(project, home)
    assert code == 1, err
    assert "plan 01-01 finished in this run, but the phase scan does not see it done" in err
    assert ran.read_text().count("wave") == 1  # the wave's hooks ran once, not 25 times a second
