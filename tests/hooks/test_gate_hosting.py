"""Gates called as the reference's workflows call them, without the reference: a recording host
tool (given by absolute path) sees the argument each point's workflow passes; a block shows the
host's details in the output, the journal and `report`; the broken-windows ledger."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from looprail.cli import main
from looprail.hooks.gates.checks import CheckContext, Verdict, evaluate_check
from looprail.hooks.gates.ledger import LedgerError, parse_ledger
from tests.support import feature, write_capability
from tests.support.gsd import PHASE, make_gsd_project, write_executables, write_ledger

PHASE_DIR = f".planning/phases/{PHASE}"

FAKE_HOST = """#!{python}
import json, sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
if args[:2] == ["query", "init.plan-phase"]:
    sys.stdout.write("REQ-01, REQ-02")
elif args[:2] == ["windows", "status"]:
    print(json.dumps({{"ok": True, "ledger": {{"open_count": {open_count}}}}}))
else:
    print(json.dumps({{"block": False, "message": ""}}))
"""


def gate(point: str, check: dict, blocking: bool = True, on_error: str = "halt") -> dict:
    return {"point": point, "check": check, "blocking": blocking, "onError": on_error}


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPRAIL_HOME", str(tmp_path / "home"))
    project = make_gsd_project(tmp_path, git=False)
    write_executables(project)
    return project


def fake_host(tmp_path: Path, open_count: int = 0) -> tuple[Path, Path]:
    log = tmp_path / "calls.jsonl"
    tool = tmp_path / "tools" / "fakehost"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(FAKE_HOST.format(python=sys.executable, log=str(log), open_count=open_count))
    tool.chmod(0o755)
    return tool, log


def run(project: Path, caps: Path, *extra: str) -> int:
    return main(
        ["run", "--phase", "1", "--project", str(project), "--capabilities", str(caps), *extra]
    )


def test_each_point_passes_its_workflows_argument_to_the_host(tmp_path, project, capsys):
    caps = tmp_path / "caps"
    write_capability(
        caps,
        feature(
            "gq",
            gates=[
                gate("plan:pre", {"query": "ui.plan-gate"}),
                gate("plan:post", {"query": "gap-analysis.plan-post"}),
                gate("execute:wave:post", {"query": "ui.safety-gate"}),
                gate("execute:post", {"query": "tdd.review-checkpoint"}),
                gate("verify:pre", {"query": "api-coverage.verify-pre"}),
                gate(
                    "verify:pre",
                    {"predicate": {"kind": "command-exit-zero", "command": "true"}},
                ),
            ],
        ),
    )
    tool, log = fake_host(tmp_path)
    assert run(project, caps, "--host-tool", str(tool)) == 0, capsys.readouterr().err
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    checks = [c for c in calls if c[0] == "check"]
    assert checks == [
        ["check", "ui.plan-gate", "1", "--raw"],
        ["check", "gap-analysis.plan-post", PHASE_DIR, "REQ-01, REQ-02", "--raw"],
        ["check", "ui.safety-gate", "1", "--raw"],  # wave 1
        ["check", "ui.safety-gate", "1", "--raw"],  # wave 2
        ["check", "tdd.review-checkpoint", "1", "--raw"],
        ["check", "api-coverage.verify-pre", PHASE_DIR, "--raw"],
        [
            "check",
            "predicate",
            "--predicate",
            '{"kind":"command-exit-zero","command":"true"}',
            "--phase-dir",
            PHASE_DIR,
            "--raw",
        ],
    ]
    # the requirement ids come from the host, as plan-phase.md asks for them
    assert ["query", "init.plan-phase", "1", "--pick", "phase_req_ids"] in calls


def test_lint_and_run_agree_on_an_absolute_host_tool(tmp_path, project, capsys):
    caps = tmp_path / "caps"
    write_capability(caps, feature("gq", gates=[gate("plan:pre", {"query": "ui.plan-gate"})]))
    tool, _log = fake_host(tmp_path)
    args = ["--project", str(project), "--capabilities", str(caps), "--host-tool", str(tool)]
    main(["lint", "--json", *args])
    codes = [f["code"] for f in json.loads(capsys.readouterr().out)["findings"]]
    assert "check-missing" not in codes
    assert run(project, caps, "--host-tool", str(tool)) == 0
    capsys.readouterr()
    relative = "tools/fakehost"
    main(["lint", "--json", *args[:-1], relative])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert any(f["code"] == "check-missing" and "plain name" in f["message"] for f in found), found
    assert run(project, caps, "--host-tool", relative) == 2  # refused before anything runs
    err = capsys.readouterr().err
    assert "--host-tool: refused host tool 'tools/fakehost'" in err and err.count("\n") == 1


def journal_gate_events(project: Path) -> list[dict]:
    with sqlite3.connect(project / ".looprail" / "journal.sqlite") as con:
        con.row_factory = sqlite3.Row
        rows = con.execute(
            "select * from events where kind = 'hook' and hook_kind = 'gate' order by seq"
        ).fetchall()
    return [dict(r) for r in rows]


def test_a_block_shows_and_journals_the_hosts_details(tmp_path, project, capsys):
    caps = tmp_path / "caps"
    write_capability(caps, feature("ui", gates=[gate("plan:pre", {"query": "ui.plan-gate"})]))
    check = project / ".looprail" / "checks" / "ui.plan-gate"
    check.parent.mkdir(parents=True)
    check.write_text(
        "#!/bin/sh\n"
        '[ "$1" = 1 ] || exit 3\n'  # the phase number, as plan-phase.md passes it
        'echo \'{"frontend": true, "hasUiSpec": false, "block": true, "uiSpecPath": null}\'\n'
    )
    check.chmod(0o755)
    assert run(project, caps) == 1
    err = capsys.readouterr().err
    assert "(no message)" not in err
    assert (
        'gate query ui.plan-gate (ui) BLOCKED: details: {"frontend": true, "hasUiSpec": false, '
        '"uiSpecPath": null}' in err
    )
    [event] = journal_gate_events(project)
    assert event["outcome"] == "blocked" and '"hasUiSpec": false' in event["message"]
    assert json.loads(event["data"])["details"] == {
        "frontend": True,
        "hasUiSpec": False,
        "uiSpecPath": None,
    }
    assert main(["report", "--project", str(project)]) == 0
    assert '"frontend": true' in capsys.readouterr().out


# ── the broken-windows ledger ─────────────────────────────────────────────────────────────────


def broken_windows_caps(tmp_path: Path) -> Path:
    caps = tmp_path / "caps"
    predicate = {
        "kind": "artifact-frontmatter-equals",
        "artifact": "WINDOWS.md",
        "field": "open_count",
        "equals": 0,
    }
    write_capability(
        caps, feature("broken-windows", gates=[gate("ship:pre", {"predicate": predicate})])
    )
    return caps


def test_no_ledger_ships_and_an_open_window_halts_at_ship_pre(tmp_path, project, capsys):
    caps = broken_windows_caps(tmp_path)
    assert run(project, caps) == 0, capsys.readouterr().err
    capsys.readouterr()
    write_ledger(project, ["fixed", "open", "open"])
    assert run(project, caps) == 1
    err = capsys.readouterr().err
    assert "blocked at ship:pre by gate broken-windows" in err
    assert "WINDOWS.md has 2 open window(s)" in err


def test_the_ledger_through_the_host_tool(tmp_path, project, capsys):
    caps = broken_windows_caps(tmp_path)
    tool, log = fake_host(tmp_path, open_count=3)
    assert run(project, caps, "--host-tool", str(tool)) == 1
    assert "WINDOWS.md has 3 open window(s)" in capsys.readouterr().err
    assert ["windows", "status", "--raw"] in [json.loads(x) for x in log.read_text().splitlines()]


@pytest.mark.parametrize(
    ("statuses", "edit", "blocks"),
    [
        ([], None, False),
        (["fixed", "waived"], None, False),
        (["open"], None, True),
        (["open"], ("open_count: 1", "open_count: 0"), True),  # counts disagree: fail closed
        ([], ("schema_version: 1", "schema_version: 2"), True),
        ([], ("````json", "```json"), True),
        ([], ("---\nschema", "schema"), True),
        (["fixed"], ('"kind": "todo"', '"kind": "nope"'), True),
    ],
)
def test_ledger_verdicts(tmp_path, project, statuses, edit, blocks):
    write_ledger(project, statuses)
    ledger = project / ".planning" / "WINDOWS.md"
    if edit:
        ledger.write_text(ledger.read_text().replace(*edit))
    ctx = CheckContext(project=project, phase_number="1", point="ship:pre", cap_id="broken-windows")
    result = evaluate_check({"predicate": {"kind": "artifact-exists", "artifact": "x"}}, ctx)
    assert isinstance(result, Verdict) and result.block is blocks, result
    if blocks and statuses != ["open"]:
        assert result.details["readFailed"] is True


def test_parse_ledger_counts_and_errors(tmp_path, project):
    write_ledger(project, ["open", "fixed", "waived", "open"])
    text = (project / ".planning" / "WINDOWS.md").read_text()
    assert parse_ledger(text) == 2
    assert parse_ledger(text.replace("\n", "\r\n")) == 2
    with pytest.raises(LedgerError, match="disagree"):
        parse_ledger(text.replace("waived_count: 1", "waived_count: 2"))
    with pytest.raises(LedgerError, match="missing frontmatter opening"):
        parse_ledger("# nothing\n")


def test_the_gate_is_the_ledger_only_for_broken_windows_at_ship_pre(project):
    write_ledger(project, ["open"])
    check = {"predicate": {"kind": "artifact-exists", "artifact": "ROADMAP.md"}}
    ctx = CheckContext(
        project=project,
        phase_number="1",
        phase_dir=project / PHASE_DIR,
        point="ship:pre",
        cap_id="security",
    )
    result = evaluate_check(check, ctx)
    assert isinstance(result, Verdict) and "ledger" not in (result.details or {})


def test_dry_run_shows_each_gate_call_with_its_argument(tmp_path, project, capsys):
    caps = tmp_path / "caps"
    write_capability(
        caps,
        feature(
            "gq",
            gates=[
                gate("plan:pre", {"query": "ui.plan-gate"}),
                gate("verify:pre", {"query": "api-coverage.verify-pre"}),
                gate("plan:post", {"query": "Bad;query"}),
            ],
        ),
    )
    assert run(project, caps, "--dry-run", "--host-tool", "gsd_run") == 0
    out = capsys.readouterr().out
    assert "gate          query: gsd_run check ui.plan-gate 1 --raw; blocking" in out
    assert f"query: gsd_run check api-coverage.verify-pre {PHASE_DIR} --raw;" in out
    assert "query 'Bad;query' fails the grammar: never run;" in out
    assert run(project, caps, "--dry-run") == 0
    assert "query: .looprail/checks/ui.plan-gate 1;" in capsys.readouterr().out


def test_looprails_own_predicate_kinds_never_go_to_the_host(tmp_path, project, capsys):
    """`artifact-exists` and `config-equals` are unknown to the reference's evaluator: they are
    evaluated by looprail, with the phase folder, at every point."""
    (project / PHASE_DIR / "01-NOTES.md").write_text("notes\n")
    caps = tmp_path / "caps"
    write_capability(
        caps,
        feature(
            "own",
            gates=[
                gate(
                    "execute:wave:post",
                    {"predicate": {"kind": "artifact-exists", "artifact": "NOTES.md"}},
                ),
                gate(
                    "execute:post",
                    {
                        "predicate": {
                            "kind": "config-equals",
                            "key": "workflow.verifier",
                            "equals": True,
                        }
                    },
                ),
            ],
        ),
    )
    tool, log = fake_host(tmp_path)
    assert run(project, caps, "--host-tool", str(tool)) == 0, capsys.readouterr().err
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert not [c for c in calls if c[:2] == ["check", "predicate"]]
