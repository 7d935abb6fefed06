"""The Dask local cluster accepts nobody but the run (issue 27, point 1).

`looprail run --executor dask-local:N` is started for real; while its task waits, the test does
what another local user would do: it finds the ports the looprail process and its workers
listen on (as `ss` would show them) and connects without the run's credentials, over plain TCP
and over TLS with a certificate of its own, to run a function inside looprail's process (or
to be answered by a worker, which would run one too). Where `setpriv` can drop to
`nobody`, the attacker really is another user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.machine.test_dask_executor import dask_project

distributed = pytest.importorskip("distributed")
pytest.importorskip("cryptography")

ROOT = Path(__file__).resolve().parents[2]

WAITING_AGENT = """#!/bin/sh
touch "$STARTED_MARK"
i=0
while [ ! -e "$GO_MARK" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
mkdir -p "$LOOPRAIL_PROJECT/out"
echo "$LOOPRAIL_PLAN_ID $LOOPRAIL_TASK_ID" >> "$LOOPRAIL_PROJECT/out/$LOOPRAIL_PLAN_ID.txt"
"""

# What the attacker runs: connect, then run a function in the scheduler's process (looprail's);
# on a worker's port, ask the worker who it is (any answer means it takes requests, `run` too).
ATTACK = """
import asyncio, os, sys
from distributed import Client
from distributed.core import rpc
from distributed.security import Security
address, role, creds = sys.argv[1:4]
# tls with its own freshly made certificate: what an attacker who knows Dask would bring
security = Security.temporary() if creds == "own" else Security()
try:
    if role == "scheduler":
        c = Client(address, timeout="4s", security=security)
        print("RAN", c.run_on_scheduler(os.getpid))
    else:
        async def ask():
            args = security.get_connection_args("client")
            async with rpc(address, timeout=4, connection_args=args) as worker:
                return await worker.identity()
        print("RAN", asyncio.run(asyncio.wait_for(ask(), 8)).get("type"))
except BaseException as exc:
    print("REFUSED", type(exc).__name__, str(exc)[:200])
"""


def run_argv(project, executor: str) -> list[str]:
    """`looprail run --phase 1` of `project` on `executor`, as a user types it."""
    return [sys.executable, "-m", "looprail", "run", "--phase", "1", "--project", str(project),
            "--executor", executor]  # fmt: skip


def children(pid: int) -> list[int]:
    """Every descendant of `pid` (the Dask nannies and workers), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def listening_ports(pid: int) -> list[int]:
    """TCP ports in LISTEN state on 127.0.0.1 held by process `pid` (read from /proc)."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone meanwhile
        return []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    with open("/proc/net/tcp") as fh:
        for line in fh.readlines()[1:]:
            parts = line.split()
            local, state, inode = parts[1], parts[3], parts[9]
            if state == "0A" and inode in inodes and local.startswith("0100007F:"):
                ports.append(int(local.split(":")[1], 16))
    return ports


def as_nobody() -> list[str]:
    """A prefix that runs a command as `nobody`, when this machine can (root and setpriv)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return []
    probe = subprocess.run(
        [
            setpriv,
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            sys.executable,
            "-c",
            "import distributed",
        ],
        capture_output=True,
        cwd="/",
    )
    if probe.returncode != 0:  # nobody cannot read this interpreter or its packages
        return []
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def attack(address: str, prefix: list[str], role: str = "scheduler") -> str:
    """`address` is `tcp://…` or `tls+own://…`: TLS with the attacker's own self-signed
    credentials (TLS with none fails in the attacker's own client, proving nothing)."""
    creds = "own" if address.startswith("tls+own://") else "none"
    address = address.replace("tls+own://", "tls://")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-c", ATTACK, address, role, creds],
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
            env=env,
        )
    except subprocess.TimeoutExpired:  # not a Dask port (an HTTP server): no handshake
        return "REFUSED timeout"
    return done.stdout.strip() or done.stderr.strip()[-300:]


def http_pages(port: int) -> dict[str, int]:
    """What the port serves of Dask's HTTP pages (status per path; 0: not HTTP)."""
    import http.client
    import urllib.error
    import urllib.request

    out = {}
    for path in ("/info/main/workers.html", "/metrics", "/health", "/status"):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
                out[path] = r.status
        except urllib.error.HTTPError as exc:
            out[path] = exc.code
        except (OSError, http.client.HTTPException):
            out[path] = 0
    return out


