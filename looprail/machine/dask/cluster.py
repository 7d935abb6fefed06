"""Which Dask cluster a run's waves go to (`parse_executor`), and how it is reached safely
(`local_security`, `check_remote_security`); importable without `distributed`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from looprail.errors import LooprailError, UsageError
from looprail.runtime.extras import install_command

# A LocalCluster's workers run processes, not Python compute: its profiler (a stack sample every
# 10 ms) and 100 ms memory polls only cost CPU (an idle cluster of 8: 0.28 CPU-s/s, 0.08 without).
LEAN_WORKERS = {
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.tick.interval": "200ms",
}
NO_HTTP_ROUTES: dict[str, list[str]] = {
    "distributed.scheduler.http.routes": [],
    "distributed.worker.http.routes": [],
}


def parse_executor(spec: str) -> str | LocalSpec:
    """`dask://HOST:PORT` → "tcp://HOST:PORT"; `dask://tls://HOST:PORT` → "tls://HOST:PORT";
    `dask-local:N` → LocalSpec(N), with `,dashboard=ADDR` to start Dask's HTTP dashboard (off
    unless asked for). UsageError (exit 2) for a malformed spec; exit 1 without dask.distributed."""
    value: str | LocalSpec
    if spec.startswith("dask://"):
        where = spec.removeprefix("dask://")
        scheme = "tcp"
        for prefix in ("tls", "tcp"):
            if where.startswith(f"{prefix}://"):
                scheme, where = prefix, where.removeprefix(f"{prefix}://")
        if not where or ":" not in where or "/" in where:
            raise UsageError(
                f"--executor {spec}: expected dask://HOST:PORT or dask://tls://HOST:PORT"
            )
        value = f"{scheme}://{where}"
    elif spec.startswith("dask-local:"):
        count, *options = spec.removeprefix("dask-local:").split(",")
        if not count.isdigit() or int(count) < 1:
            raise UsageError(f"--executor {spec}: expected dask-local:N with N >= 1 workers")
        dashboard = None
        for option in options:
            key, eq, addr = option.partition("=")
            if key != "dashboard" or not eq or ":" not in addr:
                raise UsageError(
                    f"--executor {spec}: unknown option {option!r} "
                    "(known: dashboard=HOST:PORT, e.g. dashboard=127.0.0.1:8787)"
                )
            dashboard = addr
        value = LocalSpec(int(count), dashboard)
    else:
        raise UsageError(f"--executor {spec}: expected dask://HOST:PORT or dask-local:N")
    try:
        import distributed  # noqa: F401  (is the dask extra installed?)
    except ImportError:
        raise LooprailError(
            f"--executor {spec} needs dask.distributed; install it with {install_command('dask')}"
        ) from None
    return value


@dataclass(frozen=True)
class LocalSpec:
    """`dask-local:N[,dashboard=ADDR]`: N worker processes; Dask's HTTP dashboard only when
    an address is given (it shows every task, and nothing guards it)."""

    workers: int
    dashboard: str | None = None


def local_security() -> Any:
    """Per-run credentials for a LocalCluster (`Security.temporary()`, made in memory), mutual
    TLS required on every connection: nobody else on the machine can connect (docs/security.md,
    "The Dask executor")."""
    from distributed.security import Security  # the dask extra

    try:
        return Security.temporary()
    except ImportError:
        raise LooprailError(
            f"--executor dask-local needs `cryptography` for its TLS credentials; "
            f"install it with {install_command('dask')}"
        ) from None


def check_remote_security(spec: str, address: str) -> None:
    """Refuse a `tls://` scheduler address before connecting when Dask's own security settings
    name neither a `security-loader` nor a CA and a client certificate."""
    import dask  # the dask extra

    if not address.startswith("tls://"):
        return
    if dask.config.get("distributed.client.security-loader", default=None):
        return
    # dask.config.get, not the dict: `ca_file` (from the environment) is also `ca-file`
    ca = dask.config.get("distributed.comm.tls.ca-file", default=None)
    cert = dask.config.get("distributed.comm.tls.client.cert", default=None)
    if not ca or not cert:
        raise LooprailError(
            f"--executor {spec}: a tls:// scheduler needs Dask's TLS settings: "
            "distributed.comm.tls.ca-file and distributed.comm.tls.client.cert (and .key), "
            "e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE=ca.pem "
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=client.pem "
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=client-key.pem"
        )
