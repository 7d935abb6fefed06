"""The guard server (looprail/runtime/guard.py `--serve`): one guard interpreter per looprail
process forks a guard for each child. Real processes, real kills (Linux only)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from looprail.runtime import process
from looprail.runtime.process import run_bounded
from tests.support import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl guard")
PY = sys.executable


def ppid(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_bytes()
    return int(text[text.rindex(b")") + 2 :].split()[1])


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


GUARD_PARENT = (
    "import os; g = os.getppid(); t = open(f'/proc/{g}/stat', 'rb').read(); "
    "print(g, int(t[t.rindex(b')') + 2 :].split()[1]))"
)


def test_a_child_runs_under_a_guard_forked_by_this_process_server(tmp_path):
    res = run_bounded([PY, "-c", GUARD_PARENT], timeout_s=30, cwd=tmp_path)
    assert res.ok, res
    guard, server = (int(x) for x in res.stdout.split())
    # The child's guard was forked by the server, a child of this process; the guard is gone
    # with its child, the server stays for the next one.
    assert server == _server_pid() and server != os.getpid()
    assert ppid(server) == os.getpid() and "--serve" in cmdline(server)
    deadline = time.monotonic() + 10
    while alive(guard) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(guard)
    again = run_bounded([PY, "-c", GUARD_PARENT], timeout_s=30)
    assert int(again.stdout.split()[1]) == server


def _server_pid() -> int:
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and alive(int(entry)):
            try:
                if ppid(int(entry)) == me and "--serve" in cmdline(int(entry)):
                    return int(entry)
            except OSError:
                continue
    return 0


def test_exit_codes_signals_stdin_cwd_and_env_come_through(tmp_path):
    res = run_bounded(
        [
            PY,
            "-c",
            "import os,sys; print(sys.stdin.read(), os.getcwd(), os.environ['X']); sys.exit(3)",
        ],
        timeout_s=30,
        stdin="hello",
        cwd=tmp_path,
        env={**os.environ, "X": "from-env"},
    )
    assert res.exit_code == 3
    assert res.stdout.split() == ["hello", str(tmp_path.resolve()), "from-env"]
    killed = run_bounded(["sh", "-c", "kill -TERM $$"], timeout_s=30)
    assert killed.exit_code == -signal.SIGTERM
    missing = run_bounded(["no-such-program-here"], timeout_s=30)
    assert missing.exit_code is None and "No such file" in (missing.spawn_error or "")
    nowhere = run_bounded(["true"], timeout_s=30, cwd=tmp_path / "absent")
    assert nowhere.exit_code is None and nowhere.spawn_error


def test_a_timeout_kills_the_whole_tree(tmp_path):
    script = "sleep 60 & echo $! > bg; sleep 60"
    res = run_bounded(["sh", "-c", script], timeout_s=1, cwd=tmp_path)
    assert res.timed_out
    bg = int((tmp_path / "bg").read_text())
    deadline = time.monotonic() + 10
    while alive(bg) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(bg)


def test_killing_the_server_kills_running_children_and_a_new_server_takes_over(tmp_path):
    assert run_bounded(["true"], timeout_s=30).ok  # the server is up
    server = _server_pid()
    assert server
    out: dict[str, object] = {}

    def run() -> None:
        out["res"] = run_bounded(
            ["sh", "-c", "echo $$ > pid; exec sleep 60"], timeout_s=60, cwd=tmp_path
        )

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 20
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int((tmp_path / "pid").read_text())
    os.kill(server, signal.SIGKILL)  # its guards get their death signal and kill their trees
    thread.join(timeout=20)
    assert not thread.is_alive()
    res = out["res"]
    assert isinstance(res, process.ProcessResult) and not res.ok
    assert not alive(child)
    again = run_bounded(["sh", "-c", "echo ok"], timeout_s=30)  # a new server starts
    assert again.ok and again.stdout.strip() == "ok"
    assert _server_pid() not in (0, server)


def test_without_the_server_each_child_gets_a_guard_of_its_own(monkeypatch):
    monkeypatch.setenv("LOOPRAIL_GUARD_SERVER", "0")
    res = run_bounded([PY, "-c", "import os; print(os.getppid())"], timeout_s=30)
    guard = int(res.stdout)
    assert res.ok and guard != os.getpid()


def test_the_console_script_leaves_no_guard_server_behind(tmp_path):
    """`looprail run` started processes (so a guard server), then ended with its fast exit:
    the server dies with it."""
    import subprocess

    sys.path.insert(0, str(REPO))
    from benchmarks.wave_efficiency import sleep_project

    project = sleep_project(tmp_path, 2, 0)
    record = tmp_path / "servers"
    executor = project / ".looprail" / "agents" / "executor"
    # The task records its guard's parent (the server) and that one's command line.
    executor.write_text(
        "#!/bin/sh\n"
        "server=$(awk '{print $4}' \"/proc/$PPID/stat\")\n"
        f"echo \"$server $(tr '\\0' ' ' < /proc/$server/cmdline)\" >> {record}\n"
    )
    script = Path(sys.executable).with_name("looprail")
    cmd = (
        [str(script)]
        if script.exists()
        else [PY, "-c", "from looprail.cli import console; console()"]
    )
    proc = subprocess.Popen(
        [*cmd, "run", "--phase", "1", "--jobs", "2"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "shipped" in err
    mark = f"--serve {proc.pid} "
    lines = record.read_text().splitlines()
    assert len(lines) == 2 and all(mark in line for line in lines)  # a server of that run
    server = int(lines[0].split()[0])

    def servers() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if mark in cmdline(int(entry)) + " " and alive(int(entry)):
                        found.append(int(entry))
                except OSError:
                    continue
        return found

    deadline = time.monotonic() + 10
    while servers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert servers() == [] and not (alive(server) and mark in cmdline(server) + " ")


PRESTART = """
import os, sys, time
sys.path.insert(0, {repo!r})
from looprail.runtime.process import prestart_guard_server, run_bounded
from tests.runtime.test_guard_server import GUARD_PARENT, _server_pid
assert _server_pid() == 0
prestart_guard_server()
server, deadline = _server_pid(), time.monotonic() + 10
while not server and os.environ.get("LOOPRAIL_GUARD_SERVER") != "0" and time.monotonic() < deadline:
    time.sleep(0.05)  # (a loaded machine: /proc may show it a moment later)
    server = _server_pid()
