"""Per-task cost against run size: a whole `LoopRunner` run in process with a `ScriptedRuntime`
(agents that do nothing), 5 tasks per plan, 10 plans per wave, at 50 plans and at 800 plans,
with the journal off (in-memory recorder) and on (SQLite, WAL). Prints ms/task for each and the
ratio 800/50 (the goal: at most 1.2x), plus journal on/off at each size.

    python benchmarks/scaling.py [--small 50] [--large 800] [--repeat 1] [--jobs 1]

Every figure is measured in the same run, so the ratios hold on a loaded machine even when the
absolute numbers do not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.loop_overhead import make_phase

TASKS_PER_PLAN = 5
PLANS_PER_WAVE = 10


def run_once(plans: int, jobs: int, journal: bool) -> tuple[float, float]:
    """Seconds per task of one run (set-up excluded): wall time and this process's CPU time
    (the CPU figure is the steadier one on a machine shared with other work)."""
    from looprail.machine.progress import Progress
    from looprail.machine.runner import RunOptions
    from looprail.machine.session.phase import load_project, run_phase
    from looprail.runtime.scripted import ScriptedRuntime

    with tempfile.TemporaryDirectory(prefix="looprail-scaling-") as tmp:
        project = make_phase(Path(tmp), plans, TASKS_PER_PLAN, plans // PLANS_PER_WAVE)
        loaded = load_project(project, [])
        start, cpu = time.perf_counter(), time.process_time()
        out = run_phase(
            loaded,
            "1",
            runtime=ScriptedRuntime(),
            options=RunOptions(jobs=jobs),
            progress=Progress(quiet=True),
            journal=journal,
        )
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
        assert out.result.status == "shipped", out.result.reason
        assert out.result.tasks_run == plans * TASKS_PER_PLAN
        assert out.result.waves_run == plans // PLANS_PER_WAVE
        return took / out.result.tasks_run, cpu / out.result.tasks_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=50)
    ap.add_argument("--large", type=int, default=800)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--journal", choices=["both", "on", "off"], default="both")
    args = ap.parse_args()

    modes = {"both": (False, True), "on": (True,), "off": (False,)}[args.journal]
    run_once(args.small, args.jobs, False)  # warm-up: imports, caches
    cost: dict[tuple[int, bool], tuple[float, float]] = {}
    for journal in modes:
        for plans in (args.small, args.large):
            runs = [run_once(plans, args.jobs, journal) for _ in range(args.repeat)]
            cost[plans, journal] = (
                statistics.median(r[0] for r in runs),
                statistics.median(r[1] for r in runs),
            )
            label = "on " if journal else "off"
            print(
                f"journal {label} {plans:4d} plans ({plans * TASKS_PER_PLAN} tasks): "
                f"{cost[plans, journal][0] * 1000:.3f} ms/task wall, "
                f"{cost[plans, journal][1] * 1000:.3f} ms/task CPU"
            )
    for journal in modes:
        label = "on " if journal else "off"
        wall = cost[args.large, journal][0] / cost[args.small, journal][0]
        cpu = cost[args.large, journal][1] / cost[args.small, journal][1]
        print(
            f"journal {label}: per-task {args.large}/{args.small} plans = {wall:.2f}x wall, "
            f"{cpu:.2f}x CPU (goal <= 1.20)"
        )
    if len(modes) == 2:
        for plans in (args.small, args.large):
            on, off = cost[plans, True], cost[plans, False]
            print(
                f"{plans} plans: journal on/off = {on[0] / off[0]:.2f}x wall, "
                f"{on[1] / off[1]:.2f}x CPU"
            )


if __name__ == "__main__":
    main()
