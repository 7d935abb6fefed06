"""Orchestration overhead of a whole `LoopRunner` run, per task, with a runtime whose agents do
nothing: a synthetic phase of 200 plans × 5 tasks in 20 waves (10 plans per wave).

Baselines measured in the same run:
- a bare python-statemachine transition (one `send` on a two-state StateChart), the floor of
  any state-machine step;
- the same loop with the SQLite journal off (in-memory recorder) and on (WAL, synchronous=FULL),
  so the journal's share of the per-task cost is visible.

    python benchmarks/loop_overhead.py [--plans 200] [--tasks 5] [--waves 20] [--jobs 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def bare_transition_cost(n: int = 20000) -> float:
    from statemachine import State, StateChart

    class Flip(StateChart):
        allow_event_without_transition = False
        catch_errors_as_events = False
        a = State(initial=True)
        b = State()
        go = a.to(b) | b.to(a)

    sm = Flip()
    start = time.perf_counter()
    for _ in range(n):
        sm.send("go")
    return (time.perf_counter() - start) / n


def make_phase(root: Path, plans: int, tasks: int, waves: int) -> Path:
    project = root / "project"
    phase = project / ".planning" / "phases" / "01-bench"
    phase.mkdir(parents=True)
    (project / ".planning" / "config.json").write_text("{}")
    (phase / "01-CONTEXT.md").write_text("ctx\n")
    (phase / "01-VERIFICATION.md").write_text("---\nstatus: passed\n---\n")
    per_wave = plans // waves
    for i in range(plans):
        wave = i // per_wave
        pid = f"{i + 1:03d}"
        deps = [f"{(wave - 1) * per_wave + 1:03d}"] if wave else []
        body = "\n".join(
            f'<task type="auto">\n<name>t{t}</name>\n<files>src/{pid}/{t}.py</files>\n'
            f"<action>write it</action>\n<verify>ok</verify>\n<done>done</done>\n</task>"
            for t in range(1, tasks + 1)
        )
        (phase / f"01-{pid}-PLAN.md").write_text(
            f'---\nphase: 01-bench\nplan: "{pid}"\ndepends_on: {json.dumps(deps)}\n'
            f'files_modified: ["src/{pid}"]\n---\n<objective>\nplan {pid}\n</objective>\n'
            f"<tasks>\n{body}\n</tasks>\n"
        )
    return project


def run_once(plans: int, tasks: int, waves: int, jobs: int, journal: bool) -> tuple[float, int]:
    from looprail.machine.progress import Progress
    from looprail.machine.runner import RunOptions
    from looprail.machine.session.phase import load_project, run_phase
    from looprail.runtime.scripted import ScriptedRuntime

    with tempfile.TemporaryDirectory() as tmp:
        project = make_phase(Path(tmp), plans, tasks, waves)
        loaded = load_project(project, [])
        start = time.perf_counter()
        out = run_phase(
            loaded,
            "1",
            runtime=ScriptedRuntime(),
            options=RunOptions(jobs=jobs),
            progress=Progress(quiet=True),
            journal=journal,
        )
        took = time.perf_counter() - start
        assert out.result.status == "shipped", out.result.reason
        return took, out.result.tasks_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=int, default=200)
    ap.add_argument("--tasks", type=int, default=5)
    ap.add_argument("--waves", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    bare = statistics.median(bare_transition_cost() for _ in range(3))
    rows = {}
    for journal in (False, True):
        runs = [
            run_once(args.plans, args.tasks, args.waves, args.jobs, journal)
            for _ in range(args.repeat)
        ]
        took = statistics.median(t for t, _ in runs)
        n = runs[0][1]
        rows[journal] = took / n
        label = "journal on " if journal else "journal off"
        print(f"{label}: {n} tasks in {took:.2f}s  → {took / n * 1000:.3f} ms/task")
    print(f"bare statemachine transition: {bare * 1e6:.1f} µs")
    print(f"per task / bare transition (journal off): {rows[False] / bare:.0f}x")
    print(f"per task / bare transition (journal on):  {rows[True] / bare:.0f}x")
    print(
        f"journal on / off: {rows[True] / rows[False]:.2f}x "
        f"(journal share {100 * (rows[True] - rows[False]) / rows[True]:.0f}% of per-task cost)"
    )


if __name__ == "__main__":
    main()
