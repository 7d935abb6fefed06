"""`looprail run` without `--phase`: the next unfinished phase of the ROADMAP; `--through N` and
`--all` phase after phase in ROADMAP order (decimal phases in their place) until one does not
ship; what counts as finished (the journal, GSD's artifacts, the ROADMAP's checkboxes); the
errors; `status`; `resume` going on with the phases after the run it resumes."""

from __future__ import annotations

import json

from looprail.machine.project import phase_order, project_phases
from tests.support import run_cli
from tests.support.phases import build, done_log, journal_runs, ship_gate, work


def run_json(*args: str):
    out = run_cli("run", *args, "--json")
    return out, json.loads(out.stdout) if out.stdout.strip() else None


def test_run_without_phase_runs_the_next_unfinished_phase_only(tmp_path):
    project = build(tmp_path)
    out, summary = run_json(str(project))
    assert out.returncode == 0, out.stderr
    assert summary["loop"] == "next" and summary["shipped"] == ["1"]
    assert [(r["phase"], r["status"]) for r in journal_runs(project)] == [("1", "shipped")]
    out, summary = run_json(str(project))
    assert summary["shipped"] == ["2"] and summary["finishedBefore"] == ["1"]
    assert done_log(project) == work(1, 2)
    plain = run_cli("run", str(project), "-q")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.count("shipped in") == 1  # one phase, its own summary line
    assert done_log(project) == work(1, 2, 3)
    nothing = run_cli("run", str(project))
    assert (nothing.returncode, nothing.stdout) == (0, "every phase is finished; nothing to run\n")


def test_through_runs_up_to_and_including_phase_n(tmp_path):
    project = build(tmp_path)
    out, summary = run_json(str(project), "--through", "02")
    assert out.returncode == 0, out.stderr
    assert summary["loop"] == "through" and summary["through"] == "2"
    assert summary["shipped"] == ["1", "2"] and summary["notRun"] == []
    assert done_log(project) == work(1, 2)
    again = run_cli("run", str(project), "--through", "2")
    assert again.returncode == 0
    assert again.stdout == "every phase through phase 2 is finished; nothing to run\n"
    out, summary = run_json(str(project), "--through", "3")
    assert summary["shipped"] == ["3"] and summary["finishedBefore"] == ["1", "2"]


DECIMAL_ROADMAP = """\
# Roadmap

## Phase 1: One
## Phase 10: Ten
## Phase 2: Two
### Phase 2.1: Urgent fix (INSERTED)
## Phase 3: Three
#### Phase 2.2: Another fix
"""


def test_decimal_phases_run_in_their_place(tmp_path):
    project = build(tmp_path, DECIMAL_ROADMAP, folders=("02.1-urgent-fix",))
    numbers = [p.number for p in project_phases(project)]
    assert numbers == ["1", "2", "2.1", "2.2", "3", "10"]
    out, summary = run_json(str(project), "--all")
    assert out.returncode == 0, out.stderr
    assert summary["shipped"] == numbers
    assert [r["phase"] for r in journal_runs(project)] == numbers
    folders = sorted(p.name for p in (project / ".planning" / "phases").iterdir())
    assert folders == [
        "01-one",
        "02-two",
        "02.1-urgent-fix",  # the folder that was there is used, not a second one
        "02.2-another-fix",
        "03-three",
        "10-ten",
    ]


def test_phase_order_is_numeric():
    numbers = ["10", "2.10", "2", "1", "2.2", "2.1", "12A", "12"]
    assert sorted(numbers, key=phase_order) == ["1", "2", "2.1", "2.2", "2.10", "10", "12", "12A"]


def test_without_a_roadmap_the_phase_folders_are_the_phases(tmp_path):
    project = build(tmp_path, "", folders=("02-b", "01-a", "01.1-hotfix"))
    out, summary = run_json(str(project), "--all")
    assert out.returncode == 0, out.stderr
    assert summary["shipped"] == ["1", "1.1", "2"]


def test_a_phase_that_halts_stops_the_loop(tmp_path):
    project = build(tmp_path)
    (project / ".gaps-2").write_text("")  # phase 2's verifier reports gaps
    out, summary = run_json(str(project), "--all")
    assert out.returncode == 1
    assert summary["status"] == "halted" and summary["shipped"] == ["1"]
    assert summary["notRun"] == ["3"]
    assert "VERIFICATION.md does not report `status: passed`" in summary["reason"]
    assert [p["status"] for p in summary["phases"]] == ["shipped", "halted"]
    human = run_cli("run", str(project), "--all")
    assert human.returncode == 1
    assert human.stderr.splitlines()[-1].startswith("phases: 2 halted; not run: 3")


