"""`looprail status`, `history` and `report --json` on a journal of 4,000 tasks, each a whole
new process as from a terminal, against `python -c pass` (interpreter start-up, the floor)
measured in the same run. Goals: status and history <= 5x, report --json <= 8x.

CPU time (user+sys of the child) is the steady figure on a shared machine; wall is printed too.

    python benchmarks/journal_cli.py [--tasks 4000] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.run_fixed import measure

GOALS = {"status": 5.0, "history": 5.0, "report --json": 8.0}


def make_journal(project: Path, tasks: int, per_wave: int = 50) -> None:
    """A finished run of `tasks` tasks in waves of `per_wave`, written through the Journal."""
    from looprail.store import EventRecord, Journal

    (project / ".planning").mkdir(parents=True)
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["idle"])
        for wave in range(1, tasks // per_wave + 1):
            keys = [(f"01-{wave:03d}/T{i}", f"01-{wave:03d}") for i in range(per_wave)]
            journal.wave_started(run_id, wave, keys)
            for key, plan in keys:
                journal.task_started(run_id, key, plan_id=plan, wave=wave)
                journal.task_finished(run_id, key, status="done", duration_ms=3)
            journal.record(run_id, EventRecord(kind="wave_finished", wave=wave))
        journal.finish_run(run_id, "shipped")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="looprail-journal-cli-") as tmp:
        project = Path(tmp) / "project"
        make_journal(project, args.tasks)
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have .pyc files; so should we
        looprail = [sys.executable, "-c", "from looprail.cli import console; console()"]
        for argv in (["status"], ["history"], ["report", "--json"]):
            measure([*looprail, *argv], 2, env, project)  # warm .pyc and the OS file cache
        floor = measure([sys.executable, "-c", "pass"], args.runs, env, project)
        print(f"python -c pass   CPU {floor[0]:6.1f} ms  wall {floor[1]:6.1f} ms")
        for name, argv in (
            ("status", ["status"]),
            ("history", ["history"]),
            ("report --json", ["report", "--json"]),
        ):
            cpu, wall = measure([*looprail, *argv], args.runs, env, project)
            print(
                f"{name:15s}  CPU {cpu:6.1f} ms = {cpu / floor[0]:5.1f}x floor   "
                f"wall {wall:6.1f} ms = {wall / floor[1]:5.1f}x floor   (goal <= {GOALS[name]}x)"
            )


if __name__ == "__main__":
    main()
