"""Fail loud (issue 12): `looprail run` refuses to start when a hook or gate would be dropped
silently, and the hostile-input holes found by running the CLI are closed. Every test goes through
the CLI (a subprocess or `looprail.cli.main`) and failed before its fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from looprail.cli import main
from tests.conftest import REPO, feature, run_cli, write_capability

EXAMPLE = REPO / "examples" / "hello-loop"
CAPS = REPO / "examples" / "capabilities"


@pytest.fixture
def hello(tmp_path):
    project = tmp_path / "hello-loop"
    shutil.copytree(EXAMPLE, project)
    return project


def _gate(point: str = "ship:pre") -> dict:
    return {
        "point": point,
        "check": {"predicate": {"kind": "artifact-exists", "artifact": "NOPE.md"}},
        "blocking": True,
        "onError": "halt",
    }


# --------------------------------------------------------------------------- nothing dropped


def _assert_refused(p, *needles: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    assert "refusing to start" in p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in p.stderr, p.stderr
    assert "shipped" not in p.stdout


def test_run_refuses_a_missing_capabilities_folder(hello, tmp_path):
    missing = tmp_path / "no-such-caps"
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS),
                "--capabilities", str(missing))
    _assert_refused(p, f"{missing}: capability folder does not exist", "fix: correct the path")
    assert not (hello / ".looprail" / "journal.sqlite").exists()
    assert not list((hello / ".planning/phases/01-greeting").glob("*-SUMMARY.md"))


def test_run_refuses_a_capability_that_failed_to_load(hello, tmp_path):
    caps = tmp_path / "caps"
    shutil.copytree(CAPS, caps)
    (caps / "broken").mkdir()
    (caps / "broken" / "capability.json").write_text('{"id": "broken", "gates": [')
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(caps))
    _assert_refused(p, "capability 'broken' (first-party) failed to load", "not valid JSON",
                    "fix: fix the manifest")
    # one line per problem (+ the summary line)
    assert len([x for x in p.stderr.splitlines() if "error:" in x]) == 2


def test_run_refuses_an_unconsented_project_capability_with_gates(hello):
    write_capability(hello / ".looprail" / "capabilities", feature("extra-gate", gates=[_gate()]))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))
    _assert_refused(p, "project capability 'extra-gate' declares gates at ship:pre",
                    "run `looprail trust`")
    # consent lifts the refusal: the gate is then evaluated (and blocks: NOPE.md is absent)
    t = run_cli("trust", "--project", str(hello), "--yes")
    assert t.returncode == 0, t.stderr
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))
    assert p.returncode == 1 and "BLOCKED" in p.stderr, p.stderr


def test_lint_reports_the_same_as_errors(hello, tmp_path):
    write_capability(hello / ".looprail" / "capabilities", feature("extra-gate", gates=[_gate()]))
    missing = tmp_path / "no-such-caps"
    p = run_cli("lint", "--project", str(hello), "--capabilities", str(CAPS),
                "--capabilities", str(missing), "--json")
    report = json.loads(p.stdout)
    codes = {f["code"]: f for f in report["findings"] if f["severity"] == "error"}
    assert "capability-folder-missing" in codes and "capability-gates-untrusted" in codes
    assert p.returncode == 1


def test_render_hooks_keeps_the_fail_open_warning(hello, tmp_path):
    caps = tmp_path / "caps"
    shutil.copytree(CAPS, caps)
    (caps / "broken").mkdir()
    (caps / "broken" / "capability.json").write_text(
        json.dumps({"id": "broken", "gates": [_gate("verify:pre")]})
    )
    p = run_cli("loop", "render-hooks", "verify:pre", "--raw", "--project", str(hello),
                "--capabilities", str(caps))
    assert p.returncode == 0
    envelope = json.loads(p.stdout)
    assert any("broken" in w for w in envelope.get("warnings", ())), envelope
