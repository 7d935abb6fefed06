"""`looprail ui` in a real browser: Playwright for Python driving the system's chromium,
headless, against a real uvicorn server and real `looprail run` processes. Screenshots go to
the test's temporary folder. Skips when chromium or Playwright is not installed (the CI script
installs both)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import CONFORMANCE, GSD_CAPABILITIES, needs_corpus
from tests.support import ui as uikit

REAL_PROJECTS = CONFORMANCE / "real-projects"

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")
if not uikit.CHROMIUM.exists():
    pytest.skip(f"{uikit.CHROMIUM} is not installed", allow_module_level=True)

from looprail.ui.server import create_app  # noqa: E402

TIMEOUT_MS = 60_000


class Browser:
    """A fresh browser context (its own cookies and storage, like a new profile) and page in
    the session's chromium; records dialogs and page errors."""

    def __init__(self, chromium, root: Path):
        self.shots = root / "screenshots"
        self.shots.mkdir(exist_ok=True)
        self.context = chromium.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        # The whole page: grow the viewport to its height (Playwright's full_page override
        # hangs this headless chromium on some pages), then put it back.
        size = self.page.viewport_size
        height = min(8000, self.page.evaluate("document.documentElement.scrollHeight"))
        self.page.set_viewport_size({"width": size["width"], "height": max(height, 200)})
        self.page.screenshot(path=str(path))
        self.page.set_viewport_size(size)
        assert path.stat().st_size > 10_000
        return path


@pytest.fixture(scope="session")
def chromium():
    """One chromium per test session (starting it is most of a short test's time)."""
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(uikit.CHROMIUM), headless=True, args=uikit.CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def browser(chromium, tmp_path):
    b = Browser(chromium, tmp_path)
    try:
        yield b
    finally:
        b.context.close()
    assert b.errors == [], b.errors


def text(page, selector: str) -> str:
    return page.locator(selector).first.text_content() or ""


def test_follows_a_live_run_shows_a_task_log_and_the_end(browser, tmp_path):
    project = uikit.gated_example(tmp_path)
    app = create_app(project, [str(uikit.CAPABILITIES)], poll_interval=0.1)
    page = browser.page
    with uikit.serve(app) as url:
        page.goto(url)
        page.locator("#notice").get_by_text("No runs yet").wait_for()
        browser.shot("01-empty")
        run = uikit.start_run(project)
        try:
            # the executor is held back: the page shows the wave running, live
            page.locator("button.task.s-running").first.wait_for()
            assert "wave_running" in text(page, ".current-state")
            assert text(page, "#runbar .badge") == "running"
            first_chart = page.locator("#chart").get_attribute("src")
            browser.shot("02-running")

            # a task's log, from .looprail/logs/<run>/ (written as a runtime would)
            run_id = uikit.latest_run_id(project)
            log = project / ".looprail" / "logs" / run_id / "01-01" / "T1.log"
            log.parent.mkdir(parents=True)
            log.write_text("agent: reading the plan\nagent: wrote hello/en.txt <b>ok</b>\n")
            page.locator("button.task[data-key='01-01/T1']").click()
            # the runtime's own log of the running task is listed too (NNN-<kind>-<name>.log)
            page.locator("#task-detail .log-text").nth(1).wait_for()
            names = page.locator("#task-detail .log-name").all_text_contents()
            assert "01-01/T1.log" in names and len(names) == 2
            planted = names.index("01-01/T1.log")
            shown = page.locator("#task-detail .log-text").nth(planted).text_content() or ""
            assert shown.endswith("<b>ok</b>\n")
            # a task that has not started has no log yet
            waiting = page.locator("button.task:not(.s-running):not(.s-done)").first
            waiting_key = waiting.get_attribute("data-key")
            waiting.click()
            page.locator("#task-detail .no-log").wait_for()
            assert text(page, "#task-detail h3") == f"task {waiting_key}"
            page.locator("button.task[data-key='01-01/T1']").click()
            page.locator("#task-detail .log-text").first.wait_for()
            browser.shot("03-task-log")

            (project / ".release").write_text("go")
            page.locator("#runbar .badge", has_text="shipped").wait_for()
            assert run.wait(timeout=120) == 0
        finally:
            if run.poll() is None:
                uikit.kill_group(run)
        page.wait_for_function(
            "src => document.getElementById('chart').getAttribute('src') !== src", arg=first_chart
        )
        assert text(page, ".current-state") == "shipped"
        assert page.locator("button.task.s-done").count() == 4
        assert "demo:HELLO-3" in text(page, "button.task[data-key='01-03/T1'] .tracker")
        assert page.locator("#halt").is_hidden()
        assert page.locator("#history tbody tr").count() == 1
        browser.shot("04-shipped")


