"""`looprail lint`: deliberately broken projects, one problem each, and the finding it yields."""

from __future__ import annotations

import json
import shutil

import pytest

from looprail.lint import Finding, LintReport, lint, lint_project, load_input, render_text
from looprail.testing import plan_markdown, task
from tests.support import REPO, feature, run_cli, write_capability, write_config

ROLES = ("orchestrator", "planner", "executor", "verifier")


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    (root / ".planning" / "phases" / "01-test").mkdir(parents=True)
    (root / ".looprail").mkdir()
    write_config(root, {})
    for role in ROLES:  # the role agents `run` needs (tests of their absence remove them)
        executable(root, f"agents/{role}")
    return root


@pytest.fixture
def caps(tmp_path):
    return tmp_path / "caps"


def findings(project, caps, **kw) -> list[Finding]:
    return lint_project(project, [caps] if caps.exists() else [], **kw).findings


def codes(found) -> list[tuple[str, str]]:
    return [(f.severity, f.code) for f in found]


def one(found, code) -> Finding:
    matching = [f for f in found if f.code == code]
    assert len(matching) == 1, (code, found)
    return matching[0]


def step(point, *, ref=None, produces=(), consumes=(), on_error="skip", **kw):
    return {
        "point": point,
        "ref": ref or {"command": "noop"},
        "produces": list(produces),
        "consumes": list(consumes),
        "onError": on_error,
        **kw,
    }


def gate(point, check, *, blocking=True, on_error="halt", **kw):
    return {"point": point, "check": check, "blocking": blocking, "onError": on_error, **kw}


def executable(project, rel):
    path = project / ".looprail" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho \'{"block": false, "message": ""}\'\n')
    path.chmod(0o755)


def write_plan(project, plan, **kw):
    path = project / ".planning" / "phases" / "01-test" / f"01-{plan}-PLAN.md"
    path.write_text(plan_markdown(plan, **kw))
    return path


# --------------------------------------------------------------------------- clean


def test_the_example_project_is_clean(tmp_path):
    copy = tmp_path / "hello"
    shutil.copytree(REPO / "examples" / "hello-loop", copy)
    report = lint_project(copy, [REPO / "examples" / "capabilities"])
    assert report.findings == []
    assert report.exit_code == 0
    assert render_text(report) == "no problems found\n"


# --------------------------------------------------------------------------- capabilities


def test_manifest_errors_name_file_and_path(project, caps):
    bad = feature("broken", gates=[gate("ship:pre", {"query": "x"})])
    bad["version"] = "one"
    write_capability(caps, bad)
    f = one(findings(project, caps), "manifest-invalid")
    assert f.severity == "error"
    assert f.file.endswith("broken/capability.json") and f.path == "$.version"
    assert "not loaded" in f.message and "gates at ship:pre are not evaluated" in f.message
    assert f.fix.startswith("fix $.version")


def test_inactive_capability_is_a_note(project, caps):
    write_capability(
        caps,
        feature(
            "opt",
            config={"opt.on": {"type": "boolean", "default": False}},
            activationKey="opt.on",
            steps=[step("plan:pre")],
        ),
    )
    f = one(findings(project, caps), "capability-inactive")
    assert f.severity == "info" and "opt.on" in f.fix
    write_config(project, {"opt": {"on": True}})
    assert "capability-inactive" not in [f.code for f in findings(project, caps)]


# --------------------------------------------------------------------------- artifacts


@pytest.mark.parametrize(
    ("point", "consumes", "ok"),
    [
        ("plan:post", "PLAN.md", True),  # the host writes PLAN.md at plan:post
        ("plan:pre", "PLAN.md", False),  # ... not before
        ("plan:pre", "CONTEXT.md", True),
        ("discuss:pre", "CONTEXT.md", False),
        ("verify:post", "UAT.md", True),
        ("ship:pre", "VERIFICATION.md", True),
        ("plan:pre", "NOTES.md", False),  # nothing produces it
    ],
)
def test_consumes_against_host_artifacts(project, caps, point, consumes, ok):
    executable(project, "commands/noop")
    write_capability(caps, feature("c", steps=[step(point, consumes=[consumes])]))
    found = [f for f in findings(project, caps) if f.code == "consumes-unsatisfied"]
    assert (found == []) is ok, found
    if not ok:
        assert found[0].severity == "error" and found[0].path == "$.steps[0].consumes[0]"


