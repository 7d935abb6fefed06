"""`looprail run` end to end on the bundled example, through the CLI (in process; the first test
runs the real CLI process)."""

from __future__ import annotations

import json

from looprail.points import POINTS
from tests.support import REPO, run_cli

EXAMPLE = REPO / "examples" / "hello-loop"
CAPS = REPO / "examples" / "capabilities"


def test_example_ships(hello):
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS), subprocess=True)
    assert p.returncode == 0, p.stderr
    assert "shipped in" in p.stdout
    assert (hello / "hello" / "page.md").read_text().splitlines() == [
        "# Greetings",
        "Hello, world!",
        "Bonjour, le monde !",
        "Hallo, Welt!",
    ]
    phase = hello / ".planning/phases/01-greeting"
    assert sorted(f.name for f in phase.glob("*-SUMMARY.md")) == [
        "01-01-SUMMARY.md",
        "01-02-SUMMARY.md",
        "01-03-SUMMARY.md",
    ]
    assert "status: passed" in (phase / "01-VERIFICATION.md").read_text()
    # the contribution reached the planner, the skill step, command step and resolver ran
    assert "each language gets its own file" in (phase / "01-01-PLAN.md").read_text()
    assert (phase / "01-STYLE-REPORT.md").exists()
    assert (hello / "CHANGELOG.md").read_text().count("closed") == 2
    assert "⇣ execute:task 01-03/T1 content from demo:HELLO-3" in p.stderr
    # done means verified: every task's own check ran and passed, each plan's must_haves held,
    # and the checks ran again on the merged tree
    assert "unverified" not in p.stdout + p.stderr
    for check in ("grep -qxF 'Hello, world!' hello/en.txt", "grep -qxF '# Greetings'"):
        assert p.stderr.count(f"✓ check {check}") == 2  # after its task, and merged
    assert p.stderr.count("✓ must_haves artifact") == 4
    assert "checks again on the merged tree" in p.stderr
    # the example's role agents return in milliseconds: no liveness banner (issue 39)
    assert "◆ Spawning" not in p.stderr
    for point in POINTS:
        assert f"▸ {point}" in p.stderr


def test_example_blocking_config_halts_naming_gate(hello):
    cfg = hello / ".planning" / "config.json"
    data = json.loads(cfg.read_text())
    data["release"]["allow_ship"] = False
    cfg.write_text(json.dumps(data))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))
    assert p.returncode == 1
    last = p.stderr.strip().splitlines()[-1]
    assert "blocked at ship:pre by gate release-gate" in last and "release.allow_ship" in last
    assert not (hello / "SHIPPED.md").exists()
    s = run_cli("status", "--project", str(hello))
    assert "halted" in s.stdout and "state: verify" in s.stdout
    # flip the switch back: the halted run resumes and ships without re-running any task
    data["release"]["allow_ship"] = True
    cfg.write_text(json.dumps(data))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))
    assert p.returncode == 0, p.stderr
    assert "(0 tasks run," in p.stdout and "resuming run" in p.stderr


def test_run_warns_about_unknown_plan_keys(hello):
    from looprail.testing import plan_markdown

    text = plan_markdown("01", phase="01-greeting").replace("depends_on: []", "depend_on: []")
    (hello / ".planning/phases/01-greeting/01-01-PLAN.md").write_text(text)
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS), "--no-journal")
    warning = (
        "! .planning/phases/01-greeting/01-01-PLAN.md: frontmatter key 'depend_on' is unknown "
        "and ignored (did you mean depends_on?)"
    )
    assert p.stderr.count(warning) == 1, p.stderr


def test_dry_run_prints_all_points_and_runs_nothing(hello):
    before = sorted(str(p) for p in hello.rglob("*"))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS), "--dry-run")
    assert p.returncode == 0, p.stderr
    for point in POINTS:
        assert point in p.stdout
    assert (
        "contribution  into planner" in p.stdout
        and "gate          predicate config-equals; blocking" in p.stdout
    )
    assert sorted(str(p) for p in hello.rglob("*")) == before


def test_unknown_phase_and_missing_project_are_one_line_errors(hello, tmp_path):
    p = run_cli("run", str(hello), "--phase", "7", "--capabilities", str(CAPS))
    assert p.returncode == 1 and "phase 7 not found" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("run", str(tmp_path / "nope"), "--phase", "1")
    assert p.returncode == 2 and "no such project folder" in p.stderr
    p = run_cli("run", str(hello), "--through", "7")  # without --phase: the project loop
    assert p.returncode == 2 and "--through 7: no phase 7 in this project" in p.stderr


def test_no_journal_mode(hello):
    p = run_cli(
        "run", str(hello), "--phase", "1", "--capabilities", str(CAPS), "--no-journal", "-q"
    )
    assert p.returncode == 0, p.stderr
    assert not (hello / ".looprail" / "journal.sqlite").exists()
    # a resume reads the journal: the flag is refused, never silently ignored
    p = run_cli("resume", str(hello), "--no-journal")
    assert p.returncode == 2 and "unrecognized arguments: --no-journal" in p.stderr


def test_phase_token_forms_share_one_run_and_explicit_resume(hello):
    cfg = hello / ".planning" / "config.json"
    data = json.loads(cfg.read_text())
    data["release"]["allow_ship"] = False
    cfg.write_text(json.dumps(data))
    p = run_cli("run", str(hello), "--phase", "01", "--capabilities", str(CAPS), "-q")
    assert p.returncode == 1
    data["release"]["allow_ship"] = True
    cfg.write_text(json.dumps(data))
    p = run_cli("resume", "--project", str(hello), "--capabilities", str(CAPS))
    assert p.returncode == 0, p.stderr
    assert "resuming run" in p.stderr
    h = run_cli("history", "--project", str(hello), "--json")
    runs = json.loads(h.stdout)
    assert len(runs["runs"] if isinstance(runs, dict) else runs) == 1


def test_timeouts_come_from_config(hello):
    cfg = hello / ".planning" / "config.json"
    data = json.loads(cfg.read_text())
    data["looprail"] = {"timeouts": {"task": 0.01}}
    cfg.write_text(json.dumps(data))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS), "-q")
    assert p.returncode == 1 and "timed out" in p.stderr
    data["looprail"] = {"timeouts": {"task": "soon"}}
    cfg.write_text(json.dumps(data))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS), "-q")
    # A bad `looprail` key refuses the run before it starts (exit 1), whichever key it is.
    assert (
        p.returncode == 1 and "looprail.timeouts.task" in p.stderr and "Traceback" not in p.stderr
    )
