"""The pytest plugin and `LoopHarness`: capability tests written the way an author would, run by
pytest's own `pytester`, plus direct checks of the harness API."""

from __future__ import annotations

import re

import pytest

from looprail.errors import ManifestError, UsageError
from looprail.testing import HookResult, LoopHarness, hooks_allow, plan_markdown, refusal, task
from tests.support import REPO

pytest_plugins = ["pytester"]


def _doc_example() -> str:
    text = (REPO / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/testing.md has no python example"
    return blocks[0]


# --------------------------------------------------------------------------- through pytest


def test_the_documented_example_passes_under_pytest(pytester):
    pytester.makepyfile(test_caps=_doc_example())
    result = pytester.runpytest("-q")
    result.assert_outcomes(passed=6)


def test_fixtures_come_from_the_entry_point(pytester):
    pytester.makepyfile(
        test_fixtures="""
        def test_fixtures(loop_harness, scripted_runtime):
            assert scripted_runtime is loop_harness.runtime
            assert (loop_harness.project / ".planning" / "phases" / "01-test").is_dir()
        """
    )
    # In process (a fresh config loads the pytest11 entry points, as a new pytest would): a
    # subprocess per run doubled this test's time for nothing it proves.
    result = pytester.runpytest("-q")
    result.assert_outcomes(passed=1)
    # and it can be switched off like any plugin
    result = pytester.runpytest("-q", "-p", "no:looprail")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'loop_harness' not found*"])


def test_a_wrong_expectation_fails_with_a_readable_result(pytester):
    pytester.makepyfile(
        test_wrong="""
        def test_expect_allowed(loop_harness):
            loop_harness.capability({"id": "ui", "gates": [{"point": "plan:post",
                "check": {"query": "ui plan-gate"}, "blocking": True, "onError": "halt"}]})
            loop_harness.plan("01")
            loop_harness.verdict("ui", block=True, message="no spec")
            result = loop_harness.transition("plan", "execute")
            assert result.allowed, result
        """
    )
    result = pytester.runpytest("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*refused_by='ui'*message='no spec'*"])


# --------------------------------------------------------------------------- the harness API


def ui_gate(**kw):
    return {
        "id": "ui",
        "gates": [
            {
                "point": kw.pop("point", "plan:post"),
                "check": {"query": "ui plan-gate"},
                "blocking": kw.pop("blocking", True),
                "onError": kw.pop("on_error", "halt"),
            }
        ],
    }


def test_transition_refused_by_a_plan_fact_guard(loop_harness):
    result = loop_harness.transition("plan", "execute")
    assert not result and result.refused_by is None
    assert result.guard == "plans_ready"
    assert result.message == "the plan step produced no plans"
    assert result.results == []  # refused before any hook ran


def test_check_error_follows_on_error(loop_harness):
    loop_harness.capability(ui_gate())
    loop_harness.plan("01")
    loop_harness.verdict("ui", error="check crashed")
    halted = loop_harness.transition("plan", "execute")
    assert not halted and halted.refused_by == "ui"
    assert halted.refusal.status == "error"
    # refused, but because the check broke: a refusal test must not pass on this
    assert halted.errored and not halted.blocked
    assert [r.cap_id for r in halted.errors] == ["ui"]
    loop_harness.verdict("ui", block=True, message="no spec")
    blocked = loop_harness.transition("plan", "execute")
    assert blocked.blocked and not blocked.errored and blocked.errors == []
    loop_harness.verdict("ui", error="check crashed")
    loop_harness.capability(ui_gate(on_error="skip"))
    skipped = loop_harness.transition("plan", "execute")
    assert skipped.allowed and skipped.result_of("ui").status == "error"
    assert not skipped.blocked and not skipped.errored and len(skipped.errors) == 1


@pytest.mark.parametrize(
    ("predicate", "path", "reason"),
    [
        (
            {"kind": "config-equal", "key": "a", "equals": 1},
            "$.gates[0].check.predicate.kind",
            "unknown kind 'config-equal' (did you mean config-equals?",
        ),
        ({"key": "a", "equals": 1}, "$.gates[0].check.predicate.kind", "required: one of"),
        (
            {"kind": "artifact-exists", "artefact": "S.md"},
            "$.gates[0].check.predicate.artefact",
            "unknown field",
        ),
        (
            {"kind": "config-equals", "key": "a"},
            "$.gates[0].check.predicate.equals",
            "required field is missing",
        ),
    ],
)
def test_a_predicate_typo_is_a_validation_error_not_a_refusal(
    loop_harness, predicate, path, reason
):
    gate = {"point": "ship:pre", "check": {"predicate": predicate}, "blocking": True}
    with pytest.raises(ManifestError) as exc:
        loop_harness.capability({"id": "rel", "gates": [{**gate, "onError": "halt"}]})
    shown = [str(issue) for issue in exc.value.issues]  # every problem, file and JSON path
    assert any(f"rel/capability.json: {path}: {reason}" in line for line in shown), shown


def test_advisory_gate_never_refuses(loop_harness):
    loop_harness.capability(ui_gate(blocking=False, on_error="skip"))
    loop_harness.plan("01")
    loop_harness.verdict("ui", block=True, message="looks off")
    result = loop_harness.transition("plan", "execute")
    assert result.allowed and result.result_of("ui", "gate").message == "looks off"