def test_consumes_produced_by_another_hook(project, caps):
    executable(project, "commands/noop")
    write_capability(caps, feature("a", steps=[step("plan:pre", produces=["UI-SPEC.md"])]))
    write_capability(caps, feature("b", steps=[step("plan:post", consumes=["UI-SPEC.md"])]))
    write_capability(caps, feature("c", steps=[step("discuss:post", consumes=["UI-SPEC.md"])]))
    found = [f for f in findings(project, caps) if f.code == "consumes-unsatisfied"]
    assert [f.file.split("/")[-2] for f in found] == ["c"]
    assert "produced only later (a at plan:pre)" in found[0].message


def test_consuming_your_own_output(project, caps):
    executable(project, "commands/noop")
    write_capability(
        caps, feature("self", steps=[step("plan:pre", produces=["X.md"], consumes=["X.md"])])
    )
    f = one(findings(project, caps), "consumes-unsatisfied")
    assert "it is its own output" in f.message


def test_consumes_whose_only_producer_is_switched_off(project, caps):
    executable(project, "commands/noop")
    write_capability(
        caps,
        feature(
            "a",
            config={"a.on": {"type": "boolean", "default": False}},
            steps=[step("plan:pre", produces=["UI-SPEC.md"], when="a.on")],
        ),
    )
    write_capability(caps, feature("b", steps=[step("plan:post", consumes=["UI-SPEC.md"])]))
    f = one(findings(project, caps), "consumes-inactive")
    assert f.severity == "warning" and "does not run under the current config" in f.message


def test_two_producers_of_one_artifact_at_one_point(project, caps):
    executable(project, "commands/noop")
    write_capability(caps, feature("a", steps=[step("plan:pre", produces=["X.md"])]))
    write_capability(
        caps,
        feature(
            "b",
            contributions=[
                {
                    "point": "plan:pre",
                    "into": "planner",
                    "fragment": {"inline": "hi"},
                    "produces": ["X.md"],
                    "consumes": [],
                }
            ],
        ),
    )
    f = one(findings(project, caps), "duplicate-producer")
    assert f.severity == "error" and "'X.md' is produced twice at plan:pre" in f.message


# --------------------------------------------------------------------------- gates


def test_gate_whose_when_is_never_true(project, caps):
    write_capability(
        caps,
        feature(
            "sec",
            config={"sec.on": {"type": "boolean", "default": False}},
            gates=[gate("ship:pre", {"query": "sec check"}, when="sec.on")],
        ),
    )
    found = findings(project, caps)
    f = one(found, "gate-never-runs")
    assert f.severity == "warning" and f.path == "$.gates[0].when"
    assert "check-missing" not in [x.code for x in found]  # not reported while it cannot run


def test_dotted_query_passes_the_grammar(project, caps):
    write_capability(caps, feature("ui", gates=[gate("plan:pre", {"query": "ui.plan-gate"})]))
    found = findings(project, caps)
    assert "query-grammar" not in [f.code for f in found]
    assert "no executable .looprail/checks/ui.plan-gate" in one(found, "check-missing").message


@pytest.mark.parametrize(
    ("query", "fix"),
    [
        ("UI.Plan_Gate", "write it as `ui.plan-gate`"),  # keeps the dot the host's router reads
        ("verify  schema-drift", "write it as `verify schema-drift`"),
        ("ui..plan-gate", "write it as `ui.plan-gate`"),
        ("$(id)", "use lowercase dotted words separated by single spaces"),
    ],
)
def test_query_grammar_fix_keeps_dots(project, caps, query, fix):
    write_capability(caps, feature("ui", gates=[gate("plan:pre", {"query": query})]))
    f = one(findings(project, caps), "query-grammar")
    assert f.severity == "error" and f.path == "$.gates[0].check.query"
    assert f.fix == fix
    assert "use spaces" not in f.fix


def test_bad_query_on_an_advisory_skip_gate_is_a_warning(project, caps):
    advisory = gate("plan:pre", {"query": "UI.plan"}, blocking=False, on_error="skip")
    write_capability(caps, feature("ui", gates=[advisory]))
    assert one(findings(project, caps), "query-grammar").severity == "warning"


