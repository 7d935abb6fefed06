"""`looprail capability audit`: every surface that can run is listed, with where it is declared."""

from __future__ import annotations

import json

from looprail.hooks.native.parsing import read_hooks_file
from looprail.trust.audit import capability_surfaces, native_surfaces, render_text, suspect_surfaces
from tests.support import GSD_CAPABILITIES, feature, needs_corpus, run_cli, write_capability

RICH = feature(
    "rich",
    skills=["lint"],
    agents=["reviewer"],
    hooks=[{"event": "PreToolUse", "script": "hooks/pre.sh", "matcher": "Bash"}],
    commands=[{"family": "rich", "module": "rich.cjs", "router": "route", "subcommands": ["go"]}],
    config={"rich.on": {"type": "boolean", "default": True}},
    steps=[
        {
            "point": "plan:pre",
            "ref": {"skill": "lint"},
            "produces": [],
            "consumes": [],
            "onError": "skip",
        },
        {
            "point": "plan:post",
            "ref": {"agent": "reviewer"},
            "produces": [],
            "consumes": [],
            "onError": "skip",
        },
        {
            "point": "execute:post",
            "ref": {"command": "rich go"},
            "produces": [],
            "consumes": [],
            "onError": "skip",
            "supportsReviewerLanes": True,
        },
        {
            "point": "execute:post",
            "ref": {"command": "rich; rm -rf ~"},
            "produces": [],
            "consumes": [],
            "onError": "skip",
        },
    ],
    contributions=[
        {
            "point": "plan:pre",
            "into": "planner",
            "fragment": {"inline": "be careful"},
            "produces": [],
            "consumes": [],
        }
    ],
    gates=[
        {
            "point": "ship:pre",
            "check": {
                "predicate": {"kind": "command-exit-zero", "command": "make test", "timeout": 5}
            },
            "blocking": True,
            "onError": "halt",
        },
        {
            "point": "ship:pre",
            "check": {"predicate": {"kind": "artifact-exists", "artifact": "SECURITY.md"}},
            "blocking": True,
            "onError": "halt",
        },
        {
            "point": "verify:pre",
            "check": {"query": "rich check"},
            "blocking": False,
            "onError": "skip",
        },
        {
            "point": "verify:pre",
            "check": {"query": "rich `id`"},
            "blocking": False,
            "onError": "skip",
        },
        {
            "point": "verify:post",
            "check": {"agentVerdict": {"ref": "reviewer", "prompt": "ok?"}},
            "blocking": False,
            "onError": "skip",
        },
    ],
    taskContentResolver={
        "trackerPrefix": "jira",
        "invoke": {"binary": "jira", "args": ["show", "{{id}}"], "timeoutMs": 5000},
    },
)


def by_where(surfaces):
    return {s.where: s for s in surfaces}


def test_every_kind_of_surface_is_listed_with_its_json_path():
    surfaces = by_where(capability_surfaces(RICH))
    assert set(surfaces) == {
        "$.steps[0].ref.skill",
        "$.steps[1].ref.agent",
        "$.steps[2].ref.command",
        "$.steps[3].ref.command",
        "$.contributions[0].fragment",
        "$.gates[0].check.predicate.command",
        "$.gates[1].check.predicate",
        "$.gates[2].check.query",
        "$.gates[3].check.query",
        "$.gates[4].check.agentVerdict",
        "$.taskContentResolver.invoke",
        "$.hooks[0].script",
        "$.commands[0]",
    }
    assert ".looprail/skills/gsd-lint" in surfaces["$.steps[0].ref.skill"].runs
    assert ".looprail/agents/reviewer" in surfaces["$.steps[1].ref.agent"].runs
    command = surfaces["$.steps[2].ref.command"]
    assert ".looprail/commands/rich go --phase <N> --raw" in command.runs
    assert "reviewer lanes" in command.note and command.refused is None
    predicate = surfaces["$.gates[0].check.predicate.command"]
    assert (
        predicate.shell and predicate.timeout_s == 5 and "/bin/sh -c 'make test'" in predicate.runs
    )
    assert ".looprail/checks/rich check <phase dir>" in surfaces["$.gates[2].check.query"].runs
    assert "jira show {{id}}" in surfaces["$.taskContentResolver.invoke"].runs
    assert (
        surfaces["$.hooks[0].script"].host_only
        and "hooks/pre.sh" in surfaces["$.hooks[0].script"].runs
    )
    assert "rich.cjs" in surfaces["$.commands[0]"].runs
    # Shell only where a shell really runs.
    assert [s.where for s in surfaces.values() if s.shell] == ["$.gates[0].check.predicate.command"]


