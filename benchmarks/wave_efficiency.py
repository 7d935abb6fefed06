"""Wave efficiency on the local executor: 8 plans of one 1 s task each, one wave, `--jobs 8`,
real processes (`.looprail/agents/executor` is `sleep 1` under looprail's process guard).

    efficiency = ideal / execute phase
    ideal         = plans x task seconds / min(jobs, plans)   (here 8 x 1 s / 8 = 1 s)
    execute phase = the journal's first `wave_started` to its last `wave_finished` (every task
                    started, run, journaled, and every SUMMARY written; the wave's thread
                    pool is started just before `wave_started` and its idle threads are
                    joined just after `wave_finished`: the whole `run_phase` includes both)

Also printed, from the same run: when the children were reported started and the tail after
the last task's finish (journal timestamps, ms), the whole `run_phase` (every transition,
journal open and close) and two floors: the same 8 `sleep` processes started at once by
`run_bounded` (with the guard, as every task is), and by `subprocess` without it.
Goal (issue 16, goal 6): >= 0.95.

    python benchmarks/wave_efficiency.py [--plans 8] [--jobs 8] [--task-s 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.loop_overhead import make_phase


def sleep_project(root: Path, plans: int, task_s: float, tasks: int = 1) -> Path:
    """`plans` plans of `tasks` tasks each in one wave; the executor agent sleeps `task_s`."""
    project = make_phase(root, plans, tasks, 1)
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    (agents / "executor").write_text(f"#!/bin/sh\nsleep {task_s}\n")
    (agents / "orchestrator").write_text("#!/bin/sh\nexit 0\n")
    for agent in agents.iterdir():
        agent.chmod(0o755)
    return project


def execute_span(project: Path) -> float:
    """Seconds from the journal's first `wave_started` to its last `wave_finished`."""
    return wave_marks(project)[0]


def wave_marks(project: Path) -> tuple[float, float, float, float]:
    """From the journal (ms timestamps, each taken as its row is written): the execute phase
    (s); when the first and the last child was reported started (the `process` events inside
    the wave, s after `wave_started`); and the tail, the last `task_finished` to the last
    `wave_finished` (s: the finish's commit, the SUMMARY, the wave's end)."""

    def ts(text: str) -> float:
        return datetime.fromisoformat(text).timestamp()

    with sqlite3.connect(project / ".looprail" / "journal.sqlite") as conn:
        rows = conn.execute(
            "SELECT kind, ts FROM events WHERE kind IN "
            "('wave_started', 'wave_finished', 'process', 'task_finished')"
        ).fetchall()
    first = min(ts(t) for k, t in rows if k == "wave_started")
    last = max(ts(t) for k, t in rows if k == "wave_finished")
    spawned = [ts(t) - first for k, t in rows if k == "process" and first <= ts(t) <= last]
    finished = max(ts(t) for k, t in rows if k == "task_finished")
    return last - first, min(spawned, default=0.0), max(spawned, default=0.0), last - finished


def run_local(
    plans: int, jobs: int, task_s: float
) -> tuple[float, float, float, tuple[float, float, float, float]]:
    """(execute phase s, whole run_phase s, CPU s of looprail and its children, `wave_marks`)."""
    from looprail.machine.progress import Progress
    from looprail.machine.runner import RunOptions
    from looprail.machine.session.phase import load_project, run_phase

    with tempfile.TemporaryDirectory(prefix="looprail-wave-eff-") as tmp:
        project = sleep_project(Path(tmp), plans, task_s)
        loaded = load_project(project, [])
        cpu0 = _cpu()
        start = time.perf_counter()
        out = run_phase(loaded, "1", options=RunOptions(jobs=jobs), progress=Progress(quiet=True))
        took = time.perf_counter() - start
        cpu = _cpu() - cpu0
        assert out.result.status == "shipped", out.result.reason
        marks = wave_marks(project)
        return marks[0], took, cpu, marks


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def floor(plans: int, jobs: int, task_s: float, guarded: bool) -> float:
    """Wall time of `plans` bare `sleep` processes, `jobs` at a time."""
    from looprail.runtime.process import run_bounded

    def one(_: int) -> None:
        if guarded:
            assert run_bounded(["sleep", str(task_s)], timeout_s=60).ok
        else:
            subprocess.run(["sleep", str(task_s)], check=True)

    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, range(plans)))
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--task-s", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ideal = args.plans * args.task_s / min(args.jobs, args.plans)
    runs = [run_local(args.plans, args.jobs, args.task_s) for _ in range(args.repeat)]
    bare = [floor(args.plans, args.jobs, args.task_s, False) for _ in range(args.repeat)]
    guarded = [floor(args.plans, args.jobs, args.task_s, True) for _ in range(args.repeat)]
    execute = statistics.median(r[0] for r in runs)
    whole = statistics.median(r[1] for r in runs)
    cpu = statistics.median(r[2] for r in runs)
    print(
        f"{args.plans} plans x {args.task_s:g} s, --jobs {args.jobs}, median of {args.repeat}; "
        f"ideal {ideal:.3f} s (plans x task s / min(jobs, plans))"
    )
    print(f"  execute phase (journal: first wave_started → last wave_finished): {execute:.3f} s")
    print(f"  whole run_phase: {whole:.3f} s; CPU of looprail + its children: {cpu:.3f} s")
    first, spread, tail = (statistics.median(r[3][i] * 1000 for r in runs) for i in (1, 2, 3))
    print(
        f"  children reported started (journal `process` rows) {first:.0f}–{spread:.0f} ms "
        f"after wave_started; last task_finished → wave_finished {tail:.0f} ms"
    )
    print(
        f"  floor, {args.plans} sleeps via run_bounded (guarded): "
        f"{statistics.median(guarded):.3f} s"
    )
    print(
        f"  floor, {args.plans} sleeps via subprocess (no guard): {statistics.median(bare):.3f} s"
    )
    print(f"wave efficiency {ideal / execute:.3f} (ideal / execute phase; goal >= 0.95)")
    print(f"whole-run efficiency {ideal / whole:.3f} (ideal / whole run_phase)")
    print(f"guarded floor efficiency {ideal / statistics.median(guarded):.3f}")


if __name__ == "__main__":
    main()