def test_query_without_a_check_executable(project, caps):
    write_capability(caps, feature("ui", gates=[gate("plan:pre", {"query": "ui plan-gate"})]))
    write_capability(
        caps,
        feature(
            "adv",
            gates=[gate("plan:pre", {"query": "adv look"}, blocking=False, on_error="skip")],
        ),
    )
    found = findings(project, caps)
    missing = {f.file.split("/")[-2]: f for f in found if f.code == "check-missing"}
    assert (
        missing["ui"].severity == "error"
        and "no executable .looprail/checks/ui" in missing["ui"].message
    )
    assert missing["adv"].severity == "warning"
    executable(project, "checks/ui")
    executable(project, "checks/adv")
    assert "check-missing" not in [f.code for f in findings(project, caps)]


def test_query_with_a_host_tool(project, caps):
    write_capability(caps, feature("ui", gates=[gate("plan:pre", {"query": "ui plan-gate"})]))
    assert "check-missing" not in [f.code for f in findings(project, caps, host_tool="sh")]
    f = one(findings(project, caps, host_tool="no-such-tool-xyz"), "check-missing")
    assert "host tool no-such-tool-xyz not found on PATH" in f.message


def test_lint_and_run_agree_on_the_host_tool_spelling(project, caps, tmp_path):
    """An absolute path is accepted by both; a relative one is refused by both."""
    import shutil

    from looprail.runtime.local import resolve_host_tool

    write_capability(caps, feature("ui", gates=[gate("plan:pre", {"query": "ui plan-gate"})]))
    sh = shutil.which("sh")
    assert "check-missing" not in [f.code for f in findings(project, caps, host_tool=sh)]
    assert not isinstance(resolve_host_tool(sh), str)
    f = one(findings(project, caps, host_tool="bin/sh"), "check-missing")
    assert f.message.endswith(f"{resolve_host_tool('bin/sh')}, so the query can never run")


@pytest.mark.parametrize(
    ("command", "blocking", "expected"),
    [
        ("no-such-program-xyz --check", True, "error"),
        ("no-such-program-xyz", False, "warning"),
        ("FOO=1 no-such-program-xyz", True, "error"),
        ("./bin/missing-check", True, "error"),
        ("test -f README.md", True, None),
        ("sh -c 'exit 0'", True, None),
        ('"$HOME/bin/check"', True, None),  # decided at run time
        ("(cd src && make check)", True, None),  # a subshell: no program named "(cd"
        ("(no-such-program-xyz)", True, "error"),
        ("{ true; }", True, None),
        ("true&&make check", True, None),  # the first program is `true`, not `true&&make`
        ("VAR=1; no-such-program-xyz", True, "error"),  # only an assignment before it
        ("2>/dev/null test -f README.md", True, None),  # a redirection first
    ],
)
def test_predicate_command_that_is_not_there(project, caps, command, blocking, expected):
    check = {"predicate": {"kind": "command-exit-zero", "command": command}}
    write_capability(caps, feature("cmd", gates=[gate("ship:pre", check, blocking=blocking)]))
    found = [f for f in findings(project, caps) if f.code == "predicate-command-missing"]
    assert [f.severity for f in found] == ([expected] if expected else [])
    if blocking and expected:
        assert "always refuses" in found[0].message


def test_predicate_kind_and_fields(project, caps):
    write_capability(
        caps,
        feature(
            "p",
            gates=[
                gate("ship:pre", {"predicate": {"kind": "file-smells-nice"}}),
                gate(
                    "ship:pre",
                    {"predicate": {"kind": "artifact-frontmatter-equals", "artifact": "S.md"}},
                ),
            ],
        ),
    )
    # The manifest's own validation refuses both (a discriminated union per kind): the
    # capability is not loaded, and lint says where.
    found = [f for f in findings(project, caps) if f.code == "manifest-invalid"]
    assert sorted(f.path for f in found) == [
        "$.gates[0].check.predicate.kind",
        "$.gates[1].check.predicate.equals",
        "$.gates[1].check.predicate.field",
    ]
    assert all(f.severity == "error" for f in found)
    assert "unknown kind 'file-smells-nice'" in found[0].message


def test_config_equals_gate_that_refuses_now(project, caps):
    check = {"predicate": {"kind": "config-equals", "key": "release.ok", "equals": True}}
    write_capability(caps, feature("rel", gates=[gate("ship:pre", check)]))
    f = one(findings(project, caps), "gate-blocks")
    assert f.severity == "warning" and "config key release.ok is not set" in f.message
    write_config(project, {"release": {"ok": True}})
    assert "gate-blocks" not in [f.code for f in findings(project, caps)]


