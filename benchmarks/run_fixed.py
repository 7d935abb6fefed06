"""Fixed cost of `looprail run` with nothing to do: a phase whose CONTEXT, plans, SUMMARYs and
VERIFICATION all exist and whose ship step is a no-op agent, so the run only walks the loop,
journals it and exits. Each call is a whole new process, as from a terminal.

Measured in the same run, interleaved call by call (a load spike on a shared machine hits
every command alike): `python -c pass` (the floor) and the same command on a baseline looprail
first on PYTHONPATH. `--baseline` is a folder holding an older `looprail/` package, or a git
commit of this repository (exported with `git archive` to a temporary folder); the default is
the commit before issue 16 (`PRE_16`), the "today" its goals are measured against. `--baseline
none` skips it. `--also COMMIT|PATH` (repeatable) measures more versions in the same run, each
as a ratio to the baseline (e.g. the commit a change started from: before and after side by
side). Prints CPU time (user+sys of the child, the steadier figure on a shared machine) and
wall time, medians and minimums, the ratios to the floor and to the baseline.

    python benchmarks/run_fixed.py [--runs 15] [--baseline PRE_16|COMMIT|PATH|none] [--also X]
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

REPO = Path(__file__).resolve().parent.parent
# The last commit before issue 16 (scale and fixed costs): "today's" `looprail run`.
PRE_16 = "6f7bc11f6c87c8a332ca5556a8355b98f933c93a"


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


def once(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(CPU ms, wall ms) of one call."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return cpu, wall


def export_commit(commit: str, into: Path) -> Path:
    """`git archive COMMIT looprail` of this repository, unpacked in `into`."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "looprail"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--baseline", default="PRE_16")
    ap.add_argument("--also", action="append", default=[], metavar="COMMIT|PATH")
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
        commands = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            "looprail run (this)": (cmd, env),
        }

        def version(name: str, folder: str) -> tuple[Path, str]:
            path = Path(name)
            if (path / "looprail").is_dir():
                return path, name
            commit = PRE_16 if name == "PRE_16" else name
            (Path(tmp) / folder).mkdir()
            label = name if commit == name else f"{name} ({commit[:10]})"
            return export_commit(commit, Path(tmp) / folder), label

        baseline = None if args.baseline == "none" else args.baseline
        if baseline is not None:
            path, baseline = version(baseline, "baseline")
            base_env = dict(env, PYTHONPATH=str(path.resolve()))
            commands["looprail run (baseline)"] = (base_cmd, base_env)
        also = []
        for n, name in enumerate(args.also):
            path, label = version(name, f"also-{n}")
            also.append(label)
            # Its own console script: `console()` where it has one, else main() as the baseline.
            script = (path / "looprail" / "cli" / "__init__.py").read_text()
            argv = cmd if "def console(" in script else base_cmd
            commands[f"looprail run ({label})"] = (argv, dict(env, PYTHONPATH=str(path.resolve())))
        for argv, e in commands.values():  # warm the OS file cache and write the .pyc files
            once(argv, e, project)
            once(argv, e, project)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (argv, e) in commands.items():
                samples[name].append(once(argv, e, project))
    med = {
        n: (statistics.median(c for c, _ in s), statistics.median(w for _, w in s))
        for n, s in samples.items()
    }
    low = {n: (min(c for c, _ in s), min(w for _, w in s)) for n, s in samples.items()}
    floor = med["python -c pass"]
    if baseline is not None:
        print(f"baseline: {baseline}")
    for name, (cpu, wall) in med.items():
        print(
            f"{name:26s} CPU {cpu:7.1f} ms (min {low[name][0]:6.1f}, {cpu / floor[0]:5.1f}x floor)"
            f"   wall {wall:7.1f} ms (min {low[name][1]:6.1f}, {wall / floor[1]:5.1f}x floor)"
        )
    if baseline is not None:
        this, base = med["looprail run (this)"], med["looprail run (baseline)"]
        lt, lb = low["looprail run (this)"], low["looprail run (baseline)"]
        print(
            f"this / baseline: CPU {this[0] / base[0]:.2f}x (minimums {lt[0] / lb[0]:.2f}x), "
            f"wall {this[1] / base[1]:.2f}x (minimums {lt[1] / lb[1]:.2f}x)   (goal <= 0.50)"
        )
        for label in also:
            other, lo = med[f"looprail run ({label})"], low[f"looprail run ({label})"]
            print(
                f"{label} / baseline: CPU {other[0] / base[0]:.2f}x (minimums "
                f"{lo[0] / lb[0]:.2f}x), wall {other[1] / base[1]:.2f}x (minimums "
                f"{lo[1] / lb[1]:.2f}x)"
            )
    print(f"({args.runs} calls of each, interleaved)")


if __name__ == "__main__":
    main()
