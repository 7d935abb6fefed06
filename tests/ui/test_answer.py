"""Answering a checkpoint from the dashboard (issue 30), at the server level: real runs of a
project whose phase reaches a decision, a human-verify or a secret human-action checkpoint;
the app `looprail ui` serves (with its token) through Starlette's TestClient, a real uvicorn
server and the command itself. The page shows what the terminal shows (the same model and
the same text), an answer goes through `submit_answer`, and the resumed or waiting run uses
it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import warnings
from pathlib import Path

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx`")
    from starlette.testclient import TestClient

from looprail.journal import Journal  # noqa: E402
from looprail.machine.answers import pending_checkpoints  # noqa: E402
from looprail.machine.commands import answer_command  # noqa: E402
from looprail.plans.checkpoint import render  # noqa: E402
from looprail.ui.access import new_token  # noqa: E402
from looprail.ui.server import create_app  # noqa: E402
from tests.support import ui as uikit  # noqa: E402
from tests.support.procs import LOOPRAIL, wait_for  # noqa: E402
from tests.ui.checkpoints import answers_log, checkpoint_project, terminal_run  # noqa: E402

TOKEN = new_token()
SECRET = "sk-live-DASHBOARD-7d1f3a9c"


def paused(root: Path, kind: str) -> Path:
    """The project run to its checkpoint without a terminal: paused, exit 3."""
    project = checkpoint_project(root, kind)
    done = subprocess.run(
        [*LOOPRAIL, "run", str(project), "--phase", "1"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    return project


def client(project: Path) -> TestClient:
    return TestClient(create_app(project, token=TOKEN))


def state(c: TestClient) -> dict:
    response = c.get("/api/state", params={"token": TOKEN})
    assert response.status_code == 200
    return response.json()


def answer(c: TestClient, task: str, text: str):
    return c.post(
        "/api/answer",
        data={"token": TOKEN, "task": task, "answer": text},
        headers={"Origin": "http://testserver"},
    )


def resume(project: Path, command: str) -> subprocess.CompletedProcess:
    argv = command.split()
    assert argv[:2] == ["looprail", "resume"]
    return subprocess.run(
        [*LOOPRAIL, *argv[1:]],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def answer_events(project: Path) -> list:
    with Journal.open_readonly(project) as journal:
        run = journal.latest_run()
        assert run is not None
        return [e for e in journal.events(run.id) if e.kind == "answer"]


def test_a_paused_checkpoint_is_shown_as_the_terminal_shows_it(tmp_path):
    project = paused(tmp_path, "decision")
    snap = state(client(project))
    (cp,) = pending_checkpoints(project)
    shown = snap["checkpoints"]
    assert shown["runId"] == snap["run"]["id"]
    (item,) = shown["items"]
    # one model, one text: what pending_checkpoints gives, and the terminal's rendering of it
    assert {k: v for k, v in item.items() if k not in ("title", "text", "command")} == (
        cp.model_dump(mode="json")
    )
    assert item["text"] == render(cp, 1, 3)
    assert item["command"] == answer_command(str(project), cp)  # what the run prints
    assert item["title"] == "Decision Required" and item["kind"] == "decision"
    assert [(o["id"], o["pros"], o["cons"]) for o in item["options"]] == [
        ("hello", "Plain, understood everywhere", "Dull"),
        ("howdy", "Friendly", "Regional"),
    ]
    assert "Progress: 1/3 tasks complete" in item["text"]
    assert "→ YOUR ACTION: Select: hello or howdy" in item["text"]
    assert snap["writable"] is True
    assert snap["run"]["continue"].endswith("--approve 01-01/T2")
    # shown while another run is on the page (a newer, finished one): the same checkpoint,
    # read through pending_checkpoints instead of the events the page already holds
    with Journal.open(project) as journal:
        other = journal.start_run("2", state=["plan"])
        journal.finish_run(other, "failed", "another phase")
    again = state(client(project))
    assert again["run"]["id"] == other
    assert again["checkpoints"] == shown


def test_an_answer_from_the_dashboard_is_journaled_and_the_resumed_run_uses_it(tmp_path):
    project = paused(tmp_path, "decision")
    c = client(project)
    response = answer(c, "01-01/T2", "howdy")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is True and body["recorded"] == "howdy" and body["kind"] == "chosen"
    (event,) = answer_events(project)
    assert (event.task_id, event.outcome, event.message) == ("01-01/T2", "chosen", "howdy")
    assert event.data["source"] == "dashboard" and event.data["option"] == "howdy"
    snap = state(c)
    assert snap["checkpoints"] is None  # answered: nothing waits any more
    (shown,) = snap["run"]["answers"]
    assert (shown["taskId"], shown["kind"], shown["text"], shown["source"]) == (
        "01-01/T2",
        "chosen",
        "howdy",
        "dashboard",
    )
    # the command the page gives continues with the answer, not with --approve
    command = snap["run"]["continue"]
    assert "--approve" not in command
    done = resume(project, command)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "01-01-T3 secret=0 howdy" in answers_log(project)  # T3's request carried it
    assert state(c)["run"]["status"] == "shipped"


def test_issues_described_on_the_dashboard_go_to_a_fix_up_call_then_it_is_asked_again(tmp_path):
    project = paused(tmp_path, "verify")
    c = client(project)
    (item,) = state(c)["checkpoints"]["items"]
    assert item["kind"] == "human-verify" and "CHECKPOINT: Verification Required" in item["text"]
    issues = "ISSUE-MARK: the greeting is shouted"
    response = answer(c, "01-01/T2", issues)
    assert response.status_code == 200 and response.json()["kind"] == "issues"
    assert response.json()["recorded"] == issues
    snap = state(c)
    assert snap["run"]["answers"][0]["text"] == issues
    done = resume(project, snap["run"]["continue"])
    assert done.returncode == 3, done.stdout + done.stderr  # fixed up, then asked again
    # the fix-up call for the plan carried the user's words verbatim
    assert any("ISSUE-MARK" in line for line in answers_log(project)), answers_log(project)
    (again,) = state(c)["checkpoints"]["items"]
    assert again["task_id"] == "01-01/T2"
    assert answer(c, "01-01/T2", "approved").json()["kind"] == "approved"
    done = resume(project, state(c)["run"]["continue"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert state(c)["run"]["status"] == "shipped"


def test_a_refused_answer_is_its_one_line_reason_and_nothing_is_journaled(tmp_path):
    project = paused(tmp_path, "decision")
    c = client(project)
    for task, text, words in (
        ("01-01/T2", "nextauth", "choose one of: hello, howdy"),
        ("01-01/T2", "approved", "a decision takes an option id"),
        ("01-01/T2", "   ", "an empty answer"),
        ("01-01/T1", "approved", "01-01/T1 is not a checkpoint"),
        ("01-01/T9", "approved", "no task 01-01/T9"),
        ("nonsense", "approved", "is not a task id"),
    ):
        response = answer(c, task, text)
        assert response.status_code == 400, (task, text, response.text)
        error = response.json()["error"]
        assert words in error and "\n" not in error, error
    assert answer_events(project) == []
    assert state(c)["checkpoints"]["items"][0]["task_id"] == "01-01/T2"  # still waiting


def test_a_secret_answer_is_withheld_everywhere_and_reaches_the_next_call(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPRAIL_HOME", str(tmp_path / "home"))
    project = paused(tmp_path, "secret")
    c = client(project)
    (item,) = state(c)["checkpoints"]["items"]
    assert item["secret"] is True and item["kind"] == "human-action"
    response = answer(c, "01-01/T2", SECRET)
    assert response.status_code == 200
    assert response.json()["recorded"] == "answer withheld" and response.json()["withheld"]
    assert SECRET not in response.text
    (event,) = answer_events(project)
    assert event.message == "answer withheld" and event.outcome == "withheld"
    snap = c.get("/api/state", params={"token": TOKEN}).text
    assert SECRET not in snap and "answer withheld" in snap
    done = resume(project, json.loads(snap)["run"]["continue"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr
    # the executor call after the checkpoint had it in its environment (its length logged)
    assert f"01-01-T3 secret={len(SECRET)} -" in answers_log(project)
    # and it is in no file of the project
    for path in project.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET.encode() not in path.read_bytes(), path


def test_the_waiting_run_takes_the_dashboard_s_answer(tmp_path):
    """A run that waits on a terminal (a real pty) goes on with the answer given on the
    dashboard, served by uvicorn, while it waits."""
    project = checkpoint_project(tmp_path, "verify")
    run = terminal_run(project)
    try:
        run.expect("answer> ", timeout=90)  # it asks on the terminal, and waits
        wait_for(lambda: pending_checkpoints(project), timeout=30)
        assert "CHECKPOINT: Verification Required" in run.text
        with uikit.serve(create_app(project, token=TOKEN)) as url:
            response = httpx.post(
                f"{url}/api/answer",
                data={"token": TOKEN, "task": "01-01/T2", "answer": "approved"},
                headers={"Origin": url},
                timeout=30,
            )
            assert response.status_code == 200, response.text
            assert run.wait(timeout=120) == 0, run.text
        assert "answered from dashboard" in run.text
        assert "01-01-T3" in " ".join(answers_log(project))
    finally:
        run.close()


def test_looprail_ui_takes_an_answer_and_logs_neither_it_nor_the_token(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LOOPRAIL_HOME", str(home))
    project = paused(tmp_path, "secret")
    proc = subprocess.Popen(
        [uikit.looprail_bin(), "ui", str(project), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LOOPRAIL_HOME": str(home)},
    )
    try:
        line = proc.stdout.readline()
        base, _, token = uikit.printed_url(line)
        assert line.count(token) == 1
        with httpx.Client(base_url=base, timeout=30) as http:
            assert http.get("/", params={"token": token}).status_code == 200
            assert http.get("/api/state").status_code == 403
            refused = http.post(
                "/api/answer",
                data={"token": token, "task": "01-01/T2", "answer": SECRET},
                headers={"Origin": "http://evil.example"},
            )
            assert refused.status_code == 403 and SECRET not in refused.text
            taken = http.post(
                "/api/answer",
                data={"token": token, "task": "01-01/T2", "answer": SECRET},
                headers={"Origin": base},
            )
            assert taken.status_code == 200 and taken.json()["recorded"] == "answer withheld"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert SECRET not in out + err and token not in out + err  # nothing logged after the line
    assert err == ""