def test_a_refused_gate_is_shown_with_its_message_and_the_continue_command(browser, tmp_path):
    project = uikit.gated_example(tmp_path, allow_ship=False)
    assert uikit.run_example(project).returncode == 1
    run_id = uikit.latest_run_id(project)
    app = create_app(project, [str(uikit.CAPABILITIES)], poll_interval=0.1)
    page = browser.page
    with uikit.serve(app) as url:
        page.goto(url)
        point = page.locator(".point.halted-point[data-point='ship:pre']")
        point.wait_for()
        assert "refused here" in (point.text_content() or "")
        assert point.locator(".cap").first.text_content() == "release-gate"
        assert point.locator(".result.refused .badge").first.text_content() == "blocked"
        message = point.locator(".result.refused .msg").first.text_content() or ""
        assert "release.allow_ship is false" in message
        assert text(page, "#runbar .badge") == "halted"
        assert "blocked at ship:pre by gate release-gate" in text(page, "#halt .halt-reason")
        # no --capabilities: the resume uses the ones the run started with (issue 40)
        assert text(page, "#halt .cmd") == f"looprail resume {run_id} --project {project}"
        page.locator("#chart[src]").wait_for(state="attached")
        page.wait_for_function("() => document.getElementById('chart').naturalWidth > 0")
        browser.shot("refused-gate")

        # follow the advice: allow shipping, continue; the page follows the resumed run
        uikit.set_allow_ship(project, True)
        done = uikit.subprocess.run(
            [*text(page, "#halt .cmd").split(), "--accept-changes"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**uikit.os.environ, "PATH": str(Path(uikit.looprail_bin()).parent)},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        page.locator("#runbar .badge", has_text="shipped").wait_for()
        assert page.locator(".point.halted-point").count() == 0


def test_a_killed_run_shows_interrupted(browser, tmp_path):
    project = uikit.gated_example(tmp_path)
    app = create_app(project, [str(uikit.CAPABILITIES)], poll_interval=0.1)
    page = browser.page
    run = uikit.start_run(project)
    try:
        uikit.wait_for(lambda: (project / ".waiting").exists(), timeout=60)
        # Hold the moment, don't race it: the task's start is committed shortly after.
        uikit.wait_for(lambda: uikit.running_task_committed(project), timeout=30)
    finally:
        uikit.kill_group(run)  # SIGKILL: no chance to journal anything
    with uikit.serve(app) as url:
        page.goto(url)
        page.locator("#runbar .badge", has_text="interrupted").wait_for()
        assert text(page, "#halt .halt-title").startswith("Interrupted")
        assert text(page, "#halt .cmd").startswith("looprail resume ")
        assert page.locator("button.task.s-running").count() >= 1
        assert text(page, "button.task.s-running .badge") == "interrupted"
        page.locator("button.task.s-running").first.click()
        page.locator("#task-detail", has_text="runs again on resume").wait_for()
        assert text(page, "#history tbody .badge") == "interrupted"
        browser.shot("interrupted")


def test_hostile_strings_are_shown_as_text(browser, tmp_path):
    project, _ = uikit.hostile_project(tmp_path)
    app = create_app(project, poll_interval=0.1)
    page = browser.page
    with uikit.serve(app) as url:
        page.goto(url)
        page.locator("#runbar .badge", has_text="halted").wait_for()
        point = page.locator(".point[data-point='ship:pre']")
        assert point.locator(".cap").first.text_content() == uikit.HOSTILE
        assert (
            point.locator(".msg").first.text_content() == uikit.HOSTILE + uikit.LONG
        )  # all of it, as text
        assert text(page, "#halt .halt-reason") == uikit.HOSTILE + uikit.LONG
        assert point.locator(".cap").first.text_content() == uikit.HOSTILE
        native = page.locator(".point.native")
        assert native.locator(".cap").first.text_content() == uikit.HOSTILE
        assert native.locator(".msg").first.text_content() == uikit.HOSTILE
        warnings = page.locator("#warnings .warning").all_text_contents()
        assert "⚠ plan:pre: " + uikit.HOSTILE in warnings, warnings
        assert any("no capabilities loaded" in w for w in warnings)  # and why no hooks show
        assert text(page, "#project") == '<img src=x onerror=alert(1)>"'
        assert page.title() == 'looprail · <img src=x onerror=alert(1)>"'
        task = page.locator("button.task").first
        assert task.get_attribute("data-key") == uikit.HOSTILE
        task.click()
        page.locator("#task-detail .no-log").wait_for()
        assert text(page, "#task-detail h3") == "task " + uikit.HOSTILE
        # nothing the strings carry became markup: one script (ours), one image (the chart)
        assert page.evaluate("document.scripts.length") == 1
        assert page.evaluate("document.images.length") == 1
        assert page.evaluate("document.querySelectorAll('[onerror]').length") == 0
        # very long strings wrap inside their boxes: the page does not grow sideways
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        page.wait_for_timeout(500)
        browser.shot("hostile")
    # the server stopped: the page says so (the stream said `bye`) instead of retrying
    page.locator("#conn", has_text="server stopped").wait_for()
    assert browser.dialogs == []


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_the_chart_is_an_image_scripts_in_it_could_never_run(browser, tmp_path):
    project, _ = uikit.hostile_project(tmp_path)
    app = create_app(project, poll_interval=0.1)
    page = browser.page
    with uikit.serve(app) as url:
        page.goto(url)
        page.wait_for_function("() => document.getElementById('chart').naturalWidth > 0")
        assert page.locator("#chart").evaluate("img => img.tagName") == "IMG"
    assert browser.dialogs == []


def test_history_picks_a_past_run_and_the_url_keeps_it(browser, tmp_path):
    from looprail.journal import Journal

    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    with Journal.open(project) as journal:
        old = journal.start_run("1", state=["plan"])
        journal.finish_run(old, "failed", "superseded by a new run")
        new = journal.start_run("1", state=["shipped"])
        journal.finish_run(new, "shipped")
    app = create_app(project, poll_interval=0.1)
    page = browser.page
    with uikit.serve(app) as url:
        page.goto(url)
        page.locator("#runbar code", has_text=new).wait_for()
        rows = page.locator("#history tbody tr")
        assert rows.count() == 2
        page.locator(f"#history tr[data-run='{old}']").click()
        page.locator("#runbar code", has_text=old).wait_for()
        assert text(page, "#runbar .badge") == "failed"
        assert page.url.endswith(f"#run={old}")
        assert "selected" in (
            page.locator(f"#history tr[data-run='{old}']").get_attribute("class") or ""
        )
        page.reload()  # the choice survives a reload
        page.locator("#runbar code", has_text=old).wait_for()
        page.locator(f"#history tr[data-run='{new}']").click()  # the newest: follow it again
        page.locator("#runbar code", has_text=new).wait_for()
        assert "#run=" not in page.url


def test_the_phases_table_shows_the_project_and_a_click_shows_a_phase_s_run(browser, tmp_path):
    """The project's phases (docs/ui.md, "Phases"): ROADMAP order, status, the next phase and
    the one of the run shown; a click on a phase shows its latest run."""
    from tests.support import run_cli
    from tests.support.phases import build, journal_runs

    project = build(tmp_path)
    assert run_cli("run", str(project), "--through", "2", "-q").returncode == 0
    first, second = (r["id"] for r in journal_runs(project))
    page = browser.page
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
        browser.shot("phases")


# -- answering checkpoints (issue 30): the dashboard's one write --------------------------------


def _token_app(project: Path, token: str):
    return create_app(project, token=token, poll_interval=0.1)


def _paused(root: Path, kind: str) -> Path:
    from tests.support.procs import LOOPRAIL
    from tests.ui.checkpoints import checkpoint_project

    project = checkpoint_project(root, kind)
    done = uikit.subprocess.run(
        [*LOOPRAIL, "run", str(project), "--phase", "1"],
        capture_output=True,
        text=True,
        stdin=uikit.subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    return project


def _answers(project: Path) -> list:
    from looprail.journal import Journal

    with Journal.open_readonly(project) as journal:
        run = journal.latest_run()
        return [e for e in journal.events(run.id) if e.kind == "answer"] if run else []


def test_a_checkpoint_is_answered_from_the_page_and_the_waiting_run_goes_on(browser, tmp_path):
    from looprail.machine.answers import pending_checkpoints
    from looprail.ui.access import new_token
    from tests.ui.checkpoints import answers_log, checkpoint_project, terminal_run

    project = checkpoint_project(tmp_path, "decision")
    token = new_token()
    run = terminal_run(project)  # on a pseudo-terminal: it asks, and waits
    page = browser.page
    try:
        run.expect("answer> ", timeout=90)  # read while it runs: nothing blocks on the pty
        uikit.wait_for(lambda: pending_checkpoints(project), timeout=30)
        with uikit.serve(_token_app(project, token)) as url:
            page.goto(f"{url}/?token={token}")
            block = page.locator("#checkpoints .checkpoint[data-task='01-01/T2']")
            block.wait_for()
            shown = block.locator(".checkpoint-text").text_content() or ""
            assert "CHECKPOINT: Decision Required" in shown
            assert "Progress: 1/3 tasks complete" in shown
            assert "howdy - Howdy" in shown and "Pros: Friendly" in shown
            assert "Cons: Regional" in shown
            assert "→ YOUR ACTION: Select: hello or howdy" in shown
            # the terminal shows the same text
            assert "Which greeting should the page use?" in run.text
            assert block.locator("label.option").count() == 2
            browser.shot("checkpoint-decision")
            block.screenshot(path=str(browser.shots / "checkpoint-block.png"))  # docs/ui.md
            block.locator("label.option[data-option='howdy'] input").check()
            block.locator("button.choose").click()
            page.locator(
                "#answers .last-answer", has_text="Recorded for 01-01/T2: howdy"
            ).wait_for()
            assert run.wait(timeout=120) == 0, run.text
            assert "answered from dashboard" in run.text
            page.locator("#runbar .badge", has_text="shipped").wait_for()
            row = page.locator("#answers .answer-row[data-task='01-01/T2']")
            assert "howdy" in (row.text_content() or "")
            assert "from dashboard" in (row.text_content() or "")
            assert page.locator("#checkpoints").is_hidden()
            browser.shot("checkpoint-answered")
        assert "01-01-T3 secret=0 howdy" in answers_log(project)
    finally:
        run.close()


def test_a_paused_run_answered_on_the_page_resumes_with_the_answer(browser, tmp_path):
    from looprail.ui.access import new_token
    from tests.ui.checkpoints import answers_log

    project = _paused(tmp_path, "decision")
    token = new_token()
    page = browser.page
    with uikit.serve(_token_app(project, token)) as url:
        page.goto(f"{url}/?token={token}")
        block = page.locator("#checkpoints .checkpoint[data-task='01-01/T2']")
        block.wait_for()
        assert text(page, "#halt .cmd").endswith("--approve 01-01/T2")
        # an option the decision does not offer (the page offers none such: forged here) is
        # refused with its one-line reason, and nothing is journaled
        block.locator("label.option[data-option='hello'] input").evaluate(
            "radio => { radio.value = 'nextauth'; radio.checked = true; }"
        )
        block.locator("button.choose").click()
        refused = block.locator(".answer-result.refused")
        refused.wait_for()
        assert "choose one of: hello, howdy" in (refused.text_content() or "")
        assert _answers(project) == []
        # chromium logs the refusal's status (400) on the console: that one is expected
        assert browser.errors == [
            "Failed to load resource: the server responded with a status of 400 (Bad Request)"
        ]
        browser.errors.clear()
        block.locator("label.option[data-option='howdy'] input").check()
        block.locator("button.choose").click()
        page.locator("#answers .last-answer", has_text="howdy").wait_for()
        # the run's command now continues with the answer, not with --approve
        page.wait_for_function(
            "() => !document.querySelector('#halt .cmd').textContent.includes('--approve')"
        )
        command = text(page, "#halt .cmd")
        (event,) = _answers(project)
        assert (event.message, event.data["source"]) == ("howdy", "dashboard")
        done = uikit.subprocess.run(
            command.split(),
            capture_output=True,
            text=True,
            timeout=120,
            env={**uikit.os.environ, "PATH": str(Path(uikit.looprail_bin()).parent)},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        page.locator("#runbar .badge", has_text="shipped").wait_for()
    assert "01-01-T3 secret=0 howdy" in answers_log(project)


def test_a_secret_is_typed_unseen_and_never_shown_back(browser, tmp_path, monkeypatch):
    from looprail.ui.access import new_token
    from tests.ui.checkpoints import answers_log

    secret = "sk-live-BROWSER-51c0ffee"
    monkeypatch.setenv("LOOPRAIL_HOME", str(tmp_path / "home"))
    project = _paused(tmp_path, "secret")
    token = new_token()
    page = browser.page
    with uikit.serve(_token_app(project, token)) as url:
        page.goto(f"{url}/?token={token}")
        block = page.locator("#checkpoints .checkpoint[data-task='01-01/T2']")
        block.wait_for()
        assert "CHECKPOINT: Action Required" in (block.text_content() or "")
        field = block.locator("input[name=answer]")
        assert field.get_attribute("type") == "password"
        field.fill(secret)
        block.locator("button.send").click()
        page.locator("#answers .last-answer", has_text="answer withheld").wait_for()
        assert secret not in page.content()
        assert page.locator("input[type=password]").count() == 0 or all(
            v == ""
            for v in page.locator("input[type=password]").evaluate_all("f => f.map(x => x.value)")
        )
        row = page.locator("#answers .answer-row[data-task='01-01/T2']")
        row.wait_for()
        assert "answer withheld" in (row.text_content() or "")
        browser.shot("checkpoint-secret")
        command = text(page, "#halt .cmd")
        done = uikit.subprocess.run(
            command.split(),
            capture_output=True,
            text=True,
            timeout=120,
            env={**uikit.os.environ, "PATH": str(Path(uikit.looprail_bin()).parent)},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        page.locator("#runbar .badge", has_text="shipped").wait_for()
        assert secret not in page.content()
    assert f"01-01-T3 secret={len(secret)} -" in answers_log(project)


EVIL_PAGE = """<!doctype html><html><body>
<form method="post" action="{target}">
<input type="hidden" name="token" value="{guess}">
<input type="hidden" name="task" value="01-01/T2">
<input type="hidden" name="answer" value="hello">
<button id="go" type="submit">win a prize</button>
</form></body></html>"""


def test_a_second_browser_without_the_token_is_refused(browser, chromium, tmp_path):
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    from looprail.ui.access import new_token

    project = _paused(tmp_path, "decision")
    token = new_token()
    with uikit.serve(_token_app(project, token)) as url:
        # the first browser has the printed address: it sees the checkpoint
        browser.page.goto(f"{url}/?token={token}")
        browser.page.locator("#checkpoints .checkpoint[data-task='01-01/T2']").wait_for()

        other = chromium.new_context()
        try:
            page = other.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            response = page.goto(url + "/")
            assert response is not None and response.status == 403
            assert "needs its token" in (page.text_content("body") or "")
            assert page.locator("#checkpoints").count() == 0
            got = page.evaluate(
                """async () => {
                    const state = await fetch('/api/state');
                    const wrong = await fetch('/api/state?token=' + 'x'.repeat(43));
                    const post = await fetch('/api/answer', {method: 'POST',
                        body: new URLSearchParams({token: 'guess', task: '01-01/T2', answer: 'hello'})});
                    return [state.status, wrong.status, post.status, (await post.json()).error];
                }"""
            )
            assert got[:3] == [403, 403, 403] and "needs its token" in got[3]

            # a page of another site (here: another port of this machine) posting a form to
            # the dashboard, even with the right token, is refused by the origin check
            evil = Starlette(
                routes=[
                    Route(
                        "/",
                        lambda request: HTMLResponse(
                            EVIL_PAGE.format(target=f"{url}/api/answer", guess=token)
                        ),
                    )
                ]
            )
            with uikit.serve(evil) as evil_url:
                page.goto(evil_url + "/")
                with page.expect_response(f"{url}/api/answer") as posted:
                    page.click("#go")
                assert posted.value.status == 403
                assert "refused: a same-site request" in posted.value.text()
        finally:
            other.close()
        assert _answers(project) == []
        # the first browser's page is still waiting on the checkpoint
        assert browser.page.locator("#checkpoints .checkpoint").count() == 1


def test_a_hostile_checkpoint_is_shown_as_text(browser, tmp_path):
    """A checkpoint's text comes from a PLAN.md (or a journal) someone else wrote: its name,
    options, pros and cons, and resume signal are shown as text, in the terminal's rendering
    and in the form."""
    from looprail.journal import Journal
    from looprail.machine.answers import asked_record
    from looprail.plans.checkpoint import Checkpoint, CheckpointOption
    from looprail.ui.access import new_token

    project = tmp_path / "p"
    (project / ".planning" / "phases" / "01-x").mkdir(parents=True)
    hostile = uikit.HOSTILE
    cp = Checkpoint(
        task_id="01-01/T2",
        plan_id="01-01",
        kind="decision",
        name=hostile,
        decision=hostile,
        context=hostile,
        options=(
            CheckpointOption(id="a", name=hostile, pros=hostile, cons=hostile),
            CheckpointOption(id="b", name="plain"),
        ),
        resume_signal=hostile,
    )
    with Journal.open(project) as journal:
        run_id = journal.start_run("1", state=["execute", "wave_running"])
        journal.record(run_id, asked_record(cp, 1))
        journal.finish_run(run_id, "paused", "01-01-PLAN.md: task 01-01/T2 needs a human")
    token = new_token()
    page = browser.page
    with uikit.serve(_token_app(project, token)) as url:
        page.goto(f"{url}/?token={token}")
        block = page.locator("#checkpoints .checkpoint[data-task='01-01/T2']")
        block.wait_for()
        shown = block.locator(".checkpoint-text").text_content() or ""
        assert f"Decision: {hostile}" in shown and f"Pros: {hostile}" in shown
        label = block.locator("label.option[data-option='a']").text_content() or ""
        assert label.endswith("a — " + hostile)
        assert page.evaluate("document.scripts.length") == 1
        assert page.evaluate("document.querySelectorAll('[onerror]').length") == 0
        page.wait_for_timeout(300)
    assert browser.dialogs == []


def test_issues_are_described_on_the_page_and_approved_once_fixed(browser, tmp_path):
    from looprail.ui.access import new_token
    from tests.ui.checkpoints import answers_log

    project = _paused(tmp_path, "verify")
    token = new_token()
    page = browser.page
    env = {**uikit.os.environ, "PATH": str(Path(uikit.looprail_bin()).parent)}
    with uikit.serve(_token_app(project, token)) as url:
        page.goto(f"{url}/?token={token}")
        block = page.locator("#checkpoints .checkpoint[data-task='01-01/T2']")
        block.wait_for()
        assert "CHECKPOINT: Verification Required" in (block.text_content() or "")
        assert "How to verify:" in (block.text_content() or "")
        block.locator("textarea[name=answer]").fill("ISSUE-MARK: the greeting is shouted")
        block.locator("button.send").click()
        page.locator("#answers .last-answer", has_text="(issues)").wait_for()
        page.wait_for_function(
            "() => !document.querySelector('#halt .cmd').textContent.includes('--approve')"
        )
        done = uikit.subprocess.run(
            text(page, "#halt .cmd").split(), capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 3, done.stdout + done.stderr  # fixed up, asked again
        assert any("ISSUE-MARK" in line for line in answers_log(project))
        # asked again: the page shows the checkpoint again; this time it is approved
        page.locator("#halt .cmd", has_text="--approve 01-01/T2").wait_for()
        block = page.locator("#checkpoints .checkpoint[data-task='01-01/T2']")
        block.wait_for()
        assert block.locator(".answer-result").is_hidden()  # asked again: a clean form
        block.locator("button.approve").click()
        page.locator("#answers .last-answer", has_text="approved").wait_for()
        page.wait_for_function(
            "() => !document.querySelector('#halt .cmd').textContent.includes('--approve')"
        )
        done = uikit.subprocess.run(
            text(page, "#halt .cmd").split(), capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        page.locator("#runbar .badge", has_text="shipped").wait_for()
        kinds = page.locator("#answers .answer-row .badge").all_text_contents()
        assert kinds == ["issues", "approved"]


def _chart_box(page) -> dict:
    page.locator("#chart[src]").wait_for(state="attached")
    page.wait_for_function("() => document.getElementById('chart').naturalWidth > 0")
    page.wait_for_timeout(300)  # placed on load
    return page.evaluate(
        "() => { const i = document.getElementById('chart'), b = document.getElementById("
        "'chart-box'); return {img: i.clientWidth, natural: i.naturalWidth, box: b.clientWidth,"
        " top: b.scrollTop, scroll: b.scrollHeight - b.clientHeight}; }"
    )


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_the_chart_scrolls_down_to_the_state_the_run_is_in(browser, tmp_path):
    project = uikit.gated_example(tmp_path, allow_ship=False)
    assert uikit.run_example(project).returncode == 1  # halted at ship:pre, standing in verify
    app = create_app(project, [str(uikit.CAPABILITIES)], poll_interval=0.1)
    with uikit.serve(app) as url:
        browser.page.goto(url)
        box = _chart_box(browser.page)
    assert box["img"] <= box["box"], box
    assert box["scroll"] > 0 and box["top"] > box["scroll"] / 3, box  # verify is low down


@needs_corpus
@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_a_chart_of_the_reference_capabilities_is_never_cut_off_on_the_right(browser, tmp_path):
    project = shutil.copytree(REAL_PROJECTS / "itsvetkov1+XtraSkill", tmp_path / "p")
    app = create_app(project, [str(GSD_CAPABILITIES)], poll_interval=0.1)
    page = browser.page
    with uikit.serve(app) as url:
        page.goto(url)
        box = _chart_box(page)
        assert box["img"] <= box["box"], box  # the legend's end is in the box
        page.set_viewport_size({"width": 900, "height": 1000})  # a narrow window
        box = _chart_box(page)
        assert box["natural"] * 0.75 > box["box"], box  # 3/4 of it would not fit here
        assert box["img"] <= box["box"], box  # fitted to the box, nothing cut off
        page.locator("#chart").click()  # zoom in: its natural size, scrolling sideways
        page.wait_for_function(
            "() => document.getElementById('chart').clientWidth "
            "=== document.getElementById('chart').naturalWidth"
        )
        browser.shot("reference-capabilities")
