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


def _caps_with(tmp_path: Path, *manifests: dict) -> Path:
    caps = tmp_path / "caps"
    shutil.copytree(CAPS, caps)
    for m in manifests:
        write_capability(caps, m)
    return caps


# --------------------------------------------------------------------------- 9: escapes


def test_escape_sequences_from_data_are_never_printed_raw(hello, tmp_path):
    forged = "\x1b[2K\r  ✓ gate pass\x1b]0;pwn\x07"
    (hello / ".planning" / "phases" / f"02-x{forged}").mkdir()
    p = run_cli("phase", "list", "--project", str(hello))
    assert p.returncode == 0
    assert "\x1b" not in p.stdout and "\r" not in p.stdout and "\x07" not in p.stdout
    assert "\\x1b[2K" in p.stdout
    shutil.rmtree(hello / ".planning" / "phases" / f"02-x{forged}")
    # a manifest string reaches a progress line and the journal, then `status`
    gate = _gate()
    gate["check"]["predicate"]["artifact"] = f"NOPE{forged}\n  ✓ shipped.md"
    caps = _caps_with(tmp_path, feature("forger", gates=[gate]))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(caps))
    assert p.returncode == 1, p.stderr
    s = run_cli("status", "--project", str(hello))
    for out in (p.stdout, p.stderr, s.stdout, s.stderr):
        assert "\x1b" not in out and "\r" not in out and "\x07" not in out
        assert "\n  ✓ shipped.md" not in out


# --------------------------------------------------------------------------- 10: \Z, not $


def test_a_skill_name_ending_in_a_newline_is_not_a_plain_name(hello, tmp_path):
    sentinel = tmp_path / "PWNED"
    skill = hello / ".looprail" / "skills" / "gsd-tool\n"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text(f"#!/bin/sh\ntouch {sentinel}\necho '{{}}'\n")
    skill.chmod(0o755)
    step = {"point": "plan:pre", "ref": {"skill": "tool\n"}, "produces": [], "consumes": [],
            "onError": "skip"}
    caps = _caps_with(tmp_path, feature("newline-skill", skills=["tool\n"], steps=[step]))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(caps))
    assert not sentinel.exists()
    assert "refused name 'gsd-tool\\\\n'" in p.stderr or "refused name" in p.stderr, p.stderr
