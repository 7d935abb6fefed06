"""Wave efficiency on a Dask LocalCluster: 32 plans of one 1 s task each, one wave, 8 worker
processes (`--executor dask-local:8`), real processes (`sleep 1` under the process guard).
`--tasks N` gives each plan N tasks (each handed to the plan's worker once the orchestrator has
begun it: resolver, read_first, task_call hooks, after the task before was merged).

    efficiency = ideal / execute phase
    ideal         = plans x tasks x task seconds / workers   (here 32 x 1 x 1 s / 8 = 4 s)
    execute phase = the journal's first `wave_started` to its last `wave_finished` (every plan
                    submitted, run on a worker, its change merged and journaled, every SUMMARY
                    written)

Cluster start-up is excluded (once per `looprail run`, not per wave). Also printed, from the
same run: the whole `run_phase` (every transition, journal open and close), and the CPU time
of looprail, the scheduler and the workers (and their children) during it. Goal (issue 16):
>= 0.85.

    python benchmarks/dask_waves.py [--plans 32] [--tasks 1] [--workers 8] [--task-s 1]
                                    [--repeat 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.wave_efficiency import execute_span, sleep_project


def tree_cpu() -> float:
    """CPU seconds of this process and every live descendant (with their reaped children)."""
    import psutil  # a dependency of distributed

    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=int, default=32)
    ap.add_argument("--tasks", type=int, default=1, help="tasks per plan")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--task-s", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    from looprail.machine.dask.executor import DaskExecutor
    from looprail.machine.progress import Progress
    from looprail.machine.runner import RunOptions
    from looprail.machine.session.phase import load_project, run_phase

    ideal = args.plans * args.tasks * args.task_s / args.workers
    runs = []
    with DaskExecutor(f"dask-local:{args.workers}") as executor:
        executor.client.wait_for_workers(args.workers)
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="looprail-dask-waves-") as tmp:
                project = sleep_project(Path(tmp), args.plans, args.task_s, args.tasks)
                loaded = load_project(project, [])
                cpu0 = tree_cpu()
                start = time.perf_counter()
                out = run_phase(
                    loaded,
                    "1",
                    options=RunOptions(executor=executor),
                    progress=Progress(quiet=True),
                )
                took = time.perf_counter() - start
                cpu = tree_cpu() - cpu0
                assert out.result.status == "shipped", out.result.reason
                runs.append((execute_span(project), took, cpu))
    execute = statistics.median(r[0] for r in runs)
    whole = statistics.median(r[1] for r in runs)
    cpu = statistics.median(r[2] for r in runs)
    print(
        f"{args.plans} plans x {args.tasks} tasks x {args.task_s:g} s on {args.workers} Dask "
        f"workers, median of {args.repeat}; ideal {ideal:.2f} s (plans x tasks x task s / workers)"
    )
    print(f"  execute phase (journal: first wave_started → last wave_finished): {execute:.2f} s")
    print(f"  whole run_phase: {whole:.2f} s")
    print(
        f"  CPU of looprail + scheduler + workers and their children during run_phase: "
        f"{cpu:.2f} s ({1000 * cpu / args.plans:.0f} ms per plan)"
    )
    print(f"efficiency {ideal / execute:.2f} (ideal / execute phase; goal >= 0.85)")
    print(f"whole-run efficiency {ideal / whole:.2f} (ideal / whole run_phase)")


if __name__ == "__main__":
    main()
