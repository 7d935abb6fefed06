"""What the journal costs per task, against its budget, measured in the same run.

A task is journaled by `JournalRecorder.task_started` (committed with `synchronous=NORMAL`: no
fsync) and `task_finished` (FULL: one fsync), each sealed (store/seal.py). The budget (issue
#16) is one FULL commit plus two bare transitions:

- one FULL commit: a raw `sqlite3` `BEGIN IMMEDIATE; INSERT one row; COMMIT` in WAL mode with
  `synchronous=FULL`, in the same folder (so on the same disk) as the journal;
- a bare transition: one `send` on a two-state python-statemachine StateChart.

The per-task cost is measured in a run that already holds `--small` and then `--large` task
rows (250 and 4,000 by default: 50 and 800 plans of 5 tasks), so the ratio between the two
shows whether the cost grows with the run (it should not: sealing is incremental). Prints
medians and minimums of `--repeat` rounds of `--n` tasks each; the goals are journal/budget
<= 1.2 and large/small <= 1.2.

    .venv/bin/python benchmarks/journal_overhead.py [--n 100] [--repeat 5] [--dir PATH]

fsync cost depends on the disk under `--dir` (default: the system temp folder, which may be a
tmpfs where fsync is nearly free; pass a folder on the project's disk for a realistic figure).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.loop_overhead import bare_transition_cost


def full_commit_cost(folder: Path, n: int) -> list[float]:
    """Seconds per raw FULL commit of one small row, `n` samples."""
    conn = sqlite3.connect(folder / "raw.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
    samples = []
    for i in range(n):
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}",))
        conn.execute("COMMIT")
        samples.append(time.perf_counter() - start)
    conn.close()
    return samples


def task_cost(folder: Path, rows: int, n: int) -> list[float]:
    """Seconds per journaled task (start + finish through the recorder) in a run that holds
    `rows` task rows, `n` samples."""
    from looprail.machine.record import JournalRecorder
    from looprail.store import Journal

    project = folder / f"p{rows}"
    project.mkdir()
    samples = []
    with Journal.open(project) as journal:
        run_id = journal.start_run("bench", state=["execute", "wave_running"])
        keys = [(f"01-{i // 5:03d}/T{i % 5}", f"01-{i // 5:03d}") for i in range(rows)]
        journal.wave_started(run_id, 1, keys)  # one transaction registers them all
        recorder = JournalRecorder(journal, run_id)
        for key, plan in keys[:n]:
            start = time.perf_counter()
            recorder.task_started(key, plan_id=plan, wave=1)
            recorder.task_finished(key, status="done", duration_ms=1)
            samples.append(time.perf_counter() - start)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="tasks per round (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--small", type=int, default=250, help="task rows, small run")
    parser.add_argument("--large", type=int, default=4000, help="task rows, large run")
    parser.add_argument("--dir", default=None, help="where the throwaway journals live")
    args = parser.parse_args()

    bare = bare_transition_cost()
    commit: list[float] = []
    small: list[float] = []
    large: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="looprail-bench-") as tmp:
        for round_no in range(args.repeat):  # interleaved: a burst of load hits all three
            folder = Path(tmp) / f"r{round_no}"
            folder.mkdir()
            commit.append(statistics.median(full_commit_cost(folder, args.n)))
            small.append(statistics.median(task_cost(folder, args.small, args.n)))
            large.append(statistics.median(task_cost(folder, args.large, args.n)))

    def ms(values: list[float]) -> str:
        return (
            f"median {statistics.median(values) * 1000:7.3f} ms  min {min(values) * 1000:7.3f} ms"
        )

    budget = [c + 2 * bare for c in commit]
    print(f"{args.repeat} rounds of {args.n} tasks; dir={args.dir or tempfile.gettempdir()}")
    print(f"bare transition:              {bare * 1e6:7.1f} µs")
    print(f"one FULL commit:              {ms(commit)}")
    print(f"budget (commit + 2 bare):     {ms(budget)}")
    print(f"journaled task, {args.small:5d} rows:  {ms(small)}")
    print(f"journaled task, {args.large:5d} rows:  {ms(large)}")
    for label, values in ((str(args.small), small), (str(args.large), large)):
        med = statistics.median(values) / statistics.median(budget)
        low = min(values) / min(budget)
        print(
            f"journal/budget at {label:>5} rows: median {med:5.2f}x  min {low:5.2f}x (goal <= 1.20)"
        )
    med = statistics.median(large) / statistics.median(small)
    low = min(large) / min(small)
    print(
        f"per-task {args.large}/{args.small} rows:      median {med:5.2f}x  min {low:5.2f}x "
        "(goal <= 1.20)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