def test_agent_verdict_agent_missing(project, caps):
    check = {"agentVerdict": {"ref": "reviewer", "prompt": "look"}}
    write_capability(caps, feature("av", gates=[gate("verify:post", check, blocking=False)]))
    f = one(findings(project, caps), "agent-missing")
    assert f.severity == "warning" and f.fix == "add an executable .looprail/agents/reviewer"


# --------------------------------------------------------------------------- steps


def test_steps_whose_executables_are_missing(project, caps):
    write_capability(
        caps,
        feature(
            "s",
            skills=["lint"],
            agents=["mapper"],
            steps=[
                step("plan:post", ref={"skill": "lint"}, on_error="halt"),
                step("plan:pre", ref={"agent": "mapper"}),
                step("execute:wave:post", ref={"command": "changelog append"}),
                step("ship:post", ref={"command": "Bad.Command"}),
            ],
        ),
    )
    found = findings(project, caps)
    by_code = {f.code: f for f in found}
    assert by_code["skill-missing"].message.endswith("the loop halts here (onError halt)")
    assert "no executable .looprail/skills/gsd-lint" in by_code["skill-missing"].message
    assert by_code["agent-missing"].path == "$.steps[1].ref.agent"
    assert by_code["command-missing"].fix == "add an executable .looprail/commands/changelog"
    assert by_code["command-grammar"].severity == "error"
    assert {f.severity for f in found if f.code.endswith("-missing")} == {"warning"}
    for rel in ("skills/gsd-lint", "agents/mapper", "commands/changelog"):
        executable(project, rel)
    assert [f.code for f in findings(project, caps)] == ["command-grammar"]
    # another flavor looks for its own skill id
    assert "skill-missing" in [f.code for f in findings(project, caps, flavor="msd")]


# --------------------------------------------------------------------------- plans


def test_dangling_depends_on(project, caps):
    write_plan(project, "01", depends_on=["07"])
    f = one(findings(project, caps), "plan-dependency-missing")
    assert f.severity == "error"
    assert f.file == ".planning/phases/01-test/01-01-PLAN.md"
    assert "'07' names no plan of phase 1: the run halts this plan" in f.message


def test_plan_cycle(project, caps):
    write_plan(project, "01", depends_on=["02"])
    write_plan(project, "02", depends_on=["01"])
    f = one(findings(project, caps), "plan-dag")
    assert f.severity == "error" and "cycle" in f.message
    assert f.file.endswith("-PLAN.md")


def test_unknown_frontmatter_keys_warn_with_a_did_you_mean(project, caps):
    write_plan(project, "01")
    text = plan_markdown("02").replace("depends_on: []", 'depend_on: ["01"]\nautonomus: false')
    (project / ".planning" / "phases" / "01-test" / "01-02-PLAN.md").write_text(text)
    found = [f for f in findings(project, caps) if "frontmatter key" in f.message]
    assert [(f.severity, f.file) for f in found] == [
        ("warning", ".planning/phases/01-test/01-02-PLAN.md")
    ] * 2
    assert sorted(f.message for f in found) == [
        "frontmatter key 'autonomus' is unknown and ignored (did you mean autonomous?)",
        "frontmatter key 'depend_on' is unknown and ignored (did you mean depends_on?)",
    ]
    assert all(f.fix == "rename the key to the one suggested" for f in found)
    r = run_cli("lint", str(project), "--json")
    assert r.returncode == 0, r.stderr
    messages = [f["message"] for f in json.loads(r.stdout)["findings"]]
    assert any("did you mean depends_on?" in m for m in messages)


def test_gsd_extra_frontmatter_keys_are_quiet(project, caps):
    text = plan_markdown("01").replace("depends_on: []", "depends_on: []\ngap_closure: true")
    (project / ".planning" / "phases" / "01-test" / "01-01-PLAN.md").write_text(text)
    assert not [f for f in findings(project, caps) if "frontmatter key" in f.message]


