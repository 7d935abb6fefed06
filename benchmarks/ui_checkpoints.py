"""What showing checkpoints costs the dashboard: a warm `/api/state` snapshot of a paused run of
4,000 tasks (8,000+ events) that waits on one checkpoint, against the same snapshot without
the checkpoint lookup (`data.checkpoints_view` stubbed out), measured side by side in one
process. The lookup is `machine.answers.pending_checkpoints` (the seam the terminal uses) and
the terminal's rendering of each checkpoint.

Each figure is the median of `--runs` snapshots, alternating the two kinds; the ratio divides
median by median.

    python benchmarks/ui_checkpoints.py [--tasks 4000] [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_project(project: Path, tasks: int, per_wave: int = 50) -> None:
    """A paused run of `tasks` tasks whose last event asks checkpoint 01-001/T1 (a decision),
    written through the Journal as a run would."""
    from looprail.journal import EventRecord, Journal
    from looprail.machine.answers import asked_record
    from looprail.plans.checkpoint import Checkpoint, CheckpointOption

    (project / ".planning" / "phases" / "01-big").mkdir(parents=True)
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["execute", "wave_running"])
        for wave in range(1, tasks // per_wave + 1):
            keys = [(f"01-{wave:03d}/T{i}", f"01-{wave:03d}") for i in range(per_wave)]
            with journal.transaction():
                journal.wave_started(run_id, wave, keys)
                for key, plan in keys:
                    journal.task_started(run_id, key, plan_id=plan, wave=wave)
                    journal.task_finished(run_id, key, status="done", duration_ms=3)
                journal.record(run_id, EventRecord(kind="wave_finished", wave=wave))
        cp = Checkpoint(
            task_id="01-001/T1",
            plan_id="01-001",
            kind="decision",
            name="choose",
            decision="Which one?",
            options=(
                CheckpointOption(id="a", name="A", pros="p", cons="c"),
                CheckpointOption(id="b", name="B", pros="p", cons="c"),
            ),
            resume_signal="Select: a or b",
        )
        journal.record(run_id, asked_record(cp, 1))
        journal.finish_run(run_id, "paused", "task 01-001/T1 needs a human")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    from looprail.ui import data
    from looprail.ui.server import Dashboard

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "p"
        make_project(project, args.tasks)
        dash = Dashboard(project)
        real = data.checkpoints_view
        assert dash.snapshot(None)["checkpoints"]["items"][0]["task_id"] == "01-001/T1"
        timings: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(args.runs):
            for kind in ("without", "with"):
                data.checkpoints_view = real if kind == "with" else (lambda *a, **k: None)  # type: ignore[assignment]
                started = time.perf_counter()
                snap = dash.snapshot(None)
                timings[kind].append(time.perf_counter() - started)
                assert (snap["checkpoints"] is None) == (kind == "without")
        data.checkpoints_view = real
    with_ms = statistics.median(timings["with"]) * 1000
    without_ms = statistics.median(timings["without"]) * 1000
    print(f"tasks {args.tasks}, runs {args.runs} (warm snapshots, medians)")
    print(f"  without the checkpoint lookup  {without_ms:8.1f} ms  (baseline)")
    print(f"  with it                        {with_ms:8.1f} ms  {with_ms / without_ms:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
