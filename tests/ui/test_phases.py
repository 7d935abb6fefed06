"""The dashboard shows the project's phases as well as the current run: `project.roadmap` in
`/api/state` (ROADMAP order, where each phase stands, the next one, the one of the run shown),
drawn by the page's Phases table."""

from __future__ import annotations

import warnings

import pytest

from looprail.ui.data import snapshot
from tests.support import REPO, run_cli
from tests.support.phases import build, journal_runs

pytest.importorskip("starlette")
pytest.importorskip("httpx")

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx`")
    from starlette.testclient import TestClient

from looprail.ui.server import create_app


def roadmap(snap: dict) -> list[tuple]:
    return [(p["number"], p["status"], p["next"], p["current"]) for p in snap["project"]["roadmap"]]


def test_the_state_carries_the_project_phases(tmp_path):
    project = build(tmp_path)
    # Before any run: every phase, the first one next, no run shown.
    assert roadmap(snapshot(project)) == [
        ("1", "not started", True, False),
        ("2", "not started", False, False),
        ("3", "not started", False, False),
    ]
    assert run_cli("run", str(project), "--through", "2", "-q").returncode == 0
    snap = TestClient(create_app(project, [])).get("/api/state").json()
    assert roadmap(snap) == [
        ("1", "shipped", False, False),
        ("2", "shipped", False, True),  # the latest run is phase 2's
        ("3", "not started", True, False),
    ]
    first = journal_runs(project)[0]["id"]
    assert snap["project"]["roadmap"][0]["runId"] == first
    assert snap["project"]["roadmap"][2]["name"] == "Polish & Ship"
    # A past run chosen (by a prefix, as the page's URL may carry it): its phase is current.
    past = snapshot(project, run_ref=first[:10])
    assert [p["current"] for p in past["project"]["roadmap"]] == [True, False, False]


def test_a_folder_without_planning_has_no_phases(tmp_path):
    assert snapshot(tmp_path)["project"]["roadmap"] == []


def test_the_page_draws_the_phases_table_as_text():
    static = REPO / "looprail" / "ui" / "static"
    page = (static / "index.html").read_text()
    assert 'id="phases-panel"' in page and 'id="phases"' in page
    script = (static / "app.js").read_text()
    body = script[script.index("function renderPhases") :]
    body = body[: body.index("function renderHistory")]
    assert "snap.project.roadmap" in body and "innerHTML" not in body