def test_role_agents_the_local_runtime_needs(project, caps):
    for role in ROLES:
        (project / ".looprail" / "agents" / role).unlink()
    found = [f for f in findings(project, caps) if f.code == "role-agent-missing"]
    assert [(f.severity, f.file) for f in found] == [
        ("error", f".looprail/agents/{role}") for role in sorted(ROLES)
    ]
    by_role = {f.file.rsplit("/", 1)[1]: f.message for f in found}
    assert "(phase 1 discuss, phase 1 ship)" in by_role["orchestrator"]
    assert "(phase 1 execute)" in by_role["executor"]
    assert "`looprail run` halts there" in by_role["planner"]
    # work already done needs no agent: context, plans with summaries, a passed verification
    phase = project / ".planning" / "phases" / "01-test"
    (phase / "01-CONTEXT.md").write_text("ctx")
    write_plan(project, "01")
    (phase / "01-01-SUMMARY.md").write_text("done")
    (phase / "01-VERIFICATION.md").write_text("---\nstatus: passed\n---\n")
    found = [f for f in findings(project, caps) if f.code == "role-agent-missing"]
    assert [f.file for f in found] == [".looprail/agents/orchestrator"]  # ship still runs
    assert "(phase 1 ship)" in found[0].message
    executable(project, "agents/orchestrator")
    r = run_cli("lint", str(project))
    assert r.returncode == 0, r.stdout
    (project / ".looprail" / "agents" / "orchestrator").chmod(0o644)
    r = run_cli("lint", str(project), "--json")
    assert r.returncode == 1
    codes = [f["code"] for f in json.loads(r.stdout)["findings"]]
    # (the test plan has no files and no <automated>: plan-check warnings, not errors)
    assert [c for c in codes if not c.startswith("plan-")] == ["role-agent-missing"]


def test_a_broken_config_stops_lint_with_one_line(project, caps):
    (project / ".planning" / "config.json").write_text("[1]")
    write_plan(project, "01")
    r = run_cli("lint", str(project), "--capabilities", str(caps))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if "config.json" in line]
    assert len(lines) == 1 and "config.json:1:1: top level must be a JSON object" in lines[0]


def test_plan_warnings_name_files_relative_to_the_project(project, caps, monkeypatch):
    monkeypatch.chdir("/")  # not beside the project: paths must still be relative to it
    path = write_plan(project, "01")
    path.with_name("01-PLAN-draft.md").write_text("x")
    found = [f for f in findings(project, caps) if f.code == "plan-warning"]
    assert [f.file for f in found] == [".planning/phases/01-test/01-PLAN-draft.md"]


def test_invalid_frontmatter_names_the_line(project, caps):
    path = project / ".planning" / "phases" / "01-test" / "01-01-PLAN.md"
    path.write_text("---\nphase: 01\nwave: [\n---\n<tasks></tasks>\n")
    f = one(findings(project, caps), "plan-invalid")
    assert f.file == ".planning/phases/01-test/01-01-PLAN.md"
    assert f.path.startswith("line ")


def test_wave_with_overlapping_files_runs_sequentially(project, caps):
    write_plan(project, "01", files_modified=["src/a.py", "src/b.py"])
    write_plan(project, "02", files_modified=["./src/a.py"])
    f = one(findings(project, caps), "wave-sequential")
    assert f.severity == "warning"
    assert "wave 1 runs sequentially: plans 01-01, 01-02 all modify src/a.py" in f.message


def test_only_one_phase(project, caps):
    write_plan(project, "01", depends_on=["07"])
    other = project / ".planning" / "phases" / "02-next"
    other.mkdir()
    assert [f.code for f in findings(project, caps, phase="2")] == []
    assert "plan-dependency-missing" in [f.code for f in findings(project, caps, phase="1")]


def test_tracker_ids(project, caps):
    write_plan(
        project,
        "01",
        tasks=[
            task("a", tracker_id="jira:X-1"),
            task("b", tracker_id="nocolon"),
            task("c", tracker_id="demo:X-2"),
        ],
    )
    found = findings(project, caps)
    none = [f for f in found if f.code == "tracker-no-resolver"]
    assert [f.severity for f in none] == ["warning", "warning"]
    assert "prefix 'jira'" in none[0].message and "prefix 'demo'" in none[1].message
    assert one(found, "tracker-id-malformed").severity == "warning"
    write_capability(
        caps,
        feature(
            "demo",
            taskContentResolver={
                "trackerPrefix": "demo",
                "invoke": {"binary": "bin/demo-missing", "args": ["{{id}}"], "timeoutMs": 1000},
            },
        ),
    )
    f = one(findings(project, caps), "tracker-resolver-missing")
    assert f.severity == "error" and "'bin/demo-missing'" in f.message
    assert f.path.startswith("line ") and "task 3" in f.path
    (project / "bin").mkdir()
    (project / "bin" / "demo-missing").write_text("#!/bin/sh\n")
    (project / "bin" / "demo-missing").chmod(0o755)
    assert "tracker-resolver-missing" not in [f.code for f in findings(project, caps)]


