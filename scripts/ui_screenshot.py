"""Regenerate the screenshots in docs/ui.md: the bundled example run for real, the dashboard
served by uvicorn, the page taken by the system's chromium (headless, through Playwright).

    python scripts/ui_screenshot.py            # writes docs/ui-live.png and docs/ui-halted.png

1. `docs/ui-live.png`: the example mid-run (its executor waits for a file this script writes),
   task 01-01/T1 open.
2. `docs/ui-halted.png`: the same run at its end with `release.allow_ship` false: halted by the
   release gate at ship:pre, the gate's message, the command that continues the run.

Needs the ui and test extras (`pip install -e '.[test]'`), Graphviz's `dot` and
/usr/bin/chromium. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTH = 1400

# The example's executor, held back until `<project>/.release` exists.
GATED = """#!/usr/bin/env python3
import json, os, subprocess, sys, time
from pathlib import Path
data = sys.stdin.read()
root = Path(json.loads(data)["project"])
parent, deadline = os.getppid(), time.monotonic() + 300
while not (root / ".release").exists():
    if os.getppid() != parent or time.monotonic() > deadline:
        sys.exit(1)  # the run is gone: never linger
    time.sleep(0.05)
real = Path(__file__).with_name("executor.real")
sys.exit(subprocess.run([sys.executable, str(real)], input=data, text=True).returncode)
"""


def wait_for(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {predicate}")
        time.sleep(0.05)


def prepare(work: Path) -> None:
    shutil.copytree(REPO / "examples" / "hello-loop", work / "hello-loop")
    shutil.copytree(REPO / "examples" / "capabilities", work / "capabilities")
    agents = work / "hello-loop" / ".looprail" / "agents"
    (agents / "executor").rename(agents / "executor.real")
    (agents / "executor").write_text(GATED)
    (agents / "executor").chmod(0o755)
    config = work / "hello-loop" / ".planning" / "config.json"
    data = json.loads(config.read_text())
    data["release"]["allow_ship"] = False
    config.write_text(json.dumps(data))


def serve(app):
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}/"


def shot(page, path: Path) -> None:
    """The whole page from its top, as a 900-pixel-high window lays it out (the chart's box
    is 80% of the window high: a window as high as the page would grow it without end)."""
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(path), full_page=True)
    print(f"wrote {path.relative_to(REPO)}")


def main() -> int:
    from playwright.sync_api import sync_playwright

    from looprail.ui.server import create_app, stop_streams

    looprail = str(Path(sys.executable).with_name("looprail"))
    with tempfile.TemporaryDirectory(prefix="looprail-ui-shot-") as tmp:
        work = Path(tmp)
        prepare(work)
        os.chdir(work)  # relative paths: the page's commands read `--project hello-loop`
        project = Path("hello-loop")
        app = create_app(project, ["capabilities"], poll_interval=0.1)
        server, thread, url = serve(app)
        run = subprocess.Popen(
            [looprail, "run", "hello-loop", "--phase", "1", "--capabilities", "capabilities"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with sync_playwright() as pw:
                context = pw.chromium.launch_persistent_context(
                    str(work / "profile"),
                    executable_path=CHROMIUM,
                    headless=True,
                    args=ARGS,
                    viewport={"width": WIDTH, "height": 900},
                )
                page = context.pages[0] if context.pages else context.new_page()
                page.set_default_timeout(60_000)
                page.goto(url)
                page.locator("button.task.s-running").first.wait_for()
                page.locator("button.task[data-key='01-01/T1']").click()
                page.locator("#task-detail .log").wait_for()
                page.wait_for_function("() => document.getElementById('chart').naturalWidth > 0")
                page.wait_for_timeout(1500)  # the clock ticks a little
                shot(page, REPO / "docs" / "ui-live.png")

                (project / ".release").write_text("go")
                page.locator("#runbar .badge", has_text="halted").wait_for()
                page.locator("button.task[data-key='01-03/T1']").click()
                page.locator("#task-detail .log p, #task-detail .log-file").first.wait_for()
                page.wait_for_timeout(1000)
                shot(page, REPO / "docs" / "ui-halted.png")
                context.close()
        finally:
            if run.poll() is None:
                run.kill()
            run.wait()
            stop_streams(app)
            server.should_exit = True
            thread.join(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