def test_finished_is_read_from_gsd_artifacts_and_roadmap_checkboxes(tmp_path):
    roadmap = (
        "# Roadmap\n\n- [x] **Phase 2: Done by hand**\n\n"
        "## Phase 1: Setup\n## Phase 2: Done by hand\n## Phase 3: Last\n"
    )
    project = build(tmp_path, roadmap, folders=("01-setup",))
    phase1 = project / ".planning" / "phases" / "01-setup"
    for name in ("01-01-PLAN.md", "01-01-SUMMARY.md", "01-02-PLAN.md", "01-02-SUMMARY.md"):
        (phase1 / name).write_text("x\n")
    (phase1 / "01-VERIFICATION.md").write_text("---\nstatus: gaps_found\n---\n")
    phases = {p.number: p for p in project_phases(project)}
    assert not phases["1"].finished and phases["1"].status == "executed"  # not verified
    assert phases["2"].finished and "ROADMAP" in phases["2"].why and phases["2"].dir is None
    (phase1 / "01-VERIFICATION.md").write_text("---\nstatus: passed\n---\n")
    phases = {p.number: p for p in project_phases(project)}
    assert phases["1"].finished and phases["1"].status == "complete"
    out, summary = run_json(str(project))
    assert summary["finishedBefore"] == ["1", "2"] and summary["shipped"] == ["3"]
    assert done_log(project) == work(3)


def test_an_unfinished_run_is_resumed_even_when_the_artifacts_look_done(tmp_path):
    project = build(tmp_path)
    caps = ship_gate(tmp_path, project)
    (project / ".block-1").write_text("")
    out, summary = run_json(str(project), "--capabilities", str(caps))
    assert out.returncode == 1 and summary["phases"][0]["status"] == "halted"
    looks = project_phases(project)[0]  # the artifacts alone: finished
    assert looks.plans == looks.summaries == 2 and looks.verification == "passed"
    assert looks.finished
    run_id = summary["phases"][0]["runId"]
    phases = project_phases(project, {"1": (run_id, "halted")})
    assert not phases[0].finished  # its run has not shipped: resumed, not skipped
    whys = {
        status: project_phases(project, {"1": (run_id, status)})[0].why
        for status in ("halted", "paused", "running")
    }
    assert whys == {
        "halted": f"run {run_id} is halted; a run resumes it",
        "paused": f"run {run_id} is paused; a run resumes it",
        "running": f"run {run_id} is running; if it was stopped, a run resumes it",
    }
    (project / ".block-1").unlink()
    out, summary = run_json(str(project), "--capabilities", str(caps))
    assert summary["shipped"] == ["1"] and summary["phases"][0]["resumed"] is True