def test_tracker_ids_of_checkpoint_tasks_are_never_resolved(project, caps):
    # The run pauses at a checkpoint task and never asks a resolver (execute:task is once per
    # non-checkpoint task), so a tracker-id there is not a finding.
    checkpoint = task("look", tracker_id="jira:X-1", type="checkpoint:human-verify")
    write_plan(project, "01", tasks=[checkpoint], autonomous=False)
    assert not [f for f in findings(project, caps) if f.code.startswith("tracker-")]


def test_tracker_prefix_of_a_broken_or_two_capabilities(project, caps):
    write_plan(project, "01", tasks=[task("a", tracker_id="demo:X-1")])
    broken = feature(
        "demo",
        taskContentResolver={
            "trackerPrefix": "demo",
            "invoke": {"binary": "sh", "args": ["{{id}}"], "timeoutMs": 999999},
        },
    )
    write_capability(caps, broken)
    f = one(findings(project, caps), "tracker-resolver-broken")
    assert f.severity == "error" and "failed to load" in f.message
    # Two loaded resolvers of one prefix cannot come out of the registry's merge; lint still
    # says so if one ever does (the run would halt: never pick one).
    shutil.rmtree(caps)
    data = load_input(project, [])
    resolver = type(
        "R", (), {"trackerPrefix": "demo", "invoke": type("I", (), {"binary": "sh"})()}
    )()
    from looprail.hooks.capset import CapabilitySet, LoadedCapability

    class Two(CapabilitySet):
        def task_content_resolvers(self):
            return [("one", resolver), ("two", resolver)]

    loaded = LoadedCapability({"id": "one"}, project, "first-party")
    data.compiled = Two({"one": loaded, "two": loaded})
    f = one(lint(data), "tracker-resolver-ambiguous")
    assert f.severity == "error" and "(one, two)" in f.message


# --------------------------------------------------------------------------- CLI


def test_cli_exit_codes_and_json_shape(project, caps):
    write_capability(caps, feature("ui", gates=[gate("plan:pre", {"query": "UI.plan-gate"})]))
    r = run_cli("lint", str(project), "--capabilities", str(caps), "--json", subprocess=True)
    assert r.returncode == 1, r.stderr
    body = json.loads(r.stdout)
    assert set(body) == {"findings", "errors", "warnings", "sources"}
    assert body["errors"] == 1
    assert set(body["findings"][0]) == {"severity", "code", "file", "path", "message", "fix"}
    r = run_cli("lint", "--project", str(project), "--capabilities", str(caps))
    assert r.returncode == 1
    assert "error [query-grammar]" in r.stdout and "    fix: write it as `ui.plan-gate`" in r.stdout
    assert r.stdout.rstrip().endswith("1 error, 0 warnings, 0 notes")
    shutil.rmtree(caps)
    write_plan(project, "01", files_modified=["a"])
    write_plan(project, "02", files_modified=["a"])
    r = run_cli("lint", str(project))
    assert r.returncode == 0 and "warning [wave-sequential]" in r.stdout


def test_cli_bad_input(tmp_path, project):
    r = run_cli("lint", str(tmp_path / "missing"))
    assert r.returncode == 2 and r.stderr.startswith("looprail: error:")
    r = run_cli("lint", str(project), "--phase", "9")
    assert r.returncode == 1 and "phase 9 not found" in r.stderr and r.stderr.count("\n") == 1


def test_capabilities_only_folder(tmp_path, caps):
    folder = tmp_path / "just-caps"
    folder.mkdir()
    write_capability(caps, feature("ui", gates=[gate("plan:pre", {"query": "ui plan_gate"})]))
    report = lint_project(folder, [caps])
    assert isinstance(report, LintReport)
    assert ("info", "no-planning") in codes(report.findings)
    assert ("error", "query-grammar") in codes(report.findings)


def test_the_gsd_capabilities_pass_the_query_grammar(project):
    from tests.support import GSD_CAPABILITIES

    if not GSD_CAPABILITIES.is_dir():
        pytest.skip("conformance corpus not available")
    found = findings(project, GSD_CAPABILITIES)
    assert [f for f in found if f.code == "query-grammar"] == []
    assert "check-missing" not in [
        f.code for f in findings(project, GSD_CAPABILITIES, host_tool="sh")
    ]
