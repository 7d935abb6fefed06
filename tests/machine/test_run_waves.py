"""A wave's plans run at once through `looprail run --jobs N`: real processes under the guard,
each plan's task started while every other plan's task is still running."""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

from tests.support import REPO, run_cli


def sleep_wave(tmp_path: Path, plans: int, seconds: float) -> tuple[Path, Path]:
    """`plans` one-task plans in one wave; the executor notes when its task starts and ends
    (nanoseconds since the epoch, one file per plan), sleeping `seconds` in between."""
    sys.path.insert(0, str(REPO))
    from benchmarks.wave_efficiency import sleep_project

    project = sleep_project(tmp_path, plans, seconds)
    marks = tmp_path / "marks"
    marks.mkdir()
    (project / ".looprail" / "agents" / "executor").write_text(
        "#!/bin/sh\n"
        f'date +%s%N > "{marks}/$LOOPRAIL_PLAN_ID.start"\n'
        f"sleep {seconds}\n"
        f'date +%s%N > "{marks}/$LOOPRAIL_PLAN_ID.end"\n'
    )
    return project, marks


def test_every_plan_of_a_wave_starts_before_any_finishes(tmp_path):
    """8 plans, --jobs 8: all 8 tasks overlap (each starts before the first one ends), so no
    plan waited for another's process to start or end. (An ordering, not a timing: 2 s
    tasks leave any loaded machine room to start eight processes.)"""
    project, marks = sleep_wave(tmp_path, 8, 2)
    out = run_cli("run", str(project), "--phase", "1", "--jobs", "8")
    assert out.returncode == 0, out.stderr
    starts = {p.stem: int(p.read_text()) for p in marks.glob("*.start")}
    ends = {p.stem: int(p.read_text()) for p in marks.glob("*.end")}
    assert len(starts) == len(ends) == 8
    assert max(starts.values()) < min(ends.values()), (starts, ends)
    assert sorted(p.name for p in project.glob(".planning/phases/*/*-SUMMARY.md")) == [
        f"01-{i:03d}-SUMMARY.md" for i in range(1, 9)
    ]


def test_a_wave_run_one_at_a_time_never_overlaps(tmp_path):
    """The same wave with --jobs 1: each task starts after the one before ended (the
    overlap above comes from --jobs, not from the executor)."""
    project, marks = sleep_wave(tmp_path, 3, 0.2)
    out = run_cli("run", str(project), "--phase", "1", "--jobs", "1")
    assert out.returncode == 0, out.stderr
    spans = sorted(
        (int((marks / f"{p.stem}.start").read_text()), int(p.read_text()))
        for p in marks.glob("*.end")
    )
    assert len(spans) == 3
    assert all(a[1] <= b[0] for a, b in pairwise(spans))