def test_strings_failing_the_grammar_are_refused_and_flagged_as_suspect():
    surfaces = capability_surfaces(RICH)
    suspects = [s.where for s in suspect_surfaces(surfaces)]
    assert suspects == ["$.steps[3].ref.command", "$.gates[3].check.query"]
    shown = by_where(surfaces)["$.steps[3].ref.command"]
    assert "rich; rm -rf ~" in shown.runs and "never runs" in shown.refused


@needs_corpus
def test_reviewer_lanes_show_probe_and_invoke():
    codex = json.loads((GSD_CAPABILITIES / "codex" / "capability.json").read_text())
    kimi = json.loads((GSD_CAPABILITIES / "kimi-code" / "capability.json").read_text())
    ollama = json.loads((GSD_CAPABILITIES / "ollama" / "capability.json").read_text())
    codex_s = by_where(capability_surfaces(codex))
    assert "looks up codex on PATH" in codex_s["$.reviewer.probe"].runs
    assert codex_s["$.reviewer.invoke"].runs.startswith("codex exec --ephemeral {{model}}")
    assert codex_s["$.reviewer.invoke"].timeout_s == 1200
    assert "orchestratorExec" in " ".join(codex_s)  # a runtime body's command, host-only
    kimi_s = by_where(capability_surfaces(kimi))
    assert kimi_s["$.reviewer.probe"].runs.startswith("kimi --help")
    assert kimi_s["$.reviewer.probe"].timeout_s == 5
    ollama_s = by_where(capability_surfaces(ollama))
    assert (
        ollama_s["$.reviewer.invoke"].refused
        and "unsupported" in ollama_s["$.reviewer.invoke"].refused
    )


@needs_corpus
def test_nothing_declared_in_the_reference_corpus_is_left_out():
    for manifest in sorted(GSD_CAPABILITIES.glob("*/capability.json")):
        data = json.loads(manifest.read_text())
        surfaces = capability_surfaces(data)
        kinds = [s.kind for s in surfaces]
        where = manifest.parent.name
        assert sum(k.startswith("step") for k in kinds) == len(data.get("steps") or []), where
        gate_surfaces = [s for s in surfaces if s.kind.startswith("gate")]
        assert len(gate_surfaces) == len(data.get("gates") or []), where
        assert kinds.count("contribution") == len(data.get("contributions") or []), where
        assert kinds.count("host-hook") == len(data.get("hooks") or []), where
        assert kinds.count("command-family") == len(data.get("commands") or []), where
        assert ("taskContentResolver" in kinds) == ("taskContentResolver" in data), where
        assert kinds.count("reviewer.invoke") == (1 if "reviewer" in data else 0), where
        assert not suspect_surfaces(surfaces), where
        assert render_text  # rendering never fails on real manifests


