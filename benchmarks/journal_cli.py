"""`looprail status`, `history` and `report --json` on a journal of 4,000 tasks, each a whole
new process as from a terminal, against `python -c pass` (interpreter start-up, the floor)
measured in the same run. Goals: status and history <= 5x, report --json <= 8x.

CPU time (user+sys of the child) is the steady figure on a shared machine; wall is printed too.
Each figure is the median and the minimum of `--runs` calls; the ratios divide like by like
(median by median, minimum by minimum).

What the commands read: none verifies seals (docs/journal.md, "What the read-only commands
check"); they open the journal read-only and never change it.

With `--phases N` the project also has a ROADMAP of N phases, each a folder of three plans
with their SUMMARYs and a VERIFICATION.md: `status` and `report` then show the project's
phases too (docs/loop.md, "The project loop"), read from the file names and the VERIFICATION
frontmatter (no plan is parsed).

    python benchmarks/journal_cli.py [--tasks 4000] [--runs 7] [--phases 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

GOALS = {"status": 5.0, "history": 5.0, "report --json": 8.0}


def make_journal(project: Path, tasks: int, per_wave: int = 50) -> None:
    """A finished run of `tasks` tasks in waves of `per_wave`, written through the Journal
    (one transaction per wave: the same rows as a real run, without waiting for 8,000 fsyncs)."""
    from looprail.journal import EventRecord, Journal

    (project / ".planning").mkdir(parents=True)
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["idle"])
        for wave in range(1, tasks // per_wave + 1):
            keys = [(f"01-{wave:03d}/T{i}", f"01-{wave:03d}") for i in range(per_wave)]
            with journal.transaction():
                journal.wave_started(run_id, wave, keys)
                for key, plan in keys:
                    journal.task_started(run_id, key, plan_id=plan, wave=wave)
                    journal.task_finished(run_id, key, status="done", duration_ms=3)
                journal.record(run_id, EventRecord(kind="wave_finished", wave=wave))
        journal.finish_run(run_id, "shipped")


def make_phases(project: Path, count: int) -> None:
    """A ROADMAP naming `count` phases and their folders, three plans each, all summarised and
    verified (no journaled run of them: each phase's VERIFICATION.md is read)."""
    headings = []
    for n in range(1, count + 1):
        headings.append(f"## Phase {n}: Part {n}\n")
        folder = project / ".planning" / "phases" / f"{n:02d}-part-{n}"
        folder.mkdir(parents=True)
        for p in range(1, 4):
            (folder / f"{n:02d}-{p:02d}-PLAN.md").write_text("---\nwave: 1\n---\n")
            (folder / f"{n:02d}-{p:02d}-SUMMARY.md").write_text("done\n")
        (folder / f"{n:02d}-VERIFICATION.md").write_text("---\nstatus: passed\n---\n")
    (project / ".planning" / "ROADMAP.md").write_text("# Roadmap\n\n" + "\n".join(headings))


def measure(argv: list[str], runs: int, env: dict[str, str], cwd: Path) -> dict[str, float]:
    """Median and minimum (CPU ms, wall ms) of `runs` calls (as `run_fixed.measure`, plus
    the minimum, the figure least disturbed by other work on a shared machine)."""
    import resource
    import statistics
    import subprocess
    import time

    cpu, wall = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
        wall.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return {
        "cpu": statistics.median(cpu),
        "cpu_min": min(cpu),
        "wall": statistics.median(wall),
        "wall_min": min(wall),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--phases", type=int, default=0, help="a ROADMAP of N phases (default: none)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="looprail-journal-cli-") as tmp:
        project = Path(tmp) / "project"
        make_journal(project, args.tasks)
        if args.phases:
            make_phases(project, args.phases)
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have .pyc files; so should we
        looprail = [sys.executable, "-c", "from looprail.cli import console; console()"]
        commands = (
            ("status", ["status"]),
            ("history", ["history"]),
            ("report --json", ["report", "--json"]),
        )
        for _, argv in commands:
            measure([*looprail, *argv], 2, env, project)  # warm .pyc and the OS file cache
        floor = measure([sys.executable, "-c", "pass"], args.runs, env, project)
        print(
            f"python -c pass   CPU {floor['cpu']:6.1f} ms (min {floor['cpu_min']:5.1f})  "
            f"wall {floor['wall']:6.1f} ms (min {floor['wall_min']:5.1f})"
        )
        for name, argv in commands:
            m = measure([*looprail, *argv], args.runs, env, project)
            print(
                f"{name:14s} CPU {m['cpu']:6.1f} ms = {m['cpu'] / floor['cpu']:4.1f}x "
                f"(min {m['cpu_min'] / floor['cpu_min']:4.1f}x)  "
                f"wall {m['wall']:6.1f} ms = {m['wall'] / floor['wall']:4.1f}x "
                f"(min {m['wall_min'] / floor['wall_min']:4.1f}x)  (goal <= {GOALS[name]}x)"
            )


if __name__ == "__main__":
    main()
