"""Helpers for the dashboard tests: a real uvicorn server in a thread, the example project with
an executor that waits for a file the test controls, and hostile journals."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from looprail.journal import EventRecord, Journal, TaskUpdate
from tests.support import REPO

EXAMPLE = REPO / "examples" / "hello-loop"
CAPABILITIES = REPO / "examples" / "capabilities"
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>"\'&'
LONG = "A" * 20_000
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# The executor waits until `<project>/.release` exists, then does the example's work; it gives
# up when the run that started it dies (a test kills it) or after 300 s.
GATED_EXECUTOR = """#!/usr/bin/env python3
import os, subprocess, sys, time
from pathlib import Path
data = sys.stdin.read()
import json
req = json.loads(data)
root = Path(req["project"])
(root / ".waiting").write_text(req["task"]["planId"] + "/" + req["task"]["taskId"])
parent, deadline = os.getppid(), time.monotonic() + 300
while not (root / ".release").exists():
    if os.getppid() != parent or time.monotonic() > deadline:
        sys.exit(1)  # the run was killed (or the test is gone): never linger
    time.sleep(0.05)
real = Path(__file__).with_name("executor.real")
done = subprocess.run([sys.executable, str(real)], input=data, text=True)
sys.exit(done.returncode)
"""


def gated_example(root: Path, *, allow_ship: bool = True) -> Path:
    """A copy of examples/hello-loop whose executor waits for `<project>/.release`."""
    project = root / "hello"
    shutil.copytree(EXAMPLE, project)
    agents = project / ".looprail" / "agents"
    (agents / "executor").rename(agents / "executor.real")
    (agents / "executor").write_text(GATED_EXECUTOR)
    (agents / "executor").chmod(0o755)
    if not allow_ship:
        set_allow_ship(project, False)
    return project


def set_allow_ship(project: Path, allow: bool) -> None:
    config = project / ".planning" / "config.json"
    data = json.loads(config.read_text())
    data["release"]["allow_ship"] = allow
    config.write_text(json.dumps(data))


def printed_url(line: str) -> tuple[str, int, str]:
    """`(base URL, port, token)` of the line `looprail ui` prints
    (`looprail ui: PROJECT at http://127.0.0.1:PORT/?token=TOKEN  (Ctrl-C stops)`)."""
    from urllib.parse import parse_qs, urlsplit

    url = line.split(" at ")[1].split()[0]
    parts = urlsplit(url)
    assert parts.port is not None, line
    (token,) = parse_qs(parts.query)["token"]
    return f"{parts.scheme}://{parts.netloc}", parts.port, token


def looprail_bin() -> str:
    return str(Path(sys.executable).with_name("looprail"))


def start_run(project: Path, *extra: str) -> subprocess.Popen:
    """`looprail run PROJECT --phase 1` in its own process group (so a test can kill it)."""
    return subprocess.Popen(
        [
            looprail_bin(),
            "run",
            str(project),
            "--phase",
            "1",
            "--capabilities",
            str(CAPABILITIES),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def run_example(project: Path) -> subprocess.CompletedProcess:
    """Run the example to its end (the executor released from the start)."""
    (project / ".release").write_text("go")
    return subprocess.run(
        [looprail_bin(), "run", str(project), "--phase", "1", "--capabilities", str(CAPABILITIES)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        time.sleep(interval)


@contextlib.contextmanager
def serve(app) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free local port in a thread; yields the base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5, access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        from looprail.ui.server import stop_streams

        if hasattr(app.state, "dashboard"):  # a dashboard (the tests serve other apps too)
            stop_streams(app)
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def latest_run_id(project: Path) -> str | None:
    from looprail.journal import Journal, NoJournalError

    try:
        with Journal.open_readonly(project) as journal:
            run = journal.latest_run()
            return run.id if run else None
    except NoJournalError:
        return None


def running_task_committed(project: Path) -> bool:
    """Whether the latest run's journal has a task committed as running (a held start reaches
    the disk up to 50 ms after it happened: docs/journal.md, "What is committed when")."""
    from looprail.journal import Journal, JournalError

    try:
        with Journal.open_readonly(project) as journal:
            run = journal.latest_run()
            return run is not None and any(t.status == "running" for t in journal.tasks(run.id))
    except JournalError:  # not created yet, or still an empty file
        return False


def hostile_project(root: Path) -> tuple[Path, str]:
    """A project whose folder name, journal and log hold markup: every string a third party
    controls (capability ids, hook labels, messages, task keys, halt reason)."""
    project = root / '<img src=x onerror=alert(1)>"'
    (project / ".planning" / "phases" / "01-x").mkdir(parents=True)
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["verify"])
        journal.record(run_id, EventRecord(kind="point", point="ship:pre", data={"hooks": 1}))
        journal.record(
            run_id,
            EventRecord(
                kind="hook",
                point="ship:pre",
                cap_id=HOSTILE,
                hook_kind="gate",
                outcome="blocked",
                duration_ms=3,
                message=HOSTILE + LONG,
                data={"label": HOSTILE, "blocking": True, "onError": HOSTILE},
            ),
        )
        journal.record(
            run_id,
            EventRecord(
                kind="native_hook", cap_id=HOSTILE, outcome="blocked", message=HOSTILE, data={}
            ),
        )
        journal.record(run_id, EventRecord(kind="warning", point="plan:pre", message=HOSTILE))
        journal.wave_started(run_id, 1, [(HOSTILE, HOSTILE)])
        journal.record(
            run_id,
            EventRecord(kind="task_started"),
            task_update=TaskUpdate(task_key=HOSTILE, status="running"),
        )
        journal.record(
            run_id,
            EventRecord(kind="halted", point="ship:pre", cap_id=HOSTILE, message=HOSTILE),
        )
        journal.finish_run(run_id, "halted", HOSTILE + LONG)
    return project, run_id
