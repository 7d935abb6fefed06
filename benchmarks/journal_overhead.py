"""What the journal costs per task, against its budget, measured in the same run.

A task is journaled by `JournalRecorder.task_started` (held: nothing written yet) and
`task_finished`, whose one FULL commit (one fsync) writes the start and the finish, sealed
(journal/seal.py). The calls here are sequential, so the recorder's group commit never merges two
tasks: this is the cost of one task on its own. A second figure is a task with one child
process under a guard (as every child is on Linux): start, its `process` event (held like the
start: the guard kills the child if looprail dies) and finish, still one FULL commit. The
budget (issue #16) is one FULL commit plus two bare transitions:

- one FULL commit: a raw `sqlite3` `BEGIN IMMEDIATE; INSERT one row; COMMIT` in WAL mode with
  `synchronous=FULL`, in the same folder (so on the same disk) as the journal;
- a bare transition: one `send` on a two-state python-statemachine StateChart.

The per-task cost is measured in a run that already holds `--small` and then `--large` task
rows (250 and 4,000 by default: 50 and 800 plans of 5 tasks), so the ratio between the two
shows whether the cost grows with the run (it should not: sealing is incremental). Prints
medians and minimums of `--repeat` rounds of `--n` tasks each; the goals are journal/budget
<= 1.2 and large/small <= 1.2, for the task with a process too.

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


def bare_transition_cost(n: int = 2000) -> tuple[float, float]:
    """Wall and CPU seconds per `send` on a two-state StateChart (as in loop_overhead.py)."""
    from statemachine import State, StateChart

    class Flip(StateChart):
        allow_event_without_transition = False
        catch_errors_as_events = False
        a = State(initial=True)
        b = State()
        go = a.to(b) | b.to(a)

    sm = Flip()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        sm.send("go")
    return (time.perf_counter() - start) / n, (time.process_time() - cpu) / n


def full_commit_cost(folder: Path, n: int) -> tuple[float, float]:
    """Median wall seconds and mean CPU seconds per raw FULL commit of one small row."""
    conn = sqlite3.connect(folder / "raw.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
    samples = []
    cpu = time.process_time()
    for i in range(n):
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}",))
        conn.execute("COMMIT")
        samples.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu
    conn.close()
    return statistics.median(samples), cpu / n


def task_cost(folder: Path, rows: int, n: int, child: bool = False) -> tuple[float, float]:
    """Median wall seconds and mean CPU seconds per journaled task (start + finish through the
    recorder; with `child`, a `process` event between them) in a run that holds `rows` task
    rows."""
    from looprail.journal import EventRecord, Journal, journal_path
    from looprail.journal.recorder import JournalRecorder

    project = folder / f"p{rows}{'c' if child else ''}"
    project.mkdir()
    spawned = {"pid": 4242, "start": 1, "guard_pid": 4241, "guard_start": 1, "argv0": "agent"}
    samples = []
    with Journal.open(project) as journal:
        run_id = journal.start_run("bench", state=["execute", "wave_running"])
        keys = [(f"01-{i // 5:03d}/T{i % 5}", f"01-{i // 5:03d}") for i in range(rows)]
        journal.wave_started(run_id, 1, keys)  # one transaction registers them all
        # The setup's pages leave the WAL now, not in a checkpoint the timed tasks would pay.
        raw = sqlite3.connect(journal_path(project))
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raw.close()
        recorder = JournalRecorder(journal, run_id)
        recorder.done_tasks()  # as the runner does before every wave (reads the rows once)
        cpu = time.process_time()
        for key, plan in keys[:n]:
            start = time.perf_counter()
            recorder.task_started(key, plan_id=plan, wave=1)
            if child:
                recorder.event(EventRecord(kind="process", data=spawned))
            recorder.task_finished(key, status="done", duration_ms=1)
            samples.append(time.perf_counter() - start)
        cpu = time.process_time() - cpu
        recorder.flush()
    return statistics.median(samples), cpu / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="tasks per round (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--small", type=int, default=250, help="task rows, small run")
    parser.add_argument("--large", type=int, default=4000, help="task rows, large run")
    parser.add_argument("--dir", default=None, help="where the throwaway journals live")
    args = parser.parse_args()

    bare_transition_cost(200)  # warm-up
    bare = bare_transition_cost()
    rounds: dict[str, list[tuple[float, float]]] = {
        "commit": [],
        "small": [],
        "large": [],
        "child": [],
    }
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="looprail-bench-") as tmp:
        for round_no in range(args.repeat):  # interleaved: a burst of load hits all three
            folder = Path(tmp) / f"r{round_no}"
            folder.mkdir()
            rounds["commit"].append(full_commit_cost(folder, args.n))
            rounds["small"].append(task_cost(folder, args.small, args.n))
            rounds["large"].append(task_cost(folder, args.large, args.n))
            rounds["child"].append(task_cost(folder, args.small, args.n, child=True))
    # The budget: one FULL commit + two bare transitions (a bare transition is all CPU).
    rounds["budget"] = [(w + 2 * bare[0], c + 2 * bare[1]) for w, c in rounds["commit"]]

    def pick(name: str, which: int, how) -> float:
        return how(r[which] for r in rounds[name])

    print(
        f"{args.repeat} rounds of {args.n} tasks; dir={args.dir or tempfile.gettempdir()}; "
        "ms per call, median and min over rounds"
    )
    print(f"bare transition: wall {bare[0] * 1e6:.1f} µs, CPU {bare[1] * 1e6:.1f} µs")
    labels = {
        "commit": "one FULL commit",
        "budget": "budget (commit + 2 bare)",
        "small": f"journaled task, {args.small} rows",
        "large": f"journaled task, {args.large} rows",
        "child": f"task + process, {args.small} rows",
    }
    for name, label in labels.items():
        print(
            f"{label:32s} wall {pick(name, 0, statistics.median) * 1000:7.3f} / "
            f"{pick(name, 0, min) * 1000:7.3f}   CPU {pick(name, 1, statistics.median) * 1000:7.3f}"
            f" / {pick(name, 1, min) * 1000:7.3f}"
        )
    for which, kind in ((0, "wall"), (1, "CPU")):
        for size in ("small", "large"):
            med = pick(size, which, statistics.median) / pick("budget", which, statistics.median)
            low = pick(size, which, min) / pick("budget", which, min)
            rows = args.small if size == "small" else args.large
            print(
                f"journal/budget at {rows:5d} rows ({kind:4s}): median {med:5.2f}x  "
                f"min {low:5.2f}x  (goal <= 1.20)"
            )
        med = pick("child", which, statistics.median) / pick("budget", which, statistics.median)
        low = pick("child", which, min) / pick("budget", which, min)
        print(
            f"task + process/budget {args.small:5d} rows ({kind:4s}): median {med:5.2f}x  "
            f"min {low:5.2f}x  (goal <= 1.20)"
        )
        med = pick("large", which, statistics.median) / pick("small", which, statistics.median)
        low = pick("large", which, min) / pick("small", which, min)
        print(
            f"per-task {args.large}/{args.small} rows ({kind:4s}):  median {med:5.2f}x  "
            f"min {low:5.2f}x  (goal <= 1.20)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
