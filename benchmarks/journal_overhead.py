"""What durability costs per journal write.

Times `Journal.record()` with a task update (one `BEGIN IMMEDIATE … COMMIT` in WAL mode with
`synchronous=FULL`, so every call waits for an fsync) against an in-memory no-op that takes the
same arguments, and prints the medians and their ratio.

    .venv/bin/python benchmarks/journal_overhead.py [--n 500] [--dir PATH]

fsync cost depends on the disk under `--dir` (default: the system temp dir, which may be a
tmpfs where fsync is nearly free; pass a folder on the project's disk for a realistic number).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence

from looprail.store import EventRecord, Journal, TaskUpdate


class NoopJournal:
    """The same call shape, nothing stored: the floor a journal write is compared against."""

    def record(
        self,
        run_id: str,
        event: EventRecord,
        *,
        state: Sequence[str] | None = None,
        task_update: TaskUpdate | None = None,
    ) -> int:
        return 0


def time_calls(n: int, call: Callable[[int], object]) -> list[float]:
    """Wall time of each of `n` calls, in microseconds."""
    samples = []
    for i in range(n):
        start = time.perf_counter_ns()
        call(i)
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="calls per measurement (default 500)")
    parser.add_argument("--dir", default=None, help="where the throwaway journal lives")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(dir=args.dir, prefix="looprail-bench-") as project,
        Journal.open(project) as journal,
    ):
        run_id = journal.start_run("bench", state=["execute", "wave_running"])

        def journaled(i: int) -> object:
            return journal.record(
                run_id,
                EventRecord(kind="task_started", wave=1, plan_id="01-01"),
                state=["execute", "wave_running"],
                task_update=TaskUpdate(task_key=f"01-01:{i}", status="running", wave=1),
            )

        noop = NoopJournal()

        def unjournaled(i: int) -> object:
            return noop.record(
                run_id,
                EventRecord(kind="task_started", wave=1, plan_id="01-01"),
                state=["execute", "wave_running"],
                task_update=TaskUpdate(task_key=f"01-01:{i}", status="running", wave=1),
            )

        time_calls(min(args.n, 50), unjournaled)  # warm-up: imports, pydantic caches
        baseline = time_calls(args.n, unjournaled)
        durable = time_calls(args.n, journaled)
        synchronous = journal.pragma("synchronous")
        mode = journal.pragma("journal_mode")

    base_median = statistics.median(baseline)
    durable_median = statistics.median(durable)
    durable_p90 = statistics.quantiles(durable, n=10)[-1]
    print(f"journal: {mode}, synchronous={synchronous} (2 = FULL), {args.n} calls, dir={project}")
    print(f"no-op record():      median {base_median:9.1f} µs")
    print(f"journal record():    median {durable_median:9.1f} µs   p90 {durable_p90:9.1f} µs")
    print(f"ratio (median):      {durable_median / base_median:9.1f}x")
    print(f"writes per second:   {1_000_000 / durable_median:9.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
