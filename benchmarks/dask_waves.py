"""Wave efficiency on a Dask LocalCluster: 32 plans of one 1 s task each, one wave, 8 worker
processes (`--executor dask-local:8`). Efficiency = ideal time (plans x task time / workers)
over the measured time of the whole `run_phase` (cluster start-up excluded: it happens once
per `looprail run`, not per wave). Goal: >= 0.85.

    python benchmarks/dask_waves.py [--plans 32] [--workers 8] [--task-s 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.loop_overhead import make_phase


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=int, default=32)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--task-s", type=float, default=1.0)
    args = ap.parse_args()

    from looprail.machine.progress import Progress
    from looprail.machine.run import RunOptions
    from looprail.machine.session import load_project, run_phase
    from looprail.runtime.dask_executor import DaskExecutor

    with tempfile.TemporaryDirectory(prefix="looprail-dask-waves-") as tmp:
        project = make_phase(Path(tmp), args.plans, 1, 1)
        agents = project / ".looprail" / "agents"
        agents.mkdir(parents=True)
        (agents / "executor").write_text(f"#!/bin/sh\nsleep {args.task_s}\n")
        (agents / "orchestrator").write_text("#!/bin/sh\nexit 0\n")
        for agent in agents.iterdir():
            agent.chmod(0o755)
        with DaskExecutor(f"dask-local:{args.workers}") as executor:
            executor.client.wait_for_workers(args.workers)
            loaded = load_project(project, [])
            start = time.perf_counter()
            out = run_phase(
                loaded,
                "1",
                options=RunOptions(executor=executor),
                progress=Progress(quiet=True),
            )
            took = time.perf_counter() - start
    assert out.result.status == "shipped", out.result.reason
    ideal = args.plans * args.task_s / args.workers
    print(
        f"{args.plans} plans x {args.task_s:g} s on {args.workers} Dask workers: "
        f"{took:.2f} s (ideal {ideal:.2f} s)"
    )
    print(f"efficiency {ideal / took:.2f} (goal >= 0.85)")


if __name__ == "__main__":
    main()
