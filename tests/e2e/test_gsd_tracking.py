"""`looprail status` against the reference's own reading of a project, and GSD's tracking files
after a looprail run (docs/loop.md, "GSD's tracking files").

On every real project of `../shared`, which phases are done, and which comes next, agree with
`gsd-tools roadmap analyze` and STATE.md (`state json`) except where docs/loop.md says why.
After a looprail run of a real project's next phase, with stand-in agents, the reference's
`roadmap analyze`, `state json` and `progress json` agree with `looprail status`; with the
reference as the host tool the files are what the reference itself writes (looprail's own
edits differ only in blank lines). Skips without LOOPRAIL_REFERENCE (and node, git) or
without ../shared.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from looprail.layout import normalize_phase_number
from looprail.machine.project import phase_order, project_phases
from tests.support.gsd import make_gsd_project, write_executables

REFERENCE = os.environ.get("LOOPRAIL_REFERENCE")
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "real-projects"
CLI = [sys.executable, "-c", "from looprail.cli import main; raise SystemExit(main())"]

pytestmark = [
    pytest.mark.skipif(not REFERENCE, reason="LOOPRAIL_REFERENCE is not set"),
    pytest.mark.skipif(
        not (shutil.which("node") and shutil.which("git")), reason="needs node and git"
    ),
]
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared real projects needed")


def gsd(project: Path, *args: str) -> dict:
    assert REFERENCE is not None
    out = subprocess.run(
        ["node", REFERENCE, *args], cwd=project, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, (args, out.stderr)
    return json.loads(out.stdout)


def copy_of(name: str, root: Path) -> Path:
    """A git repository holding a writable copy of a real project's `.planning/`."""
    project = root / name
    shutil.copytree(SHARED / name / ".planning", project / ".planning")
    for folder, _, files in os.walk(project):
        os.chmod(folder, 0o755)
        for f in files:
            os.chmod(os.path.join(folder, f), 0o644)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=project, env=env, check=True, timeout=30)
    return project


def looprail(project: Path, *args: str, path: str | None = None):
    env = {**os.environ} if path is None else {**os.environ, "PATH": path}
    return subprocess.run(
        [*CLI, *args], cwd=project, capture_output=True, text=True, timeout=600, env=env
    )


def explained(ours, theirs: dict) -> bool:
    """A difference docs/loop.md documents: a (REMOVED) phase (never run here, unstarted
    there); a folder the reference does not match (`9.1-…`, `1-…`: it pads the number to
    `09.1`); an executed phase whose VERIFICATION.md did not pass (complete there)."""
    return (
        ours.removed
        or (theirs["disk_status"] == "no_directory" and ours.dir is not None)
        or ours.why.startswith("VERIFICATION.md says")
    )


@needs_shared
def test_status_agrees_with_roadmap_analyze_and_state_md(tmp_path):
    compared = states = 0
    for source in sorted(p.name for p in SHARED.iterdir() if (p / ".planning").is_dir()):
        project = copy_of(source, tmp_path)
        ours = project_phases(project)
        analyzed = gsd(project, "roadmap", "analyze")
        by_number = {normalize_phase_number(p["number"]): p for p in analyzed["phases"]}
        for phase in ours:
            theirs = by_number.get(phase.number)
            if theirs is None or explained(phase, theirs):
                continue  # analyze reads STATE.md's milestone only (docs/loop.md)
            assert phase.finished == (theirs["disk_status"] == "complete"), (source, phase)
            compared += 1
        upcoming = next((p.number for p in ours if not p.finished), None)
        candidate = analyzed["current_phase"] or analyzed["next_phase"]
        if candidate and not explained(
            next(p for p in ours if p.number == normalize_phase_number(candidate)),
            by_number[normalize_phase_number(candidate)],
        ):
            assert upcoming == normalize_phase_number(candidate), source
        states += check_state(source, ours, gsd(project, "state", "json"))
    assert compared >= 35 and states >= 4, (compared, states)  # what the 7 projects give


def check_state(source: str, ours, state: dict) -> int:
    """STATE.md's current phase: done here when it says completed (then the next phase comes
    after it), the next one here when it says otherwise. 0 when looprail lists no such phase
    or has no folder and no checkbox for it (a trimmed copy: docs/loop.md)."""
    number = normalize_phase_number(str(state.get("current_phase") or ""))
    mine = next((p for p in ours if p.number == number), None)
    if mine is None or (mine.dir is None and not mine.checked):
        return 0
    upcoming = next((p.number for p in ours if not p.finished), None)
    if state["status"] == "completed":
        assert mine.finished, (source, number)
        assert upcoming is None or phase_order(upcoming) > phase_order(number), source
    else:
        assert not mine.finished and upcoming == number, (source, number)
    return 1


