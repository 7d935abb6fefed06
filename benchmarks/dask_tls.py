"""What the local cluster's TLS costs: a LocalCluster started and used over plain TCP (the
baseline, what `dask-local:N` did before issue 27) against the same over mutual TLS with
per-run credentials (`looprail.machine.dask.cluster.local_security`, what it does now), in one
run, same machine, same load.

    start      = LocalCluster(...) + Client(...) until the workers are up
    round trip = one `client.submit(f).result()` (the orchestrator <-> scheduler <-> worker
                 path every plan and report takes), median over --calls

    python benchmarks/dask_tls.py [--workers 2] [--calls 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _noop(i: int) -> int:
    return i


def measure(workers: int, calls: int, tls: bool) -> tuple[float, float]:
    import dask
    from distributed import Client, LocalCluster

    from looprail.machine.dask.cluster import LEAN_WORKERS, NO_HTTP_ROUTES, local_security

    extra = {"protocol": "tls://", "security": local_security()} if tls else {}
    t0 = time.perf_counter()
    with dask.config.set({**LEAN_WORKERS, **NO_HTTP_ROUTES}):
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=40,
            **extra,
        )
    client = Client(cluster, security=extra.get("security"))
    client.wait_for_workers(workers)
    start = time.perf_counter() - t0
    times = []
    for i in range(calls):
        t = time.perf_counter()
        client.submit(_noop, i, pure=False).result()
        times.append(time.perf_counter() - t)
    client.close()
    cluster.close()
    return start, statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(args.repeat):  # interleaved: both see the same load
        for tls in (False, True):
            rows[tls].append(measure(args.workers, args.calls, tls))
    tcp_start = statistics.median(r[0] for r in rows[False])
    tls_start = statistics.median(r[0] for r in rows[True])
    tcp_rt = statistics.median(r[1] for r in rows[False])
    tls_rt = statistics.median(r[1] for r in rows[True])
    print(
        f"start:      tcp {tcp_start:.2f} s, tls {tls_start:.2f} s, "
        f"ratio {tls_start / tcp_start:.2f}"
    )
    print(
        f"round trip: tcp {tcp_rt * 1000:.2f} ms, tls {tls_rt * 1000:.2f} ms, "
        f"ratio {tls_rt / tcp_rt:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
