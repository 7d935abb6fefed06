"""Fixed cost of `looprail run` with nothing to do: a phase whose CONTEXT, plans, SUMMARYs and
VERIFICATION all exist and whose ship step is a no-op agent, so the run only walks the loop,
journals it and exits. Each call is a whole new process, as from a terminal.

Measured in the same run: `python -c pass` (the floor) and, with `--baseline PATH` (a checkout
of an older looprail, e.g. `git archive main looprail | tar -x -C PATH`), the same command with
that code first on PYTHONPATH. Prints CPU time (user+sys of the child, steady on a shared
machine) and wall time, medians, and the ratios.

    python benchmarks/run_fixed.py [--runs 10] [--baseline PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.loop_overhead import make_phase


def idle_project(root: Path) -> Path:
    project = make_phase(root, 4, 2, 2)
    phase = project / ".planning" / "phases" / "01-bench"
    for plan in phase.glob("*-PLAN.md"):
        summary = plan.with_name(plan.name.replace("-PLAN.md", "-SUMMARY.md"))
        summary.write_text("---\nstatus: complete\n---\n")
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    (agents / "orchestrator").write_text("#!/bin/sh\nexit 0\n")
    (agents / "orchestrator").chmod(0o755)
    return project


def measure(argv: list[str], runs: int, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Median (CPU ms, wall ms) of `runs` calls."""
    cpu, wall = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
        wall.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--baseline", type=Path, default=None)
    args = ap.parse_args()
    run = ["run", "--phase", "1", "-q"]
    # What each version's `looprail` console script runs (the baseline had no `console`).
    cmd = [sys.executable, "-c", "from looprail.cli import console; console()", *run]
    base_cmd = [sys.executable, "-c", "import sys; from looprail.cli import main; sys.exit(main())"]
    base_cmd += run
    with tempfile.TemporaryDirectory(prefix="looprail-fixed-") as tmp:
        project = idle_project(Path(tmp))
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have .pyc files; so should we
        measure(cmd, 2, env, project)  # warm the OS file cache and .pyc files
        rows = {"python -c pass": measure([sys.executable, "-c", "pass"], args.runs, env, project)}
        rows["looprail run (this)"] = measure(cmd, args.runs, env, project)
        if args.baseline is not None:
            base_env = dict(env, PYTHONPATH=str(args.baseline.resolve()))
            measure(base_cmd, 2, base_env, project)
            rows["looprail run (baseline)"] = measure(base_cmd, args.runs, base_env, project)
    floor = rows["python -c pass"]
    for name, (cpu, wall) in rows.items():
        print(
            f"{name:26s} CPU {cpu:7.1f} ms ({cpu / floor[0]:5.1f}x floor)   "
            f"wall {wall:7.1f} ms ({wall / floor[1]:5.1f}x floor)"
        )
    if args.baseline is not None:
        this, base = rows["looprail run (this)"], rows["looprail run (baseline)"]
        print(
            f"this / baseline: CPU {this[0] / base[0]:.2f}x, wall {this[1] / base[1]:.2f}x "
            "(goal <= 0.50)"
        )


if __name__ == "__main__":
    main()
