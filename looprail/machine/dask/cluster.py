"""Which Dask cluster a run's waves go to, and how it is reached safely: the `--executor` value
(`parse_executor`), a LocalCluster's per-run mutual-TLS credentials (`local_security`) and the
lean worker settings it starts with, and the check of a `tls://` scheduler's settings
(`check_remote_security`). What `looprail.machine.dask.executor.DaskExecutor` connects with;
importable without `distributed` (each imports it when called).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from looprail.errors import LooprailError, UsageError
from looprail.runtime.extras import install_command

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
    """Per-run credentials for a LocalCluster: a self-signed key and certificate made in
    memory (`Security.temporary()`), mutual TLS required on every connection. They reach
    the workers through the nanny's pipe (Dask writes them only for the moment it loads them,
    into a private 0700 temporary folder), so nobody else on the machine can connect to the
    scheduler or a worker, let alone run a function in looprail's process."""
    # the dask extra (optional): imported only when a Dask executor runs
    from distributed.security import Security

    try:
        return Security.temporary()
    except ImportError:
        raise LooprailError(
            f"--executor dask-local needs `cryptography` for its TLS credentials; "
            f"install it with {install_command('dask')}"
        ) from None


def check_remote_security(spec: str, address: str) -> None:
    """A scheduler given by address is reached with Dask's own security settings: its
    `distributed.client.security-loader`, else `distributed.comm.tls.*` (e.g.
    DASK_DISTRIBUTED__COMM__TLS__CA_FILE). A `tls://` address with neither a loader nor a CA
    and a client certificate configured is refused before connecting."""
    # the dask extra (optional): imported only when a Dask executor runs
    import dask

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


__all__ = [
    "LEAN_WORKERS",
    "NO_HTTP_ROUTES",
    "LocalSpec",
    "check_remote_security",
    "local_security",
    "parse_executor",
]
