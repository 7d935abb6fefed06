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


def test_the_page_shows_the_phases_and_a_click_shows_a_phase_s_run(tmp_path):
    """In a real browser (skips without chromium and Playwright, as tests/ui/test_browser.py)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from tests.support import ui as uikit

    if not uikit.CHROMIUM.exists():
        pytest.skip(f"{uikit.CHROMIUM} is not installed")
    project = build(tmp_path)
    assert run_cli("run", str(project), "--through", "2", "-q").returncode == 0
    first, second = (r["id"] for r in journal_runs(project))
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(uikit.CHROMIUM), headless=True, args=uikit.CHROMIUM_ARGS
        )
        try:
            page = chromium.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.on("pageerror", lambda e: errors.append(str(e)))
            with uikit.serve(create_app(project, poll_interval=0.1)) as url:
                page.goto(url)
                page.locator("#runbar code", has_text=second).wait_for()
                rows = page.locator("#phases tbody tr")
                assert rows.count() == 3
                cells = [rows.nth(i).locator("td").all_text_contents() for i in range(3)]
                assert [c[:3] for c in cells] == [
                    ["1", "Setup", "shipped"],
                    ["2", "Core Work", "shipped"],
                    ["3", "Polish & Ship · next", "not started"],
                ]
                assert cells[0][3:5] == ["2/2 summaries", first]
                assert "selected" in (rows.nth(1).get_attribute("class") or "")
                assert "next" in (rows.nth(2).get_attribute("class") or "")
                rows.nth(0).click()  # phase 1: its run is shown
                page.locator("#runbar code", has_text=first).wait_for()
                assert page.url.endswith(f"#run={first}")
                assert "selected" in (rows.nth(0).get_attribute("class") or "")
                page.screenshot(path=str(tmp_path / "phases.png"))
        finally:
            chromium.close()
    assert errors == []
