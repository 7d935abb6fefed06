"""Differential: every first-party gate of the 44 GSD manifests, looprail's verdict against the
reference's, on projects built in several states.

- query gates: looprail (through `LocalRuntime(host_tool=…)`, the way `run --host-tool` calls
  it) against `node $LOOPRAIL_REFERENCE check <query> <argument> --raw` with the argument the
  reference's workflow passes at that point (written here as data, read from
  gsd-core/workflows/*.md); the argv looprail sent is recorded and compared too;
- the security predicate at ship:pre: looprail's own evaluation (no host tool) against
  `check predicate --predicate JSON --phase-dir DIR --raw`;
- broken-windows at ship:pre: looprail's own ledger reader against `windows status --raw`
  (ship.md: `open_count == 0` passes, anything unreadable blocks).

Skips without LOOPRAIL_REFERENCE (and node, git) or without ../shared.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from looprail.hooks.gates.checks import CheckContext, CheckError, Verdict, evaluate_check
from looprail.runtime.base import DispatchContext
from looprail.runtime.local import LocalRuntime
from tests.support import GSD_CAPABILITIES
from tests.support.gsd import PHASE, make_gsd_project, write_ledger

REFERENCE = os.environ.get("LOOPRAIL_REFERENCE")

pytestmark = [
    pytest.mark.skipif(not REFERENCE, reason="LOOPRAIL_REFERENCE is not set"),
    pytest.mark.skipif(not GSD_CAPABILITIES.is_dir(), reason="../shared conformance not here"),
    pytest.mark.skipif(
        not (shutil.which("node") and shutil.which("git")), reason="needs node and git"
    ),
]

PHASE_DIR = f".planning/phases/{PHASE}"
# What each workflow passes after `gsd_run check <query>` (plan-phase.md §5.6 and §13,
# execute-phase.md wave post and execute:post, verify-work.md verify_pre_hooks).
WORKFLOW_ARGS = {
    "plan:pre": ["1"],
    "plan:post": [PHASE_DIR, "REQ-01, REQ-02"],
    "execute:wave:post": ["1"],
    "execute:post": ["1"],
    "verify:pre": [PHASE_DIR],
}


def first_party_gates() -> list[dict[str, Any]]:
    gates = []
    for manifest in sorted(GSD_CAPABILITIES.glob("*/capability.json")):
        data = json.loads(manifest.read_text())
        for gate in data.get("gates", []):
            gates.append({**gate, "capId": data["id"]})
    return gates


def git(project: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env.update({"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    subprocess.run(["git", *args], cwd=project, env=env, check=True, timeout=30)


# ── project states ────────────────────────────────────────────────────────────────────────────


def state_base(project: Path) -> None:
    """Plans cover both requirements; no UI, no API, no TDD plans."""


def state_frontend(project: Path) -> None:
    """A frontend phase, UI files changed in the last commit, no UI-SPEC; a plan misses the
    requirements; a TDD plan without gate commits; a plan integrating an external API."""
    roadmap = project / ".planning" / "ROADMAP.md"
    roadmap.write_text(
        roadmap.read_text().replace(
            "Build the demo", "Build the dashboard UI with React components and a settings page"
        )
    )
    phase = project / PHASE_DIR
    for plan in ("01", "02", "03"):
        path = phase / f"01-{plan}-PLAN.md"
        path.write_text(path.read_text().replace("REQ-01, REQ-02", "none"))
    first = phase / "01-01-PLAN.md"
    first.write_text(
        first.read_text()
        .replace("type: execute", "type: tdd")
        .replace(
            "<objective>",
            "<objective>\nIntegrate the Stripe API: call the Stripe SDK to create charges and "
            "handle Stripe webhooks.\n",
        )
    )
    (project / "src" / "components").mkdir(parents=True)
    (project / "src" / "components" / "Button.tsx").write_text("export const B = 1;\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "ui")


def state_frontend_with_spec(project: Path) -> None:
    state_frontend(project)
    (project / PHASE_DIR / "01-UI-SPEC.md").write_text("# UI spec\n")


STATES = {"base": state_base, "frontend": state_frontend, "spec": state_frontend_with_spec}


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name, build in STATES.items():
        project = make_gsd_project(tmp_path_factory.mktemp(name))
        build(project)
        out[name] = project
    return out


@pytest.fixture(scope="module")
def recording_tool(tmp_path_factory) -> tuple[Path, Path]:
    """A host tool that records its argv (one JSON line per call) and then is the reference."""
    folder = tmp_path_factory.mktemp("host")
    log = folder / "calls.jsonl"
    tool = folder / "gsd_run"
    tool.write_text(
        "#!/bin/sh\n"
        f"node -e 'console.log(JSON.stringify(process.argv.slice(1)))' -- \"$@\" >> '{log}'\n"
        f'exec node "{REFERENCE}" "$@"\n'
    )
    tool.chmod(0o755)
    return tool, log


def reference(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", REFERENCE, *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def reference_block(project: Path, *args: str) -> bool:
    result = reference(project, *args, "--raw")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["block"]


def context(project: Path, gate: dict[str, Any]) -> CheckContext:
    return CheckContext(
        project=project,
        phase_number="1",
        phase_dir=project / PHASE_DIR,
        point=gate["point"],
        cap_id=gate["capId"],
    )


QUERY_GATES = [g for g in first_party_gates() if "query" in g["check"]]


def test_the_corpus_has_the_gates_this_file_covers():
    gates = first_party_gates()
    shapes = {(g["capId"], g["point"], json.dumps(g["check"], sort_keys=True)) for g in gates}
    assert len(gates) == len(shapes) == 10
    assert len(QUERY_GATES) == 8
    assert {g["capId"] for g in gates if "predicate" in g["check"]} == {
        "security",
        "broken-windows",
    }


@pytest.mark.parametrize("state", list(STATES))
@pytest.mark.parametrize(
    "gate",
    QUERY_GATES,
    ids=[f"{g['capId']}-{g['point']}-{g['check']['query']}" for g in QUERY_GATES],
)
def test_query_gate_verdicts_equal_the_references(projects, recording_tool, state, gate):
    project = projects[state]
    tool, log = recording_tool
    log.write_text("")
    runtime = LocalRuntime(project, host_tool=str(tool), progress=lambda _line: None)
    ctx = context(project, gate)
    target = DispatchContext(
        project=project,
        phase_number="1",
        phase_dir=project / PHASE_DIR,
        point=gate["point"],
        cap_id=gate["capId"],
    )
    ours = evaluate_check(gate["check"], ctx, runtime, runtime_ctx=target)
    assert isinstance(ours, Verdict), ours
    query = gate["check"]["query"]
    args = WORKFLOW_ARGS[gate["point"]]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls[-1] == ["check", query, *args, "--raw"]
    assert ours.block is reference_block(project, "check", query, *args)


# ── the security predicate at ship:pre ────────────────────────────────────────────────────────

SECURITY_VALUES = ["0", '"0"', "'0'", "0.0", "00", "+0", "1", "false", "", "[0]", "0 # c", None]


@pytest.mark.parametrize("value", SECURITY_VALUES)
def test_security_gate_own_evaluation_equals_the_references(tmp_path, value):
    project = make_gsd_project(tmp_path, git=False)
    gate = next(g for g in first_party_gates() if g["capId"] == "security")
    if value is not None:
        (project / PHASE_DIR / "01-SECURITY.md").write_text(
            f"---\nthreats_open: {value}\n---\n# Security\n"
        )
    ours = evaluate_check(gate["check"], context(project, gate))  # no runtime: looprail's own
    assert isinstance(ours, Verdict), ours
    predicate = json.dumps(gate["check"]["predicate"])
    theirs = reference_block(
        project, "check", "predicate", "--predicate", predicate, "--phase-dir", PHASE_DIR
    )
    assert ours.block is theirs, (value, ours)


# ── broken-windows at ship:pre ───────────────────────────────────────────────────────────────


def _ledger_states() -> dict[str, Any]:
    def missing(p: Path) -> None:
        pass

    def counts_disagree(p: Path) -> None:
        write_ledger(p, ["open"])
        ledger = p / ".planning" / "WINDOWS.md"
        ledger.write_text(ledger.read_text().replace("open_count: 1", "open_count: 0"))

    def crlf(p: Path) -> None:
        write_ledger(p, ["fixed"])
        ledger = p / ".planning" / "WINDOWS.md"
        ledger.write_bytes(ledger.read_bytes().replace(b"\n", b"\r\n"))

    def no_frontmatter(p: Path) -> None:
        (p / ".planning" / "WINDOWS.md").write_text("# just notes\n")

    return {
        "missing": missing,
        "empty-ledger": lambda p: write_ledger(p, []),
        "fixed-and-waived": lambda p: write_ledger(p, ["fixed", "waived"]),
        "one-open": lambda p: write_ledger(p, ["fixed", "open"]),
        "counts-disagree": counts_disagree,
        "crlf": crlf,
        "no-frontmatter": no_frontmatter,
    }


LEDGER_STATES = _ledger_states()


@pytest.mark.parametrize("state", list(LEDGER_STATES))
def test_broken_windows_gate_equals_the_references_ledger_status(tmp_path, state):
    project = make_gsd_project(tmp_path, git=False)
    LEDGER_STATES[state](project)
    gate = next(g for g in first_party_gates() if g["capId"] == "broken-windows")
    ours = evaluate_check(gate["check"], context(project, gate))
    assert isinstance(ours, Verdict) and not isinstance(ours, CheckError), ours
    status = reference(project, "windows", "status", "--raw")
    # ship.md: `.ledger.open_count // "?"`; "0" passes, anything else (a count, or a failed
    # read) blocks
    try:
        open_count = json.loads(status.stdout)["ledger"]["open_count"]
    except (ValueError, KeyError, TypeError):
        open_count = None
    assert ours.block is (open_count != 0), (state, ours, status.stdout, status.stderr)


def test_the_states_are_not_vacuous(projects):
    """The states make gates go both ways (else the comparison above proves little)."""
    assert reference_block(projects["frontend"], "check", "ui.plan-gate", "1") is True
    assert reference_block(projects["spec"], "check", "ui.plan-gate", "1") is False
    assert reference_block(projects["frontend"], "check", "api-coverage.verify-pre", PHASE_DIR)
    assert not reference_block(projects["base"], "check", "api-coverage.verify-pre", PHASE_DIR)