def status_json(project: Path) -> list[dict]:
    out = looprail(project, "status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["phases"]


def agree_after_run(project: Path, number: str) -> None:
    """The reference's `roadmap analyze`, `state json` and `progress json` agree with
    `looprail status` about the phase the run shipped and what comes next."""
    mine = {p["number"]: p for p in status_json(project)}
    assert mine[number]["status"] == "shipped" and mine[number]["finished"]
    state = gsd(project, "state", "json")
    upcoming = next((n for n, p in mine.items() if not p["finished"]), None)
    assert normalize_phase_number(str(state["current_phase"])) == (upcoming or number)
    assert state["status"] == ("planning" if upcoming else "completed")
    progress = {
        normalize_phase_number(p["number"]): p for p in gsd(project, "progress", "json")["phases"]
    }
    if number in progress:  # the reference lists folders it can match (docs/loop.md)
        assert progress[number]["status"] == "Complete"
        assert progress[number]["summaries"] == progress[number]["plans"] == mine[number]["plans"]


@needs_shared
def test_a_run_of_a_real_projects_next_phase_keeps_gsd_tracking(tmp_path):
    """Skyism+personalhub: STATE.md says 9.2 is complete, 9.3 (planned) is next; looprail runs
    9.3 and STATE.md then says so, for the reference too."""
    project = copy_of("Skyism+personalhub", tmp_path)
    write_executables(project)
    out = looprail(project, "run", "--autonomous")
    assert out.returncode == 0, out.stdout + out.stderr
    agree_after_run(project, "9.3")
    roadmap = (project / ".planning" / "ROADMAP.md").read_text()
    assert "- [x] 9.3-01: TBD" in roadmap  # its plan's checkbox, as the reference ticks it


ROADMAP = """# Roadmap: Demo

## Phases

- [ ] **Phase 1: Demo** - Build the demo
- [ ] **Phase 2: More** - Then more

## Phase Details

### Phase 1: Demo
**Goal**: Build the demo
**Requirements**: REQ-01, REQ-02
**Plans**: 3 plans

Plans:
- [ ] 01-01-PLAN.md — first
- [ ] 01-02-PLAN.md — second
- [ ] 01-03-PLAN.md — third

### Phase 2: More
**Goal**: More
**Requirements**: REQ-03
**Plans**: TBD

## Progress

| Phase | Plans Complete | Status | Completed |
|-------|----------------|--------|-----------|
| 1. Demo | 0/3 | Not started | - |
| 2. More | 0/1 | Not started | - |
"""

REQUIREMENTS = """# Requirements

## v1 Requirements

- [ ] **REQ-01**: first
- [ ] **REQ-02**: second
- [ ] **REQ-03**: third

## Traceability

| Requirement | Phase | Status |
|-------------|-------|--------|
| REQ-01 | Phase 1 | Pending |
| REQ-02 | Phase 1 | Pending |
| REQ-03 | Phase 2 | Pending |
"""


def generated(tmp_path: Path, name: str) -> Path:
    """The GSD-format project of tests/support/gsd.py, with the reference's ROADMAP template
    shape (checkboxes, plan list, progress table), a Traceability table and a STATE.md."""
    project = make_gsd_project(tmp_path / name, git=False)
    write_executables(project)
    (project / ".planning" / "ROADMAP.md").write_text(ROADMAP)
    (project / ".planning" / "REQUIREMENTS.md").write_text(REQUIREMENTS)
    (project / ".planning" / "STATE.md").write_text(
        "---\nmilestone: v1.0\nstatus: executing\n---\n\n# Project State\n\n"
        "## Current Position\n\nPhase: 1 of 2 (Core)\nPlan: 1 of 3 in current phase\n"
        "Status: Executing\nLast activity: 2026-01-01 — started\n"
    )
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=project, env=env, check=True, timeout=30)
    return project


def test_the_files_are_what_the_reference_writes_as_the_host_tool(tmp_path):
    """The same run twice: with the reference as the host tool (it writes the files), and
    without (looprail writes them): the same files but for blank lines, and both agree."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "gsd_run"
    tool.write_text(f'#!/bin/sh\nexec node "{REFERENCE}" "$@"\n')
    tool.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    hosted, own = generated(tmp_path, "hosted"), generated(tmp_path, "own")
    out = looprail(hosted, "run", "--phase", "1", "--host-tool", "gsd_run", path=path)
    assert out.returncode == 0 and "GSD tracking" not in out.stdout, out.stdout + out.stderr
    out = looprail(own, "run", "--phase", "1")
    assert out.returncode == 0 and "GSD tracking" not in out.stdout, out.stdout + out.stderr
    for name in ("ROADMAP.md", "REQUIREMENTS.md"):
        theirs = (hosted / ".planning" / name).read_text()
        mine = (own / ".planning" / name).read_text()
        before = subprocess.run(
            ["git", "show", f"HEAD:.planning/{name}"], cwd=own, capture_output=True, text=True
        ).stdout
        assert mine != before, name  # the run wrote it
        assert _lines(mine) == _lines(theirs), name
    for project in (hosted, own):
        agree_after_run(project, "1")
    assert gsd(hosted, "roadmap", "analyze") == gsd(own, "roadmap", "analyze")


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]
