"""The reference's own CLI-level tests of `loop render-hooks`, ported as data (issue 18).

Each case is one CLI test of the reference (open-gsd/gsd-core `tests/<file>`, named in
`source`): the project it builds, the argv it runs and what it asserts. They run here against
`looprail loop render-hooks` over the 44 first-party manifests; no reference is needed.
They run in-process through `looprail.cli.main` (one real process checks the wiring).
Translations: `--cwd DIR` is `--project DIR`; an overlay under `$GSD_HOME/.gsd/capabilities` is
`$LOOPRAIL_HOME/capabilities` (so `gsd capability remove ID` is
`looprail capability remove --global ID`). Not ported: tests of the reference's in-process
functions (resolveLoopHooks, renderLoopHooks) and the one that needs its runtime-surface
`--config-dir` (looprail has no runtime surfaces).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from types import SimpleNamespace

import pytest

from tests.support import GSD_CAPABILITIES, run_cli, write_capability

pytestmark = pytest.mark.skipif(not GSD_CAPABILITIES.is_dir(), reason="../shared is absent")

ALL_CAPS_ON = {
    "workflow": {
        "ui_phase": True, "ui_review": True, "ui_safety_gate": True,
        "security_enforcement": True, "tdd_mode": True, "code_review": True,
        "nyquist_validation": True, "schema_drift_gate": True, "post_planning_gaps": True,
        "intel": {"enabled": True},
    }
}  # fmt: skip
VP = "workflow"
EMPTY = {"keys": ["activeHooks", "point", "rendered"], "hook_ids": []}


def _load_failed_cap(cap_id: str, points: list[str]) -> dict:
    return {
        "id": cap_id, "role": "feature", "version": "1.0.0", "title": "Load-Failed Gate Cap",
        "description": "ADR-1244 D2 fail-open wiring test", "tier": "standard", "requires": [],
        "engines": {"gsd": ">=99.0.0"},
        "runtimeCompat": {"supported": ["*"], "unsupported": []},
        "skills": [], "agents": [], "hooks": [], "config": {}, "steps": [], "contributions": [],
        "gates": [{"point": p, "check": {"query": "always-pass"}, "blocking": True,
                   "onError": "halt"} for p in points],
    }  # fmt: skip


def _c(source, args, expect, config=..., planning=True, overlay=None):
    return {
        "source": source, "args": args, "expect": expect, "config": config,
        "planning": planning, "overlay": overlay or [],
    }  # fmt: skip


LRH = "loop-render-hooks.test.cjs"
EMP = "loop-hooks-empty-points-e2e.test.cjs"
SHP = "loop-hooks-ship-pre-e2e.test.cjs"
VPO = "loop-hooks-verify-post-e2e.test.cjs"
VP3 = {VP: {"nyquist_validation": True, "security_enforcement": True, "ui_review": True}}
VP0 = {VP: {"nyquist_validation": False, "security_enforcement": False, "ui_review": False}}
ALWAYS_PASS_REMOVE = "looprail capability remove --global "

CASES = [
    # loop-render-hooks.test.cjs: cmdLoopRenderHooks end-to-end
    _c(f"{LRH}:783 plan:pre envelope with ui-phase step", ["plan:pre"],
       {"has": [{"capId": "ui", "kind": "step", "ref": {"skill": "ui-phase"}}],
        "rendered_re": "ui-phase"}, config={VP: {"ui_phase": True}}),
    _c(f"{LRH}:800 no config.json: ui-phase active by schema default", ["plan:pre"],
       {"has": [{"capId": "ui", "ref": {"skill": "ui-phase"}}], "rendered_re": "ui-phase"}),
    _c(f"{LRH}:840 ui_phase=false: ui-phase step absent", ["plan:pre"],
       {"lacks_step": ["ui-phase"]}, config={VP: {"ui_phase": False}}),
    _c(f"{LRH}:855 invalid point exits non-zero", ["plan:mid"],
       {"exit": "nonzero", "stderr_re": "plan:mid|Invalid loop point"}, config={}),
    # --active-cap
    _c(f"{LRH}:898 --active-cap tdd, tdd_mode=true", ["execute:post", "--active-cap", "tdd"],
       {"stdout": "true"}, config={VP: {"tdd_mode": True}}),
    _c(f"{LRH}:907 --active-cap tdd, tdd_mode=false", ["execute:post", "--active-cap", "tdd"],
       {"stdout": "false"}, config={VP: {"tdd_mode": False}}),
    _c(f"{LRH}:916 --active-cap unknown id", ["execute:post", "--active-cap",
       "no-such-capability-xyz"], {"stdout": "false"}, config={VP: {"tdd_mode": False}}),
    _c(f"{LRH}:925 --active-cap with no value", ["execute:post", "--active-cap"],
       {"exit": "nonzero", "stderr_re": "(?i)active-cap"}, config={VP: {"tdd_mode": False}}),
    _c(f"{LRH}:934 --active-cap prints only true/false", ["execute:post", "--active-cap", "tdd"],
       {"stdout_in": ["true", "false"]}, config={VP: {"tdd_mode": True}}),
    # load-failed capability gates fail open (#2009)
    _c(f"{LRH}:1081 load-failed gate cap: no gate, loud warning", ["execute:wave:post"],
       {"lacks": ["load-failed-gate-cap"],
        "warning_has": [ALWAYS_PASS_REMOVE + "load-failed-gate-cap"],
        "warning_re": "(?i)skipped|not enforced|failing open",
        "stderr_has": [ALWAYS_PASS_REMOVE + "load-failed-gate-cap"]},
       overlay=[("load-failed-gate-cap", ["execute:wave:post"])]),
    *[
        _c(f"{LRH}:1118 load-failed cap with gates at ship:pre and verify:post ({p})", [p],
           {"lacks": ["load-failed-two-point-cap"],
            "warning_has": [ALWAYS_PASS_REMOVE + "load-failed-two-point-cap"]},
           overlay=[("load-failed-two-point-cap", ["ship:pre", "verify:post"])])
        for p in ("ship:pre", "verify:post")
    ],
    _c(f"{LRH}:1138 invalid id is withheld from the remove command", ["ship:pre"],
       {"combined_lacks": ["remove Bad;Cap"], "combined_re": r"invalid id \(withheld\)"},
       overlay=[("Bad;Cap", ["ship:pre"])]),
    # loop-hooks-empty-points-e2e.test.cjs
    _c(f"{EMP}:124 discuss:pre: exact empty 3-key envelope", ["discuss:pre"],
       {**EMPTY, "rendered": "_No active hooks at discuss:pre._"}),
    _c(f"{EMP}:136 discuss:pre with every capability key on: still empty", ["discuss:pre"],
       {"hook_ids": [], "rendered": "_No active hooks at discuss:pre._"}, config=ALL_CAPS_ON),
    _c(f"{EMP}:158 missing point exits non-zero with the reference's wording", [],
       {"exit": "nonzero", "combined_re": "(?i)render-hooks requires a .point. argument"}),
    _c(f"{EMP}:165 'discuss:pre ' (trailing space) is not a point", ["discuss:pre "],
       {"exit": "nonzero", "combined_re": r"(?i)Invalid loop point", "combined_re2":
        r"discuss:pre[,\s]"}),
    _c(f"{EMP}:184 discuss:post: exact empty envelope, no warnings", ["discuss:post"],
       {**EMPTY, "rendered": "_No active hooks at discuss:post._", "no_warnings": True},
       config={}),
    _c(f"{EMP}:197 discuss:post with no .planning folder", ["discuss:post"],
       {"hook_ids": [], "rendered": "_No active hooks at discuss:post._"}, planning=False),
    _c(f"{EMP}:260 'discuss:past' exits non-zero and lists the points", ["discuss:past"],
       {"exit": "nonzero", "combined_re": "(?i)discuss:past|Invalid loop point",
        "combined_re2": "discuss:pre"}, config={}),
    _c(f"{EMP}:271 malformed config.json: exit 0, empty hooks", ["discuss:post"],
       {"hook_ids": [], "rendered": "_No active hooks at discuss:post._"},
       config="{invalid json"),
    # loop-hooks-ship-pre-e2e.test.cjs
    _c(f"{SHP}:108 security_enforcement=true: the security gate with its predicate",
       ["ship:pre"],
       {"hook_ids": ["security"],
        "has": [{"capId": "security", "kind": "gate", "blocking": True, "onError": "halt",
                 "when": "workflow.security_enforcement",
                 "check": {"predicate": {"kind": "artifact-frontmatter-equals",
                                         "artifact": "SECURITY.md", "field": "threats_open",
                                         "equals": 0}}}]},
       config={VP: {"security_enforcement": True}}),
    _c(f"{SHP}:135 security_enforcement=false: empty", ["ship:pre"],
       {"hook_ids": [], "rendered": "_No active hooks at ship:pre._"},
       config={VP: {"security_enforcement": False}}),
    _c(f"{SHP}:151 no config.json: the schema default activates the gate", ["ship:pre"],
       {"hook_ids": ["security"], "has": [{"capId": "security", "blocking": True}]}),
    # loop-hooks-verify-post-e2e.test.cjs
    _c(f"{VPO}:118 all on: nyquist, security, ui steps in order", ["verify:post"],
       {"hook_ids": ["nyquist", "security", "ui"],
        "has": [{"capId": "nyquist", "kind": "step", "ref": {"skill": "validate-phase"},
                 "onError": "halt"},
                {"capId": "security", "kind": "step", "ref": {"skill": "secure-phase"},
                 "onError": "halt"},
                {"capId": "ui", "kind": "step", "ref": {"skill": "ui-review"},
                 "onError": "skip"}],
        "rendered_order": ["validate-phase", "secure-phase", "ui-review"]}, config=VP3),
    _c(f"{VPO}:179 no config.json: all three by schema default", ["verify:post"],
       {"hook_ids": ["nyquist", "security", "ui"]}),
    _c(f"{VPO}:216 all off: empty", ["verify:post"],
       {"hook_ids": [], "rendered": "_No active hooks at verify:post._"}, config=VP0),
    *[
        _c(f"{VPO}:252 {off}=false excludes only {cap}", ["verify:post"],
           {"hook_ids": [c for c in ("nyquist", "security", "ui") if c != cap]},
           config={VP: {**VP3[VP], off: False}})
        for off, cap in (("nyquist_validation", "nyquist"), ("security_enforcement", "security"),
                         ("ui_review", "ui"))
    ],
]  # fmt: skip


def _main(argv: list[str]) -> SimpleNamespace:
    """`looprail ARGV` through `looprail.cli.main`, in-process (30 subprocesses cost minutes)."""
    from looprail.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def test_missing_point_through_a_real_process():
    proc = run_cli("loop", "render-hooks", "--raw")
    assert proc.returncode == 2
    assert re.search("(?i)render-hooks requires a .point. argument", proc.stderr)


def _subset(small, big) -> bool:
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and _subset(v, big[k]) for k, v in small.items()
        )
    return small == big and type(small) is type(big)


@pytest.mark.parametrize("case", CASES, ids=[c["source"] for c in CASES])
def test_reference_cli_case(tmp_path, monkeypatch, case):
    project = tmp_path / "project"
    project.mkdir()
    if case["planning"]:
        (project / ".planning").mkdir()
    if case["config"] is not ...:
        cfg = case["config"]
        text = cfg if isinstance(cfg, str) else json.dumps(cfg)
        (project / ".planning" / "config.json").write_text(text)
    home = tmp_path / "lhome"
    for cap_id, points in case["overlay"]:
        write_capability(home / "capabilities", _load_failed_cap(cap_id, points), folder=cap_id)
    argv = ["loop", "render-hooks", *case["args"][:1], "--raw", *case["args"][1:]]
    if "--active-cap" in case["args"]:
        argv.remove("--raw")
    if case["args"][-1:] == ["--active-cap"]:  # a flag with no value is last, as in the test
        argv = [*argv[:-1], "--project", str(project), "--active-cap"]
    else:
        argv += ["--project", str(project)]
    monkeypatch.setenv("LOOPRAIL_HOME", str(home))
    proc = _main([*argv, "--capabilities", str(GSD_CAPABILITIES)])
    e = case["expect"]
    combined = proc.stdout + proc.stderr
    if e.get("exit", 0) == 0:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode != 0
    for key in ("combined_re", "combined_re2"):
        if key in e:
            assert re.search(e[key], combined), combined
    if "stderr_re" in e:
        assert re.search(e["stderr_re"], proc.stderr), proc.stderr
    if "stdout" in e:
        assert proc.stdout.strip() == e["stdout"]
    if "stdout_in" in e:
        assert proc.stdout in [s + "\n" for s in e["stdout_in"]]
    if e.get("exit", 0) != 0 or "stdout" in e or "stdout_in" in e:
        return
    env = json.loads(proc.stdout)
    hooks = env["activeHooks"]
    if "keys" in e:
        assert sorted(env) == e["keys"]
    if "hook_ids" in e:
        assert [h["capId"] for h in hooks] == e["hook_ids"]
    for want in e.get("has", ()):
        assert any(_subset(want, h) for h in hooks), (want, hooks)
    for cap in e.get("lacks", ()):
        assert all(h["capId"] != cap for h in hooks)
    for skill in e.get("lacks_step", ()):
        assert all((h.get("ref") or {}).get("skill") != skill for h in hooks)
    if "rendered" in e:
        assert env["rendered"] == e["rendered"]
    if "rendered_re" in e:
        assert re.search(e["rendered_re"], env["rendered"])
    if "rendered_order" in e:
        positions = [env["rendered"].index(s) for s in e["rendered_order"]]
        assert positions == sorted(positions)
    if e.get("no_warnings"):
        assert "warnings" not in env
    warnings = env.get("warnings", [])
    for text in e.get("warning_has", ()):
        assert any(text in w for w in warnings), warnings
        assert text in proc.stderr
    if "warning_re" in e:
        assert any(re.search(e["warning_re"], w) for w in warnings)
    for text in e.get("stderr_has", ()):
        assert text in proc.stderr
    for text in e.get("combined_lacks", ()):
        assert text not in "\n".join(warnings) + proc.stderr