def test_resume_goes_on_with_the_phases_after_the_run_it_resumes(tmp_path):
    project = build(tmp_path)
    caps = ship_gate(tmp_path, project)
    (project / ".block-2").write_text("")
    out, summary = run_json(str(project), "--all", "--capabilities", str(caps))
    assert out.returncode == 1 and summary["shipped"] == ["1"] and summary["notRun"] == ["3"]
    (project / ".block-2").unlink()
    resumed = run_cli("resume", str(project), "--capabilities", str(caps), "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["loop"] == "all" and summary["shipped"] == ["2", "3"]
    assert summary["finishedBefore"] == ["1"] and summary["phases"][0]["resumed"] is True
    assert done_log(project) == work(1, 2, 3)
    # A run of one phase (--phase N) is resumed alone, as before.
    (project / ".block-1").write_text("")
    single = run_cli("run", str(project), "--phase", "1", "--new", "--capabilities", str(caps))
    assert single.returncode == 1
    (project / ".block-1").unlink()
    alone = run_cli("resume", str(project), "--capabilities", str(caps), "--json")
    assert json.loads(alone.stdout)["phase"] == "1"


def test_status_shows_the_project_phases(tmp_path):
    project = build(tmp_path)
    status = run_cli("status", str(project))
    assert status.stdout.splitlines() == [
        "no runs yet",
        "phases: 1 not started (next) · 2 not started · 3 not started",
    ]
    assert run_cli("run", str(project), "-q").returncode == 0
    status = run_cli("status", str(project))
    assert status.stdout.splitlines()[-1] == (
        "phases: 1 shipped · 2 not started (next) · 3 not started"
    )
    data = json.loads(run_cli("status", str(project), "--json").stdout)
    first = data["phases"][0]
    assert first["number"] == "1" and first["status"] == "shipped" and first["finished"]
    assert first["runId"] == data["run"]["id"] and first["dir"] == "01-setup"
    assert data["phases"][1] == {
        "number": "2",
        "name": "Core Work",
        "dir": None,
        "status": "not started",
        "finished": False,
        "removed": False,
        "why": "not finished",
        "plans": 0,
        "summaries": 0,
        "verification": None,
        "roadmapChecked": False,
        "runId": None,
        "runStatus": None,
    }


def test_errors_are_one_line_and_exit_2(tmp_path):
    project = build(tmp_path)
    out = run_cli("run", str(project), "--through", "9")
    assert out.returncode == 2
    assert out.stderr == (
        "looprail: error: --through 9: no phase 9 in this project (phases: 1, 2, 3)\n"
    )
    for args in (
        ["--through", "x"],
        ["--phase", "1", "--all"],
        ["--through", "2", "--all"],
        ["--phase", "1", "--through", "2"],
    ):
        out = run_cli("run", str(project), *args)
        assert out.returncode == 2, args
        assert "Traceback" not in out.stderr
    dry = run_cli("run", str(project), "--through", "9", "--dry-run")
    assert dry.returncode == 2 and "--through 9: no phase 9 in this project" in dry.stderr
    assert journal_runs(project) == []


def test_dry_run_without_phase_plans_the_next_unfinished_phase(tmp_path):
    project = build(tmp_path)
    out = run_cli("run", str(project), "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["phase"] in ("1", "01")
    assert journal_runs(project) == []


def test_report_shows_the_project_phases_beside_the_run(tmp_path):
    project = build(tmp_path)
    assert run_cli("run", str(project), "--through", "2", "-q").returncode == 0
    runs = journal_runs(project)
    text = run_cli("report", str(project), runs[0]["id"]).stdout
    section = text[text.index("Project phases") :].splitlines()
    assert section == [
        "Project phases",
        f"  1      shipped      Setup  (run {runs[0]['id']})  ← this run",
        f"  2      shipped      Core Work  (run {runs[1]['id']})",
        "  3      not started  Polish & Ship",
    ]
    data = json.loads(run_cli("report", str(project), "--json").stdout)
    assert data["run"]["id"] == runs[1]["id"]
    assert [(p["number"], p["status"]) for p in data["projectPhases"]] == [
        ("1", "shipped"),
        ("2", "shipped"),
        ("3", "not started"),
    ]


def test_a_roadmap_that_names_no_phase_leaves_nothing_to_run(tmp_path):
    """Every milestone archived (`<details>`), as real projects do between milestones: the
    reference lists no phase, and looprail runs none of the old folders again."""
    roadmap = (
        "# Roadmap\n\n<details>\n<summary>v1.0 shipped</summary>\n\n"
        "- [x] Phase 01: Old work (3/3 plans)\n\n## Phase 1: Old work\n\n</details>\n"
    )
    project = build(tmp_path, roadmap, folders=("01-old-work",))
    assert project_phases(project) == []
    out = run_cli("run", str(project))
    assert out.returncode == 0 and out.stdout == (
        "no phase to run: every phase of ROADMAP.md is in an archived milestone (inside "
        "<details>); nothing to run (use --phase N for one)\n"
    )
    dry = run_cli("run", str(project), "--dry-run")
    assert dry.returncode == 0 and "(use --phase N for one)" in dry.stderr
    status = run_cli("status", str(project))
    assert "phases: none (every phase of ROADMAP.md is in an archived milestone" in status.stdout
    assert journal_runs(project) == []
    through = run_cli("run", str(project), "--through", "1")
    assert through.returncode == 2
    assert "no phase 1 in this project (phases: none)" in through.stderr


def test_a_phase_that_pauses_stops_the_loop_and_an_approval_goes_on(tmp_path):
    project = build(tmp_path)
    (project / ".checkpoint-2").write_text("")
    out, summary = run_json(str(project), "--all")
    assert out.returncode == 3, out.stderr
    assert summary["status"] == "paused" and summary["exitCode"] == 3
    assert summary["shipped"] == ["1"] and summary["notRun"] == ["3"]
    status = json.loads(run_cli("status", str(project), "--json").stdout)
    assert [p["status"] for p in status["phases"]] == ["shipped", "paused", "not started"]
    out, summary = run_json(str(project), "--all", "--approve", "02-02/T1")
    assert out.returncode == 0, out.stderr
    assert summary["shipped"] == ["2", "3"] and summary["phases"][0]["resumed"] is True
    # Nothing ran twice; the approved checkpoint needed no executor.
    assert done_log(project) == [w for w in work(1, 2, 3) if w != "task 02-02-T1"]


def test_a_phase_that_cannot_start_stops_the_loop_with_its_one_line_error(tmp_path):
    project = build(tmp_path, folders=("01-setup", "02-core-work"))
    (project / ".planning" / "phases" / "02-core-work" / "02-01-PLAN.md").write_text(
        "---\ndepends_on: [\n---\n"
    )
    out = run_cli("run", str(project), "--all", "-q")
    assert out.returncode == 1
    assert out.stdout.count("shipped in") == 1  # phase 1 shipped first
    errors = [line for line in out.stderr.splitlines() if line.startswith("looprail: error:")]
    assert len(errors) == 1 and "02-01-PLAN.md" in errors[0] and "Traceback" not in out.stderr
    assert [(r["phase"], r["status"]) for r in journal_runs(project)] == [("1", "shipped")]