prestart_guard_server()  # a second call starts no second server
assert _server_pid() == server
res = run_bounded([sys.executable, "-c", GUARD_PARENT], timeout_s=30)
print(server, int(res.stdout.split()[1]) if res.ok else res)
"""


def _fresh_process(script: str, cwd: Path, *, timeout: float, **env: str):
    """Run `script` (formatted with the repository's path) in a new interpreter with no guard
    server of the suite's (`env`: more variables), and return its CompletedProcess."""
    import subprocess

    environ = {k: v for k, v in os.environ.items() if k != "LOOPRAIL_GUARD_SERVER"}
    return subprocess.run(
        [PY, "-c", script.format(repo=str(REPO))],
        capture_output=True,
        text=True,
        env={**environ, **env},
        cwd=cwd,
        timeout=timeout,
    )


@pytest.mark.parametrize("server_on", [True, False])
def test_prestart_boots_the_server_the_first_child_then_uses(server_on, tmp_path):
    """`looprail run` starts its guard server before importing the machine, so its interpreter
    boots meanwhile; the first child is forked by that same server. Off: nothing starts."""
    extra = {} if server_on else {"LOOPRAIL_GUARD_SERVER": "0"}
    out = _fresh_process(PRESTART, tmp_path, timeout=60, **extra)
    assert out.returncode == 0, out.stderr
    server, used = (int(x) for x in out.stdout.split())
    if server_on:
        assert server != 0 and used == server, out.stdout + out.stderr
    else:
        assert server == 0 and used != 0  # the child got a guard of its own


SPARES = """
import os, signal, sys, threading, time
sys.path.insert(0, {repo!r})
from looprail.runtime.process import prestart_guard_server, run_bounded
from tests.runtime.test_guard_server import GUARD_PARENT, _server_pid, alive, children, cmdline
prestart_guard_server()
server, deadline = _server_pid(), time.monotonic() + 30
while len(children(server)) < 2 and time.monotonic() < deadline:
    time.sleep(0.05)  # the spares are forked once the server has had a quiet moment
spares = children(server)
assert len(spares) == 2 and all("--serve" in cmdline(p) for p in spares), spares
# A burst of six: two go to the spares, four to guards forked for them; all under the server.
results = []
def one():
    results.append(run_bounded([sys.executable, "-c", GUARD_PARENT], timeout_s=60))
threads = [threading.Thread(target=one) for _ in range(6)]
for t in threads: t.start()
for t in threads: t.join()
assert all(r.ok for r in results), results
guards = {{int(r.stdout.split()[0]) for r in results}}
assert {{int(r.stdout.split()[1]) for r in results}} == {{server}}
assert len(guards) == 6 and set(spares) <= guards, (spares, guards)
# A spare killed while it waits is passed over. The burst's guards may still be exiting:
# the spares are the children that served nobody.
def idle_spares(served):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        spares = [p for p in children(server) if p not in served]
        if len(spares) >= 2:
            return spares
        time.sleep(0.05)
    raise AssertionError(("no spares", children(server), served))
spares = idle_spares(guards)
os.kill(spares[0], signal.SIGKILL)
deadline = time.monotonic() + 30
while alive(spares[0]) and time.monotonic() < deadline:
    time.sleep(0.02)  # gone (a spare killed in the instant it is handed a start loses it)
again = run_bounded([sys.executable, "-c", GUARD_PARENT], timeout_s=60)
assert again.ok and int(again.stdout.split()[1]) == server, again
# Killing the server ends its waiting spares (their death signal): none is left behind.
spares = idle_spares(guards | {{int(again.stdout.split()[0])}})
os.kill(server, signal.SIGKILL)
deadline = time.monotonic() + 30
while any(alive(p) for p in spares) and time.monotonic() < deadline:
    time.sleep(0.05)
assert not any(alive(p) for p in spares), spares
print("ok")
"""


def children(pid: int) -> list[int]:
    """The live children of `pid` (a guard server's: its spare guards and running guards)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and alive(int(entry)):
            try:
                if ppid(int(entry)) == pid:
                    found.append(int(entry))
            except OSError:
                continue
    return sorted(found)


def test_spare_guards_take_the_first_starts_and_die_with_the_server(tmp_path):
    """The server keeps spare guards forked ahead (LOOPRAIL_GUARD_SPARES=2 here): a burst of
    starts takes the spares first, then forks a guard per start; a spare killed while it waits
    is passed over; the spares die with the server."""
    out = _fresh_process(SPARES, tmp_path, timeout=180, LOOPRAIL_GUARD_SPARES="2")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr


def test_a_request_too_big_for_one_record_comes_through(tmp_path):
    """A huge environment (past the socket's one-record size) goes to the guard in a memfd."""
    big = {f"BIG{i}": str(i) * 100_000 for i in range(3)}  # one string may be 128 KiB at most
    res = run_bounded(
        ["sh", "-c", 'printf %s "$BIG0$BIG1$BIG2" | wc -c'],
        timeout_s=30,
        env={**os.environ, **big},
        cwd=tmp_path,
    )
    assert res.ok, res
    assert int(res.stdout) == 300_000
    guard = run_bounded([PY, "-c", GUARD_PARENT], timeout_s=30, env={**os.environ, **big})
    assert guard.ok and int(guard.stdout.split()[1]) == _server_pid()