def test_another_local_user_cannot_run_code_on_the_local_cluster(tmp_path):
    project = dask_project(tmp_path, plans=1, tasks=1)
    (project / ".looprail" / "agents" / "executor").write_text(WAITING_AGENT)
    started, go = tmp_path / "started", tmp_path / "go"
    env = {**os.environ, "STARTED_MARK": str(started), "GO_MARK": str(go)}
    run = subprocess.Popen(
        run_argv(project, "dask-local:1"),
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.1)
        ports = listening_ports(run.pid)
        assert ports, "the looprail process listens on no loopback port (no scheduler?)"
        prefix = as_nobody()
        results = {}
        for port in ports:
            for scheme in ("tcp", "tls+own"):
                results[f"{scheme}://127.0.0.1:{port}"] = attack(
                    f"{scheme}://127.0.0.1:{port}", prefix
                )
        worker_ports: list[int] = []
        deadline = time.monotonic() + 30  # a loaded machine: the listener may still be coming
        while not worker_ports and time.monotonic() < deadline:
            worker_ports = [p for child in children(run.pid) for p in listening_ports(child)]
            time.sleep(0.2)
        assert worker_ports, "no worker process listens on a loopback port"
        for port in worker_ports:
            for scheme in ("tcp", "tls+own"):
                address = f"{scheme}://127.0.0.1:{port}"
                results[f"worker {address}"] = attack(address, prefix, "worker")
        served = {
            p: pages for p in ports + worker_ports if 200 in (pages := http_pages(p)).values()
        }
        ran = {a: r for a, r in results.items() if r.startswith("RAN")}
        assert not ran, f"a client without the run's credentials ran code in looprail: {ran}"
        assert all(r.startswith("REFUSED") for r in results.values()), results
        assert not served, f"Dask's HTTP pages are served without a dashboard asked for: {served}"
    finally:
        go.touch()
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert "on tls://127.0.0.1:" in err  # the run's own workers speak TLS
    assert (project / "out" / "01-001.txt").exists()


def http_port(executor) -> int:
    sockets = executor._cluster.scheduler.http_server._sockets.values()
    return next(iter(sockets)).getsockname()[1]


def test_dask_http_pages_only_when_a_dashboard_is_asked_for():
    from looprail.machine.dask.executor import DaskExecutor

    with DaskExecutor("dask-local:1") as ex:
        assert ex.client.scheduler.address.startswith("tls://127.0.0.1:")
        assert set(http_pages(http_port(ex)).values()) == {404}
    with DaskExecutor("dask-local:1,dashboard=127.0.0.1:0") as ex:
        assert http_pages(http_port(ex))["/health"] == 200


@pytest.mark.parametrize(
    ("spec", "why", "code"),
    [
        ("dask-local:1,dash=1", "unknown option", 2),  # a usage error
        ("dask-local:1,dashboard", "unknown option", 2),
        ("dask://tls://", "expected dask://HOST:PORT", 2),
        ("dask://tls://h:1", "needs Dask's TLS settings", 1),  # refused: settings missing
    ],
)
def test_bad_dask_security_specs_are_one_line(tmp_path, spec, why, code):
    project = dask_project(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    done = subprocess.run(
        run_argv(project, spec),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == code, done.stderr
    assert why in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr


def test_a_tls_scheduler_given_by_address_runs_with_dasks_own_tls_settings(tmp_path):
    """`dask://tls://HOST:PORT`: the client's credentials come from Dask's configuration (here
    its environment variables); the cluster accepts nobody else."""
    from distributed import LocalCluster
    from distributed.security import Security

    made = Security.temporary()
    (tmp_path / "ca.pem").write_text(made.tls_ca_file)
    (tmp_path / "key.pem").write_text(made.tls_client_key)
    project = dask_project(tmp_path, plans=2, tasks=1)
    with LocalCluster(
        n_workers=1,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        protocol="tls://",
        security=made,
        dashboard_address=None,
        silence_logs=40,
    ) as cluster:
        address = cluster.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
        env.update(
            DASK_DISTRIBUTED__COMM__TLS__CA_FILE=str(tmp_path / "ca.pem"),
            DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=str(tmp_path / "ca.pem"),
            DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=str(tmp_path / "key.pem"),
        )
        done = subprocess.run(
            run_argv(project, f"dask://{address}"),
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert "on tls://127.0.0.1:" in done.stderr
        assert (project / "out" / "01-001.txt").exists() and (
            project / "out" / "01-002.txt"
        ).exists()
        assert attack(f"tls+own://{address.removeprefix('tls://')}", []).startswith("REFUSED")