def test_native_hooks_list_every_when_and_shell(tmp_path):
    path = tmp_path / "hooks.json"
    path.write_text(
        json.dumps(
            {
                "local": {
                    "guard": {
                        "description": "d",
                        "event": "task_call",
                        "when": "test -f x",
                        "shell": "make check",
                    },
                    "plain": {
                        "description": "d",
                        "event": "plan:pre",
                        "shell": "true",
                        "default": False,
                    },
                    "stop": {
                        "description": "d",
                        "event": "plan:pre",
                        "action": {"type": "interrupt", "outcome": "pass"},
                    },
                }
            }
        )
    )
    hooks_file = read_hooks_file(path, scope="global")
    assert hooks_file.status == "valid", hooks_file.issues
    surfaces = by_where(native_surfaces(hooks_file.hooks))
    assert (
        surfaces["$.local.guard.when"].shell and "test -f x" in surfaces["$.local.guard.when"].runs
    )
    assert surfaces["$.local.guard.shell"].runs == "/bin/sh -c 'make check'"
    assert surfaces["$.local.guard.shell"].timeout_s == 5
    assert not surfaces["$.local.plain.shell"].shell  # exact "true" never spawns
    assert "off unless enabled" in surfaces["$.local.plain.shell"].note
    assert surfaces["$.local.stop.action"].runs.startswith("Action interrupt")


def test_audit_cli_lists_capabilities_and_both_hooks_files(tmp_path, _isolated_home):
    project = tmp_path / "project"
    first_party = tmp_path / "fp"
    write_capability(first_party, RICH)
    write_capability(project / ".looprail" / "capabilities", feature("third"))
    (project / ".looprail" / "hooks.json").write_text(
        json.dumps({"local": {"p": {"description": "d", "event": "plan:pre", "shell": "touch x"}}})
    )
    home = _isolated_home / ".looprail"
    home.mkdir()
    (home / "hooks.json").write_text(
        json.dumps({"local": {"g": {"description": "d", "event": "plan:pre", "shell": "echo g"}}})
    )
    p = run_cli(
        "capability",
        "audit",
        "--json",
        "--project",
        str(project),
        "--capabilities",
        str(first_party),
    )
    assert p.returncode == 0, p.stderr
    audit = json.loads(p.stdout)
    caps = {c["id"]: c for c in audit["capabilities"]}
    assert caps["third"]["active"] is False and "no consent" in caps["third"]["reason"]
    assert len(caps["rich"]["surfaces"]) == 13
    files = {h["scope"]: h for h in audit["nativeHooks"]}
    assert files["project"]["trusted"] is False
    assert files["project"]["surfaces"][0]["runs"] == "/bin/sh -c 'touch x'"
    assert files["global"]["surfaces"][0]["runs"] == "/bin/sh -c 'echo g'"

    text = run_cli(
        "capability", "audit", "rich", "--project", str(project), "--capabilities", str(first_party)
    )
    assert text.returncode == 0
    assert "REFUSED" in text.stdout and "SHELL" in text.stdout and "native hooks" not in text.stdout
    missing = run_cli("capability", "audit", "nope", "--project", str(project))
    assert missing.returncode == 2 and "no capability 'nope'" in missing.stderr


def test_audit_lists_failed_capabilities_as_running_nothing(tmp_path):
    project = tmp_path / "project"
    write_capability(project / ".looprail" / "capabilities", feature("broken", tier="mega"))
    p = run_cli("capability", "audit", "--project", str(project))
    assert p.returncode == 0
    assert "capability broken (project) — FAILED TO LOAD, nothing from it runs" in p.stdout


def test_a_dotted_reference_query_runs_as_argv_and_a_bad_one_is_refused():
    gates = [
        {"point": "verify:pre", "check": {"query": q}, "blocking": True, "onError": "halt"}
        for q in ("verify.schema-drift", "ui safety-gate", "x\ny")
    ]
    surfaces = capability_surfaces(feature("drift", gates=gates))
    assert [bool(s.refused) for s in surfaces] == [False, False, True]
    assert surfaces[0].runs.startswith(
        ".looprail/checks/verify.schema-drift <phase dir> "
        "(or `<host tool> check verify.schema-drift <phase dir> --raw`)"
    )
    assert [s.where for s in suspect_surfaces(surfaces)] == ["$.gates[2].check.query"]
    assert "x\\ny" in surfaces[2].runs  # shown escaped, on one line
