"""Per-task cost of whole `looprail run`s against run size, through the CLI, journal on: a
phase of N plans (2 tasks a plan, 10 plans a wave) whose executor is `:` (a shell that does
nothing), so each task costs its child process plus looprail's own work. Each run is a new
process, as from a terminal.

The figure is the marginal cost per task: (cost of the 2N-plan run - cost of the N-plan run) /
(the tasks it adds), at a small pair of sizes and a large one, so the fixed cost of a run (start
up, imports, the first and last steps) drops out. Flat per-task cost gives a large/small ratio
of 1.0 (the goal: at most 1.2). Runs are interleaved size by size and round by round (a load
spike on a shared machine hits every size alike); `--baseline COMMIT|PATH` times an older
looprail (first on PYTHONPATH) in the same rounds.

    python benchmarks/run_scaling.py [--sizes 40,80,320,640] [--repeat 3] [--baseline COMMIT]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.loop_overhead import make_phase
from benchmarks.run_fixed import export_commit, once

TASKS_PER_PLAN = 2
PLANS_PER_WAVE = 10


def project_of(root: Path, plans: int) -> Path:
    """A fresh project of `plans` plans whose executor does nothing."""
    project = make_phase(root, plans, TASKS_PER_PLAN, plans // PLANS_PER_WAVE)
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    for name in ("executor", "orchestrator"):
        (agents / name).write_text("#!/bin/sh\n:\n")
        (agents / name).chmod(0o755)
    return project


def run(argv: list[str], env: dict[str, str], template: Path, scratch: Path) -> tuple[float, float]:
    """(CPU ms, wall ms) of one whole run on a fresh copy of `template`."""
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(template, scratch, symlinks=True)
    return once([*argv, str(scratch)], env, scratch)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="40,80,320,640", help="small, 2x small, large, 2x large")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", default=None, metavar="COMMIT|PATH")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    assert len(sizes) == 4, "four sizes: small, 2x small, large, 2x large"
    cmd = [sys.executable, "-c", "from looprail.cli import console; console()"]
    cmd += ["run", "--phase", "1", "-q", "--project"]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory(prefix="looprail-run-scaling-") as tmp:
        root = Path(tmp)
        versions = {"this": env}
        if args.baseline:
            path = Path(args.baseline)
            if not (path / "looprail").is_dir():
                (root / "baseline").mkdir()
                path = export_commit(args.baseline, root / "baseline")
            versions["baseline"] = dict(env, PYTHONPATH=str(path.resolve()))
        templates = {}
        for n in sizes:
            (root / f"t{n}").mkdir()
            templates[n] = project_of(root / f"t{n}", n)
        samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for e in versions.values():  # warm-up: .pyc files, the OS file cache
            run(cmd, e, templates[sizes[0]], root / "scratch")
        for _ in range(args.repeat):
            for n in sizes:
                for name, e in versions.items():
                    samples.setdefault((name, n), []).append(
                        run(cmd, e, templates[n], root / "scratch")
                    )
    for name in versions:
        med = {
            n: (
                statistics.median(c for c, _ in samples[name, n]),
                statistics.median(w for _, w in samples[name, n]),
            )
            for n in sizes
        }
        for n in sizes:
            tasks = n * TASKS_PER_PLAN
            print(
                f"{name:8s} {n:4d} plans: CPU {med[n][0]:8.0f} ms, wall {med[n][1]:8.0f} ms "
                f"({med[n][1] / tasks:.2f} ms/task wall)"
            )
        small = [
            (med[sizes[1]][i] - med[sizes[0]][i]) / ((sizes[1] - sizes[0]) * 2) for i in (0, 1)
        ]
        large = [
            (med[sizes[3]][i] - med[sizes[2]][i]) / ((sizes[3] - sizes[2]) * 2) for i in (0, 1)
        ]
        print(
            f"{name:8s} marginal ms/task: {sizes[0]}->{sizes[1]} CPU {small[0]:.2f} wall "
            f"{small[1]:.2f}; {sizes[2]}->{sizes[3]} CPU {large[0]:.2f} wall {large[1]:.2f}; "
            f"large/small = {large[0] / small[0]:.2f}x CPU, {large[1] / small[1]:.2f}x wall "
            "(goal <= 1.20)"
        )


if __name__ == "__main__":
    main()