def test_wave_transitions(loop_harness):
    loop_harness.capability(ui_gate(point="execute:wave:post"))
    loop_harness.plan("01")
    loop_harness.plan("02", depends_on=["01"])
    start = loop_harness.transition("wave_ready", "wave_running")
    assert start.allowed and start.state_after == ["execute", "wave_running"]
    loop_harness.verdict("ui", block=True, message="unsafe")
    finish = loop_harness.transition("wave_running", "wave_ready")
    assert finish.refused_by == "ui" and finish.state_after == ["execute", "wave_running"]
    loop_harness.verdict("ui", block=False)
    assert loop_harness.transition("wave_running", "wave_ready").state_after == [
        "execute",
        "wave_ready",
    ]
    # all plans done: leaving execute is allowed only then
    assert loop_harness.transition("execute", "verify").guard == "waves_finished"
    loop_harness.summary("01")
    loop_harness.summary("02")
    assert loop_harness.transition("execute", "verify").allowed


def test_contribution_reaches_the_role(loop_harness):
    loop_harness.capability(
        {
            "id": "style",
            "contributions": [
                {
                    "point": "plan:pre",
                    "into": "planner",
                    "fragment": {"inline": "Use short sentences."},
                    "produces": [],
                    "consumes": [],
                }
            ],
        }
    )
    loop_harness.artifact("CONTEXT.md", "decisions")
    result = loop_harness.transition("discuss", "plan")
    assert result.allowed
    (call,) = [c for c in result.calls if c.kind == "context"]
    assert call.role == "planner" and call.text == "Use short sentences."


def test_whole_run_with_a_blocking_gate_halts(loop_harness):
    loop_harness.capability(ui_gate(point="ship:pre"))
    loop_harness.plan("01", tasks=["one", "two"])
    loop_harness.verdict("ui", block=True, message="not ready")
    run = loop_harness.run()
    assert run.status == "halted" and run.refused_by == "ui"
    assert [c.name for c in run.calls_of("task")] == ["01-01/T1", "01-01/T2"]
    assert run.result.state == ["verify"]
    assert run.log[-1].startswith("halted blocked at ship:pre by gate ui")


def test_checkpoint_pauses_unless_approved(loop_harness):
    loop_harness.plan("01", tasks=["one", task("look", type="checkpoint:human-verify")])
    assert loop_harness.run().status == "paused"
    assert loop_harness.run(approvals=["01-01/T2"]).shipped


def test_failing_step_with_halt(loop_harness):
    loop_harness.capability(
        {
            "id": "lint",
            "skills": ["plan-lint"],
            "steps": [
                {
                    "point": "plan:post",
                    "ref": {"skill": "plan-lint"},
                    "produces": [],
                    "consumes": [],
                    "onError": "halt",
                }
            ],
        }
    )
    loop_harness.plan("01")
    from looprail.testing import Outcome

    loop_harness.script(("skill", "gsd-plan-lint"), Outcome.failed("3 problems"))
    result = loop_harness.transition("plan", "execute")
    assert result.refused_by == "lint" and "3 problems" in result.reason


def test_harness_refuses_bad_input(loop_harness):
    with pytest.raises(ManifestError) as exc:
        loop_harness.capability({"id": "bad", "gates": [{"point": "nowhere"}]})
    assert "capability.json" in str(exc.value)
    with pytest.raises(UsageError, match="no gate"):
        loop_harness.verdict("nobody", block=True)
    loop_harness.capability(
        {
            "id": "pred",
            "gates": [
                {
                    "point": "ship:pre",
                    "check": {"predicate": {"kind": "artifact-exists", "artifact": "S.md"}},
                    "blocking": True,
                    "onError": "halt",
                }
            ],
        }
    )
    with pytest.raises(UsageError, match="evaluated for real"):
        loop_harness.verdict("pred", block=False)
    with pytest.raises(UsageError, match="no transition from 'plan' to 'ship'"):
        loop_harness.transition("plan", "ship")


def test_config_helpers(tmp_path):
    h = LoopHarness(tmp_path)
    assert h.config({"a": 1}, **{"b.c": True}) == {"a": 1, "b": {"c": True}}
    assert h.set("b.d", 2) == {"a": 1, "b": {"c": True, "d": 2}}
    assert (h.project / ".planning" / "config.json").read_text().count('"d": 2') == 1


def test_plan_markdown_parses_as_written(tmp_path):
    from looprail.plans import parse_plan

    text = plan_markdown(
        "02",
        tasks=[task("a", tracker_id="x:1", read_first=["r.md"], files=["f.py"])],
        depends_on=["01"],
        files_modified=["f.py"],
        wave=2,
    )
    plan = parse_plan(text, path=tmp_path / "01-02-PLAN.md")
    assert plan.depends_on == ["01"] and plan.wave == 2 and plan.files_modified == ["f.py"]
    (t,) = plan.tasks
    assert t.tracker_id == "x:1" and t.read_first == ["r.md"] and t.files == ["f.py"]


def test_pure_guard_helpers_are_re_exported():
    gate = HookResult(
        point="ship:pre", cap_id="x", kind="gate", status="block", blocking=True, message="m"
    )
    assert not hooks_allow([gate]) and refusal([gate]) is gate


def test_work_done_can_be_left_to_the_test(loop_harness):
    result = loop_harness.transition("verify", "ship", work_done=False)
    assert result.guard == "verify_done"
    loop_harness.artifact("VERIFICATION.md", frontmatter={"status": "gaps_found"})
    assert loop_harness.transition("verify", "ship").guard == "verify_done"  # not overwritten
    loop_harness.artifact("VERIFICATION.md", frontmatter={"status": "passed"})
    assert loop_harness.transition("verify", "ship").allowed
