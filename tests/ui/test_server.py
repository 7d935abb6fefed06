"""`looprail ui` at the server level: Starlette's TestClient for the routes, a real uvicorn
server for the event stream, and the CLI as a subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

with warnings.catch_warnings():
    # Starlette 1.x prefers httpx2 for its TestClient; httpx still works (older ones need it).
    warnings.filterwarnings("ignore", "Using `httpx`")
    from starlette.testclient import TestClient

from looprail.cli import main
from looprail.journal import EventRecord, Journal
from looprail.machine.answers import asked_record
from looprail.plans.checkpoint import Checkpoint
from looprail.ui.server import create_app
from tests.support import REPO
from tests.support import ui as uikit

HOSTILE, LONG = uikit.HOSTILE, uikit.LONG


def client(project: Path, caps=()) -> TestClient:
    return TestClient(create_app(project, [str(c) for c in caps]))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- a real halted run of the example, shared by several tests --------------------------------


@pytest.fixture(scope="module")
def halted_example(tmp_path_factory) -> Path:
    """examples/hello-loop run to a refusal: release.allow_ship false → halted at ship:pre."""
    project = uikit.gated_example(tmp_path_factory.mktemp("halted"), allow_ship=False)
    done = uikit.run_example(project)
    assert done.returncode == 1, done.stdout + done.stderr
    return project


def test_halted_run_shows_the_refused_gate_its_message_and_how_to_continue(halted_example):
    before = digest(halted_example / ".looprail" / "journal.sqlite")
    snap = client(halted_example, [uikit.CAPABILITIES]).get("/api/state").json()
    run = snap["run"]
    assert run["status"] == run["display"] == "halted"
    assert run["state"] == ["verify"]
    assert run["halt"]["point"] == "ship:pre" and run["halt"]["capId"] == "release-gate"
    # no --capabilities: the resume uses the ones the run started with (issue 40)
    assert run["continue"] == f"looprail resume {run['id']} --project {halted_example}"
    ship_pre = next(p for p in run["points"] if p["point"] == "ship:pre")
    (gate,) = ship_pre["hooks"]
    assert (gate["kind"], gate["capId"], gate["blocking"], gate["order"]) == (
        "gate",
        "release-gate",
        True,
        1,
    )
    (result,) = gate["results"]
    assert result["outcome"] == "blocked"
    assert "release.allow_ship" in result["message"]
    # waves → plans → tasks, with the tracker id the resolver used
    tasks = {t["key"]: t for w in run["waves"] for p in w["plans"] for t in p["tasks"]}
    assert set(tasks) == {"01-01/T1", "01-02/T1", "01-02/T2", "01-03/T1"}
    assert all(t["status"] == "done" and t["elapsedMs"] is not None for t in tasks.values())
    assert tasks["01-03/T1"]["resolver"]["trackerId"] == "demo:HELLO-3"
    assert [p["planId"] for w in run["waves"] for p in w["plans"]] == ["01-01", "01-02", "01-03"]
    # the path so far, from the journal's transitions
    assert run["path"][0] == {"source": ["idle"], "target": ["discuss"], "event": "begin"}
    assert run["path"][-1]["target"] == ["verify"]
    # the points come in loop order, all twelve, hooks in contract order
    assert [p["point"] for p in run["points"]][:2] == ["discuss:pre", "discuss:post"]
    assert len(run["points"]) == 12
    assert digest(halted_example / ".looprail" / "journal.sqlite") == before


def test_without_capabilities_the_hooks_still_come_from_the_journal(halted_example):
    snap = client(halted_example).get("/api/state").json()
    ship_pre = next(p for p in snap["run"]["points"] if p["point"] == "ship:pre")
    (gate,) = ship_pre["hooks"]
    assert gate["capId"] == "release-gate" and gate["results"][0]["outcome"] == "blocked"
    assert gate["summary"] == "predicate config-equals"


def test_chart_is_the_diagram_of_the_run(halted_example):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    c = client(halted_example, [uikit.CAPABILITIES])
    response = c.get("/api/chart.svg")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    assert "sandbox" in response.headers["content-security-policy"]
    root = ET.fromstring(response.content)
    text = " ".join(root.itertext())
    assert "release-gate" in text and "halted: blocked at ship:pre" in text
    assert root.tag.endswith("svg")
    # the same graph as `looprail diagram --hooks --run`: the SVG holds the same node titles
    from looprail.diagrams import diagram

    same = diagram(halted_example, [uikit.CAPABILITIES], hooks=True, run="latest").decode()
    titles = sorted(t.text for t in root.iter("{http://www.w3.org/2000/svg}title"))
    assert titles == sorted(
        t.text for t in ET.fromstring(same).iter("{http://www.w3.org/2000/svg}title")
    )


def test_log_tail_of_a_task_and_no_log(halted_example, tmp_path):
    project = tmp_path / "p"
    shutil.copytree(halted_example, project)
    run_id = uikit.latest_run_id(project)
    logs = project / ".looprail" / "logs" / run_id
    shutil.rmtree(logs, ignore_errors=True)  # the run's own logs: this test plants its own
    (logs / "01-01").mkdir(parents=True)
    lines = [f"line {i} \x1b[31mred\x1b[0m" for i in range(1000)]
    (logs / "01-01" / "T1.log").write_text("\n".join(lines) + "\n")
    (logs / "01-02_T2.stderr").write_text("boom\n")
    (logs / "01-01" / "T10.log").write_text("another task\n")  # T10 is not T1
    os.symlink("/etc/passwd", logs / "01-02_T1.log")  # never followed
    c = client(project)
    log = c.get("/api/log", params={"run": run_id, "task": "01-01/T1"}).json()
    (only,) = log["files"]
    assert only["name"] == "01-01/T1.log" and only["truncated"] is True
    assert only["text"].splitlines()[-1] == "line 999 red"
    assert "\x1b" not in only["text"] and len(only["text"].splitlines()) <= 201
    assert c.get("/api/log", params={"run": run_id, "task": "01-02/T2"}).json()["files"][0][
        "text"
    ] == ("boom\n")
    assert c.get("/api/log", params={"run": run_id, "task": "01-02/T1"}).json()["files"] == []
    assert c.get("/api/log", params={"run": run_id, "task": "01-03/T1"}).json()["files"] == []
    tasks = {
        t["key"]: t
        for w in c.get("/api/state").json()["run"]["waves"]
        for p in w["plans"]
        for t in p["tasks"]
    }
    assert tasks["01-01/T1"]["logFiles"] == ["01-01/T1.log"]
    assert tasks["01-03/T1"]["logFiles"] == []
    assert c.get("/api/log", params={"run": run_id}).status_code == 400


# -- empty, not a project, interrupted -----------------------------------------------------------


def test_empty_project_says_what_to_do_and_creates_nothing(tmp_path):
    project = tmp_path / "empty"
    (project / ".planning" / "phases" / "01-start").mkdir(parents=True)
    c = client(project)
    page = c.get("/")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    snap = c.get("/api/state").json()
    assert snap["run"] is None and snap["runs"] == []
    assert snap["hint"].startswith("No runs yet.")
    assert f"looprail run {project} --phase 1" in snap["hint"]
    assert not (project / ".looprail").exists()


def test_a_folder_without_planning_is_explained(tmp_path):
    snap = client(tmp_path).get("/api/state").json()
    assert snap["project"]["isProject"] is False
    assert "no .planning/ folder" in snap["hint"]


def test_a_journal_that_is_not_ours_is_reported_not_touched(tmp_path):
    (tmp_path / ".planning").mkdir()
    (tmp_path / ".looprail").mkdir()
    bad = tmp_path / ".looprail" / "journal.sqlite"
    bad.write_bytes(b"not a database at all" * 10)
    snap = client(tmp_path).get("/api/state").json()
    assert "is corrupt" in snap["journalError"] and "is corrupt" in snap["hint"]
    assert bad.read_bytes() == b"not a database at all" * 10


def test_a_run_whose_process_is_gone_is_interrupted(tmp_path):
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["execute", "wave_running"])
        journal.wave_started(run_id, 1, [("01-01/T1", "01-01")])
        journal.task_started(run_id, "01-01/T1", plan_id="01-01", wave=1)
    # nobody holds the run lock: the process that owned the run is gone
    snap = client(project).get("/api/state").json()
    run = snap["run"]
    assert run["status"] == "running" and run["display"] == "interrupted"
    assert run["interrupted"] is True and run["live"] is False
    assert run["continue"] == f"looprail resume {run_id} --project {project}"
    assert snap["runs"][0]["display"] == "interrupted"
    task = run["waves"][0]["plans"][0]["tasks"][0]
    # in flight when the process died: no clock runs for it any more
    assert task["status"] == "running" and task["elapsedMs"] is None


def test_a_run_killed_for_real_is_interrupted(tmp_path):
    project = uikit.gated_example(tmp_path)
    proc = uikit.start_run(project)
    try:
        uikit.wait_for(lambda: (project / ".waiting").exists(), timeout=60)
        live = client(project).get("/api/state").json()["run"]
        assert live["display"] == "running" and live["live"] and live["continue"] is None
    finally:
        uikit.kill_group(proc)
    run = client(project).get("/api/state").json()["run"]
    assert run["display"] == "interrupted"
    assert run["continue"].startswith(f"looprail resume {run['id']} ")


def test_paused_run_continues_with_the_approval(tmp_path):
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    cp = Checkpoint(task_id="01-01/T2", plan_id="01-01", kind="human-verify", name="Look")
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["execute", "wave_running"])
        journal.record(run_id, asked_record(cp, 1))
        journal.finish_run(
            run_id,
            "paused",
            "01-01-PLAN.md: task 01-01/T2 (checkpoint:human-verify) Look needs a human; "
            "run again with --approve 01-01/T2, or answer with: looprail answer . 01-01/T2 approved",
        )
    run = client(project).get("/api/state").json()["run"]
    assert run["continue"].endswith("--approve 01-01/T2")


def test_history_lists_every_run_newest_first_and_a_run_can_be_chosen(tmp_path):
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    with Journal.open(project) as journal:
        first = journal.start_run("1", state=["plan"])
        journal.finish_run(first, "failed", "superseded")
        second = journal.start_run("1", state=["ship"])
        journal.finish_run(second, "shipped")
    c = client(project)
    snap = c.get("/api/state").json()
    assert [r["id"] for r in snap["runs"]] == [second, first]
    assert snap["run"]["id"] == second
    chosen = c.get("/api/state", params={"run": first}).json()["run"]
    assert chosen["id"] == first and chosen["haltReason"] == "superseded"
    assert chosen["continue"] is None
    # a run that does not exist (or a bad value) falls back to the latest
    assert c.get("/api/state", params={"run": "ZZZZ"}).json()["run"]["id"] == second
    assert c.get("/api/state", params={"run": "../x"}).json()["run"]["id"] == second


def test_tokens_and_cost_when_the_runtime_reported_them(tmp_path):
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["execute", "wave_running"])
        journal.wave_started(run_id, 1, [("01-01/T1", "01-01"), ("01-01/T2", "01-01")])
        journal.task_started(run_id, "01-01/T1")
        journal.task_finished(
            run_id, "01-01/T1", data={"usage": {"input_tokens": 1200, "output_tokens": 34}}
        )
        journal.task_started(run_id, "01-01/T2")
        journal.task_finished(run_id, "01-01/T2", data={"tokens": 7, "cost_usd": 0.0125})
    tasks = client(project).get("/api/state").json()["run"]["waves"][0]["plans"][0]["tasks"]
    assert [(t["tokens"], t["cost"]) for t in tasks] == [(1234, None), (7, 0.0125)]


# -- hostile content ----------------------------------------------------------------------------


def test_hostile_strings_come_back_as_data_never_as_markup(tmp_path):
    project, run_id = uikit.hostile_project(tmp_path)
    c = client(project)
    page = c.get("/")
    assert "<img src=x" not in page.text
    assert "&lt;img src=x onerror=alert(1)&gt;&quot;" in page.text
    snap = c.get("/api/state")
    assert snap.headers["content-type"] == "application/json"
    run = snap.json()["run"]
    assert run["haltReason"] == HOSTILE + LONG  # verbatim: the page escapes it (textContent)
    (hook,) = next(p for p in run["points"] if p["point"] == "ship:pre")["hooks"]
    assert hook["capId"] == HOSTILE and hook["results"][0]["message"] == HOSTILE + LONG
    assert run["continue"].startswith(f"looprail resume {run_id} --project '")
    if shutil.which("dot") is not None:
        svg = c.get("/api/chart.svg").content
        root = ET.fromstring(svg)  # well-formed: nothing broke out of its text node
        for node in root.iter():
            assert not node.tag.endswith(("script", "foreignObject", "iframe"))
            assert not [a for a in node.attrib if a.lower().startswith("on")]
        assert "<script>" not in svg.decode()


def test_the_app_answers_only_to_local_host_names(tmp_path):
    c = TestClient(create_app(tmp_path), base_url="http://evil.example")
    assert c.get("/api/state").status_code == 400


def test_static_files_are_served_and_nothing_else(tmp_path):
    c = client(tmp_path)
    js = c.get("/static/app.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    assert "innerHTML" not in js.text and "insertAdjacentHTML" not in js.text
    assert c.get("/static/../server.py").status_code == 404
    assert c.get("/static/index.html").status_code == 404
    assert c.post("/api/state").status_code == 405
    assert "http" not in c.get("/").text.replace("http-equiv", "")  # no CDN, no other origin


# -- live: server-sent events -------------------------------------------------------------------


def test_events_stream_a_snapshot_and_another_when_the_journal_changes(tmp_path):
    import httpx

    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    app = create_app(project, poll_interval=0.05)
    with (
        uikit.serve(app) as url,
        httpx.Client(timeout=10) as http,
        http.stream("GET", f"{url}/api/events") as stream,
    ):
        assert stream.headers["content-type"].startswith("text/event-stream")
        states = []
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("data: "):
                states.append(json.loads(line[6:]))
                if len(states) == 1:
                    assert states[0]["run"] is None  # no run yet
                    with Journal.open(project) as journal:  # another process writes
                        run_id = journal.start_run("1", state=["discuss"])
                else:
                    break
    assert states[1]["run"]["id"] == run_id and states[1]["run"]["state"] == ["discuss"]


# -- the command line ----------------------------------------------------------------------------


def test_cli_serves_and_prints_the_url(tmp_path):
    (tmp_path / ".planning").mkdir()
    proc = subprocess.Popen(
        [uikit.looprail_bin(), "ui", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"looprail ui: {tmp_path} at http://127.0.0.1:")
        assert line.rstrip("\n").endswith("  (Ctrl-C stops)")
        base, _, token = uikit.printed_url(line)
        import httpx

        state = httpx.get(f"{base}/api/state", params={"token": token}, timeout=10)
        assert state.json()["hint"].startswith("No runs yet")
        assert httpx.get(f"{base}/api/state", timeout=10).status_code == 403  # no token
        assert httpx.get(line.split(" at ")[1].split()[0], timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=15)
    assert code == 0, proc.stderr.read()


def test_cli_on_every_interface_warns_first(tmp_path):
    proc = subprocess.Popen(
        [uikit.looprail_bin(), "ui", str(tmp_path), "--port", "0", "--host", "0.0.0.0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        warning = proc.stderr.readline()
        assert warning.startswith("looprail: warning: the dashboard is reachable from the network")
        assert proc.stdout.readline().startswith(f"looprail ui: {tmp_path} at http://")
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0


def test_cli_port_in_use_is_a_one_line_refusal_and_a_missing_folder_a_usage_error(tmp_path, capsys):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        port = sock.getsockname()[1]
        assert main(["ui", str(tmp_path), "--port", str(port)]) == 1
    finally:
        sock.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in err
    assert main(["ui", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err == f"looprail: error: {tmp_path / 'nope'}: no such project folder\n"
    )


def _ui_without_the_extra(project, prefix=None) -> subprocess.CompletedProcess:
    """`looprail ui` where the ui extra cannot be imported, in an environment laid out at
    `prefix` (the markers pipx and uv tool leave there), else this one."""
    code = (
        "import sys\n"
        "sys.modules['starlette'] = None; sys.modules['uvicorn'] = None\n"
        + (f"sys.prefix = {str(prefix)!r}\n" if prefix else "")
        + "from looprail.cli import main\n"
        f"sys.exit(main(['ui', {str(project)!r}]))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_without_the_extra_the_command_says_how_to_install_it(tmp_path):
    # this checkout is installed with pip, editable: the advice keeps it so
    done = _ui_without_the_extra(tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        "looprail: error: looprail ui needs the ui extra: "
        f"{shlex.quote(sys.executable)} -m pip install -e '{REPO}[ui]'\n"
    )


@pytest.mark.parametrize(
    ("marker", "command"),
    [("pipx_metadata.json", "pipx install --force"), ("uv-receipt.toml", "uv tool install")],
)
def test_the_install_advice_follows_pipx_and_uv_tool(tmp_path, marker, command):
    env = tmp_path / "tool-env"
    env.mkdir()
    (env / marker).write_text("{}\n")
    done = _ui_without_the_extra(tmp_path, prefix=env)
    assert done.returncode == 1
    # the same source this looprail came from (a folder here; a wheel or a git commit there)
    assert done.stderr == (
        f"looprail: error: looprail ui needs the ui extra: {command} "
        f"'looprail[ui] @ {REPO.as_uri()}'\n"
    )


def test_the_cli_does_not_import_the_web_stack_until_ui_runs():
    code = (
        "import sys\n"
        "from looprail.cli.app import build_parser\n"
        "build_parser()\n"
        "print(sorted(m for m in ('starlette', 'uvicorn', 'httpx', 'looprail.ui.server') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr


def test_a_hostile_manifest_is_shown_as_data(tmp_path):
    from tests.support import feature, write_capability

    caps = tmp_path / "caps"
    write_capability(
        caps,
        feature(
            "evil",
            title=HOSTILE,
            description=HOSTILE,
            steps=[
                {
                    "point": "plan:post",
                    "ref": {"command": HOSTILE + LONG},
                    "produces": [],
                    "consumes": [],
                    "onError": "skip",
                }
            ],
        ),
    )
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    c = client(project, [caps])
    snap = c.get("/api/state").json()
    assert snap["warnings"] == []
    assert snap["run"] is None  # no run yet
    # with no run the points come from the chart: the command is drawn as text
    if shutil.which("dot") is not None:
        svg = c.get("/api/chart.svg").content
        root = ET.fromstring(svg)
        for node in root.iter():
            assert not node.tag.endswith(("script", "foreignObject"))
            assert not [a for a in node.attrib if a.lower().startswith("on")]
        assert '<script>alert("x")' in " ".join(root.itertext())
    # once a run exists, the points list carries the hook with its command verbatim
    with Journal.open(project) as journal:
        journal.start_run("1", state=["plan"])
    (hook,) = next(
        p for p in c.get("/api/state").json()["run"]["points"] if p["point"] == "plan:post"
    )["hooks"]
    assert hook["capId"] == "evil" and hook["summary"] == "command " + HOSTILE + LONG


def test_the_chart_of_a_big_run_with_long_labels_still_draws(tmp_path):
    """Graphviz refuses HTML labels over 16384 characters: long hook labels are clipped and the
    task table is cut short with a count, so the chart of a large run still renders."""
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["execute", "wave_running"])
        for wave in (1, 2, 3):
            keys = [
                (f"{wave:02d}-{p:02d}/T{t}", f"{wave:02d}-{p:02d}")
                for p in range(40)
                for t in range(5)
            ]
            journal.wave_started(run_id, wave, keys)
        journal.record(
            run_id,
            EventRecord(
                kind="hook",
                point="plan:post",
                cap_id="evil",
                hook_kind="step",
                outcome="failed",
                message=LONG,
                data={"label": LONG},
            ),
        )
        journal.record(run_id, EventRecord(kind="halted", point="plan:post", cap_id="evil"))
        journal.finish_run(run_id, "halted", LONG)
    c = client(project)
    snap = c.get("/api/state").json()
    assert snap["chart"] is True and snap["chartError"] is None
    root = ET.fromstring(c.get("/api/chart.svg").content)
    text = " ".join(root.itertext())
    assert "more" in text and "evil" in text


def test_a_resumed_run_is_no_longer_shown_refused(tmp_path):
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["verify"])
        journal.record(
            run_id, EventRecord(kind="halted", point="ship:pre", cap_id="gate", message="no")
        )
        journal.finish_run(run_id, "halted", "blocked at ship:pre by gate gate: no")
    c = client(project)
    assert c.get("/api/state").json()["run"]["halt"]["point"] == "ship:pre"
    with Journal.open(project) as journal:
        journal.resume_run(run_id)
        journal.finish_run(run_id, "halted", "stopped by a native hook")
    run = c.get("/api/state").json()["run"]
    assert run["halt"] is None and run["haltReason"] == "stopped by a native hook"
