"""What the process guard costs per child start: `run_bounded(["true"])` under the guard (as
every step's child runs) against the same call with `guard=False`, serially and as a burst
of concurrent starts (a wave's plans starting at once). Wall time, median of `--n` rounds;
the guarded and unguarded calls alternate, so machine load hits both alike.

    python benchmarks/child_start.py [--n 40] [--burst 8]

Prints one JSON object: milliseconds per start, guarded and unguarded, and the guard's cost
(their difference) for each shape. Linux only (elsewhere there is no guard).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from looprail.runtime.process import run_bounded


def one_start(guard: bool) -> float:
    """Milliseconds for one bounded start of `true`, to its reaped exit."""
    began = time.perf_counter()
    result = run_bounded(["true"], timeout_s=30, guard=guard)
    spent = (time.perf_counter() - began) * 1000
    if not result.ok:
        raise SystemExit(f"child_start: `true` failed: {result.describe_failure()}")
    return spent


def burst(pool: ThreadPoolExecutor, size: int, guard: bool) -> float:
    """Milliseconds per start when `size` starts are made at once (wall time / size)."""
    began = time.perf_counter()
    list(pool.map(lambda _: one_start(guard), range(size)))
    return (time.perf_counter() - began) * 1000 / size


def measure(rounds: int, size: int) -> dict[str, float]:
    one_start(True)  # warm: imports, and whatever a guarded start sets up once
    serial: dict[bool, list[float]] = {True: [], False: []}
    bursts: dict[bool, list[float]] = {True: [], False: []}
    with ThreadPoolExecutor(size) as pool:
        for _ in range(rounds):
            for guard in (True, False):
                serial[guard].append(one_start(guard))
                bursts[guard].append(burst(pool, size, guard))
    med = {key: statistics.median(values) for key, values in serial.items()}
    per = {key: statistics.median(values) for key, values in bursts.items()}
    return {
        "serial_guarded_ms": round(med[True], 2),
        "serial_unguarded_ms": round(med[False], 2),
        "serial_guard_cost_ms": round(med[True] - med[False], 2),
        "burst_guarded_ms_per_start": round(per[True], 2),
        "burst_unguarded_ms_per_start": round(per[False], 2),
        "burst_guard_cost_ms_per_start": round(per[True] - per[False], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=40, help="rounds (default 40)")
    parser.add_argument("--burst", type=int, default=8, help="starts at once (default 8)")
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        raise SystemExit("child_start: the process guard runs on Linux only")
    print(json.dumps({"rounds": args.n, "burst": args.burst, **measure(args.n, args.burst)}))


if __name__ == "__main__":
    main()
