"""The loop as a StateChart: guards with plain values, refusals that leave the state unchanged,
every hook kind at every point, the execute:task resolver as a mandatory action, read_first,
parallel waves and the overlap rule, checkpoints."""

from __future__ import annotations

import json
import shutil
import stat
import threading
import time

import pytest
from statemachine.exceptions import TransitionNotAllowed

from looprail.machine.chart import TaskChart, compile_loop
from looprail.machine.guards import HookResult, PlanFacts, hooks_allow, refusal, refuses
from looprail.machine.spec import DEFAULT_LOOP
from looprail.points import POINTS
from looprail.runtime.base import Outcome
from tests.support import feature
from tests.support.loop import (
    caps_dir,
    every_kind_at_every_point,
    make_project,
    plan_md,
    run_loop,
    scripted,
    task_xml,
    write_plan,
)


def gate(status, blocking=True, on_error="halt", cap_id="sec", **kw):
    return HookResult(
        point="ship:pre",
        cap_id=cap_id,
        kind="gate",
        status=status,
        blocking=blocking,
        on_error=on_error,
        **kw,
    )


# ----------------------------------------------------------------------------- pure guards


@pytest.mark.parametrize(
    "result, refused",
    [
        (gate("block"), True),
        (gate("block", blocking=False), False),  # advisory
        (gate("pass"), False),
        (gate("error", on_error="halt"), True),
        (gate("error", on_error="fail"), True),  # the older spelling
        (gate("error", on_error="skip"), False),
        (gate("block", on_error="skip"), True),  # onError never bypasses a delivered block
        (
            HookResult(point="plan:pre", cap_id="c", kind="step", status="failed", on_error="halt"),
            True,
        ),
        (
            HookResult(point="plan:pre", cap_id="c", kind="step", status="failed", on_error="skip"),
            False,
        ),
        (HookResult(point="plan:pre", cap_id="c", kind="native", status="block"), True),
        (HookResult(point="plan:post", cap_id="c", kind="native", status="report"), False),
        (HookResult(point="plan:pre", cap_id="c", kind="contribution", status="ok"), False),
    ],
)
def test_guard_with_plain_values(result, refused):
    assert refuses(result) is refused
    assert hooks_allow([result]) is (not refused)


def test_refusal_names_the_first_refusing_gate():
    results = [gate("pass"), gate("block", blocking=False), gate("block", cap_id="x", message="no")]
    assert refusal(results).cap_id == "x"


def test_spec_crosses_all_twelve_points_in_order():
    crossed = []
    for t in DEFAULT_LOOP.transitions():
        for p in t.points:
            if p not in crossed:
                crossed.append(p)
    assert crossed == list(POINTS)


def test_default_loop_built_without_validation_is_what_validation_gives():
    """DEFAULT_LOOP and transitions() skip the validators (the run path never builds them);
    validating their data gives the same values, and a spec a user writes is still checked."""
    from pydantic import ValidationError

    from looprail.machine.spec import LoopSpec, StepSpec, TransitionSpec

    validated = LoopSpec.model_validate(DEFAULT_LOOP.model_dump())
    assert validated == DEFAULT_LOOP and hash(validated) == hash(DEFAULT_LOOP)
    for t in DEFAULT_LOOP.transitions():
        assert TransitionSpec.model_validate(t.model_dump()) == t
    assert validated.transitions() == DEFAULT_LOOP.transitions()
    with pytest.raises(ValidationError, match="missing"):
        LoopSpec(steps=DEFAULT_LOOP.steps[:-1])  # the ship points are no longer crossed
    with pytest.raises(ValidationError):
        StepSpec(name="x", role="y", colour="red")  # extra="forbid" still holds


def test_chart_behaviour_flags():
    chart = compile_loop()
    assert chart.allow_event_without_transition is False
    assert chart.catch_errors_as_events is False
    sm = chart()
    with pytest.raises(TransitionNotAllowed):
        sm.send("finish_plan")  # a wrong-phase event raises


def test_blocking_gate_refuses_transition_and_state_is_unchanged():
    sm = compile_loop()()
    sm.send("begin", results=[])
    sm.send("finish_discuss", results=[], facts=PlanFacts(has_context=True))
    sm.send("finish_plan", results=[], facts=PlanFacts(plan_count=1, waves_pending=1))
    before = [s.id for s in sm.configuration]
    with pytest.raises(TransitionNotAllowed):
        sm.send(
            "start_wave", results=[gate("block")], facts=PlanFacts(plan_count=1, waves_pending=1)
        )
    assert [s.id for s in sm.configuration] == before == ["execute", "wave_ready"]
    sm.send(
        "start_wave",
        results=[gate("block", blocking=False)],
        facts=PlanFacts(plan_count=1, waves_pending=1),
    )
    assert [s.id for s in sm.configuration] == ["execute", "wave_running"]


def test_fact_guards_refuse_with_plain_values():
    sm = compile_loop()()
    sm.send("begin", results=[])
    with pytest.raises(TransitionNotAllowed):
        sm.send("finish_discuss", results=[], facts=PlanFacts(has_context=False))
    assert [s.id for s in sm.configuration] == ["discuss"]


def test_task_chart_mandatory_action_failure_restores_state():
    class Model:
        def resolve_task_content(self, **_):
            raise RuntimeError("tracker down")

        def check_read_first(self, **_):
            raise AssertionError("read_first must not run after a failed resolver")

        def task_call_hooks(self, **_):
            raise AssertionError("unreachable")

        def more_tasks(self, **_):
            return False

    sm = TaskChart(model=Model())
    with pytest.raises(RuntimeError, match="tracker down"):
        sm.send("begin_task", task=None)
    assert [s.id for s in sm.configuration] == ["pending"]


# ----------------------------------------------------------------------------- runs


def simple_project(tmp_path, **config):
    project = make_project(tmp_path, config=config or None)
    write_plan(project, "01", plan_md("01", tasks=[task_xml("first", files=["a.txt"])]))
    return project


def test_every_hook_kind_dispatched_at_every_point_in_order(tmp_path):
    project = simple_project(tmp_path)
    caps = caps_dir(tmp_path, *every_kind_at_every_point())
    rt = scripted(project)
    outcome = run_loop(project, rt, caps)
    assert outcome.result.status == "shipped", outcome.result.reason
    dispatched = [(c.point, c.kind) for c in rt.calls if c.point is not None]
    expected = []
    for p in POINTS:
        expected += [(p, "skill"), (p, "context"), (p, "query")]
    assert dispatched == expected
    skills = [c.name for c in rt.calls_of("skill")]
    assert skills[0] == "gsd-s-discuss-pre"  # flavor prefix
    # contributions arrive verbatim with their role
    ctx = next(c for c in rt.calls_of("context") if c.point == "plan:pre")
    assert ctx.role == "researcher" and ctx.text == "context for plan:pre"


def test_a_contribution_reaches_its_role_s_later_work_in_its_step_once(tmp_path):
    """The machine keeps the fragments per step and role, in delivery order, one copy of a
    repeated one; an execute point's fragment for the verifier is for verify's work."""

    def into(point, role, text):
        return {"point": point, "into": role, "fragment": {"inline": text}}

    contributions = [
        into("discuss:pre", "orchestrator", "TALK"),
        into("execute:pre", "executor", "A"),
        into("execute:wave:pre", "executor", "B"),
        into("execute:wave:pre", "executor", "A"),  # the same text again: kept once
        into("execute:post", "verifier", "V"),
        into("discuss:post", "orchestrator", "TOO LATE"),  # after the discuss work
    ]
    manifest = feature(
        "ctx", contributions=[{**c, "produces": [], "consumes": []} for c in contributions]
    )
    project = simple_project(tmp_path)
    rt = scripted(project)
    outcome = run_loop(project, rt, caps_dir(tmp_path, manifest))
    assert outcome.result.status == "shipped", outcome.result.reason
    work = {c.name: c.role_context for c in rt.calls if c.kind in ("phase", "task")}
    assert work["discuss"] == {"orchestrator": ("TALK",)}
    assert work["01-01/T1"] == {"executor": ("A", "B")}
    # the contribution, then looprail's evidence (docs/loop.md, "Verification")
    (contributed, evidence) = work["verify"]["verifier"]
    assert contributed == "V" and evidence.startswith("## Verification")
    assert "plan" not in work  # its plan was there already


def test_flavor_changes_skill_prefix(tmp_path):
    project = simple_project(tmp_path)
    caps = caps_dir(tmp_path, *every_kind_at_every_point())
    rt = scripted(project)
    run_loop(project, rt, caps, flavor="msd")
    assert rt.calls_of("skill")[0].name == "msd-s-discuss-pre"


def test_blocking_gate_halts_run_naming_gate(tmp_path):
    project = simple_project(tmp_path)
    cap = feature(
        "guard",
        gates=[
            {
                "point": "plan:post",
                "check": {"query": "guard plan"},
                "blocking": True,
                "onError": "skip",
            }
        ],
    )
    rt = scripted(project)
    rt.script(
        ("query", "guard plan"),
        Outcome.succeeded(data={"block": True, "message": "plans lack tests"}),
    )
    out = run_loop(project, rt, caps_dir(tmp_path, cap))
    assert out.result.status == "halted"
    assert out.result.state == ["plan"]  # the refused transition left the state unchanged
    assert "guard" in out.result.reason and "plans lack tests" in out.result.reason
    assert rt.calls_of("task") == []


def test_gate_check_error_follows_on_error(tmp_path):
    project = simple_project(tmp_path)
    halting = feature(
        "h",
        gates=[
            {"point": "plan:post", "check": {"query": "h x"}, "blocking": True, "onError": "halt"}
        ],
    )
    rt = scripted(project)
    rt.script(("query", "h x"), Outcome.failed("could not look", exit_code=69))
    out = run_loop(project, rt, caps_dir(tmp_path, halting))
    assert out.result.status == "halted" and "gate check failed" in out.result.reason

    project2 = simple_project(tmp_path / "two")
    skipping = feature(
        "s",
        gates=[
            {"point": "plan:post", "check": {"query": "s x"}, "blocking": True, "onError": "skip"}
        ],
    )
    rt2 = scripted(project2)
    rt2.script(("query", "s x"), Outcome.failed("crashed", exit_code=2))
    out2 = run_loop(project2, rt2, caps_dir(tmp_path / "two", skipping))
    assert out2.result.status == "shipped"


def test_command_step_failing_grammar_is_never_run(tmp_path):
    project = simple_project(tmp_path)
    cap = feature(
        "bad",
        steps=[
            {
                "point": "plan:pre",
                "ref": {"command": "rm -rf /; echo"},
                "produces": [],
                "consumes": [],
                "onError": "halt",
            }
        ],
    )
    rt = scripted(project)
    out = run_loop(project, rt, caps_dir(tmp_path, cap))
    assert rt.calls_of("command") == []
    assert out.result.status == "halted" and "grammar" in out.result.reason


def test_command_step_argv(tmp_path):
    project = simple_project(tmp_path)
    cap = feature(
        "cmd",
        steps=[
            {
                "point": "execute:wave:post",
                "ref": {"command": "beads sync"},
                "produces": [],
                "consumes": [],
                "onError": "skip",
            }
        ],
    )
    rt = scripted(project)
    run_loop(project, rt, caps_dir(tmp_path, cap))
    (call,) = rt.calls_of("command")
    assert call.words == ("beads", "sync") and call.wave == 1


def resolver_cap(tmp_path, body: str, prefix: str = "bd") -> dict:
    script = tmp_path / f"resolver-{prefix}.py"
    script.write_text("#!/usr/bin/env python3\nimport json, sys\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return feature(
        f"tracker-{prefix}",
        taskContentResolver={
            "trackerPrefix": prefix,
            "invoke": {"binary": str(script), "args": ["{{id}}"], "timeoutMs": 10000},
        },
    )


def test_resolver_runs_before_read_first_and_replaces_content(tmp_path):
    project = make_project(tmp_path)
    (project / "spec.md").write_text("spec")
    write_plan(
        project,
        "01",
        plan_md(
            "01",
            tasks=[
                task_xml(
                    "tracked",
                    attrs=' tracker-id="bd:GSD-1"',
                    read_first=["missing-inline.md"],
                    action="inline",
                )
            ],
        ),
    )
    body = 'print(json.dumps({"description": "from tracker " + sys.argv[1], "read_first": ["spec.md"], "acceptance_criteria": ["a", "b"]}))'
    rt = scripted(project)
    out = run_loop(project, rt, caps_dir(tmp_path, resolver_cap(tmp_path, body)))
    assert out.result.status == "shipped", out.result.reason
    (task,) = rt.calls_of("task")
    work = task.request.task
    assert work.action == "from tracker GSD-1" and work.read_first == ("spec.md",)
    assert work.acceptance_criteria == ("a", "b") and work.resolved_by_tracker


def test_resolver_failure_halts_naming_tracker_id_and_nothing_after_runs(tmp_path):
    project = make_project(tmp_path)
    write_plan(
        project,
        "01",
        plan_md(
            "01",
            tasks=[
                task_xml("before"),
                task_xml("tracked", attrs=' tracker-id="bd:GSD-9"'),
                task_xml("after"),
            ],
        ),
    )
    body = 'sys.stderr.write("tracker is down\\n"); sys.exit(3)'
    rt = scripted(project)
    out = run_loop(project, rt, caps_dir(tmp_path, resolver_cap(tmp_path, body)))
    assert out.result.status == "halted"
    assert "bd:GSD-9" in out.result.reason and "tracker is down" in out.result.reason
    assert [c.name for c in rt.calls_of("task")] == ["01-01/T1"]  # never a fallback, nothing after
    assert not (project / ".planning/phases/01-demo/01-01-SUMMARY.md").exists()


def test_resolver_without_matching_prefix_uses_inline(tmp_path):
    project = make_project(tmp_path)
    write_plan(
        project,
        "01",
        plan_md("01", tasks=[task_xml("x", attrs=' tracker-id="zz:1"', action="inline")]),
    )
    rt = scripted(project)
    out = run_loop(project, rt, caps_dir(tmp_path, resolver_cap(tmp_path, "print('{}')")))
    assert out.result.status == "shipped"
    assert rt.calls_of("task")[0].request.task.action == "inline"


def test_read_first_missing_halts_naming_paths(tmp_path):
    project = make_project(tmp_path)
    write_plan(
        project,
        "01",
        plan_md("01", tasks=[task_xml("x", read_first=["docs/a.md", "../etc/passwd"])]),
    )
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "halted"
    assert "docs/a.md" in out.result.reason and "../etc/passwd" in out.result.reason
    assert rt.calls_of("task") == []


def concurrency_probe(rt, keys, hold=0.3):
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def effect(_req):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(hold)
        with lock:
            state["now"] -= 1

    for k in keys:
        rt.effect(("task", k), effect)
    return state


def test_plans_of_a_wave_run_in_parallel(tmp_path):
    project = make_project(tmp_path)
    write_plan(project, "01", plan_md("01", files=["a"], tasks=[task_xml("a")]))
    write_plan(project, "02", plan_md("02", files=["b"], tasks=[task_xml("b")]))
    write_plan(project, "03", plan_md("03", depends_on=["01"], files=["c"], tasks=[task_xml("c")]))
    rt = scripted(project)
    probe = concurrency_probe(rt, ["01-01/T1", "01-02/T1"])
    out = run_loop(project, rt, jobs=2)
    assert out.result.status == "shipped"
    assert probe["max"] == 2
    names = [c.name for c in rt.calls_of("task")]
    assert names.index("01-03/T1") == 2  # wave 2 after both wave-1 plans


def test_overlapping_files_run_sequentially(tmp_path):
    project = make_project(tmp_path)
    write_plan(project, "01", plan_md("01", files=["shared.py"], tasks=[task_xml("a")]))
    write_plan(project, "02", plan_md("02", files=["shared.py"], tasks=[task_xml("b")]))
    rt = scripted(project)
    probe = concurrency_probe(rt, ["01-01/T1", "01-02/T1"], hold=0.1)
    out = run_loop(project, rt, jobs=4)
    assert out.result.status == "shipped" and probe["max"] == 1


def checkpoint_project(tmp_path, gate_attr=""):
    project = make_project(tmp_path)
    write_plan(
        project,
        "01",
        plan_md(
            "01",
            autonomous=False,
            tasks=[
                task_xml("build"),
                task_xml("look", type="checkpoint:human-verify", attrs=gate_attr),
                task_xml("finish"),
            ],
        ),
    )
    return project


def test_checkpoint_pauses_without_autonomous(tmp_path):
    project = checkpoint_project(tmp_path)
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "paused" and out.result.exit_code == 3
    assert "01-01/T2" in out.result.reason and "--approve 01-01/T2" in out.result.reason
    assert [c.name for c in rt.calls_of("task")] == ["01-01/T1"]


def test_autonomous_approves_checkpoint(tmp_path):
    project = checkpoint_project(tmp_path)
    rt = scripted(project)
    out = run_loop(project, rt, autonomous=True)
    assert out.result.status == "shipped"
    assert [c.name for c in rt.calls_of("task")] == [
        "01-01/T1",
        "01-01/T3",
    ]  # a checkpoint has no body


def test_autonomous_never_approves_blocking_human(tmp_path):
    project = checkpoint_project(tmp_path, gate_attr=' gate="blocking-human"')
    out = run_loop(project, scripted(project), autonomous=True)
    assert out.result.status == "paused"
    out = run_loop(project, scripted(project), autonomous=True, approvals=frozenset({"01-01/T2"}))
    assert out.result.status == "shipped"


def test_failed_verification_halts_before_ship(tmp_path):
    project = simple_project(tmp_path)
    rt = scripted(project, verification="gaps_found")
    out = run_loop(project, rt)
    assert out.result.status == "halted" and "VERIFICATION.md" in out.result.reason
    assert out.result.state == ["verify"]
    assert [c.point for c in rt.calls if c.point in ("verify:post", "ship:pre")] == []


def test_task_failure_halts_and_siblings_finish(tmp_path):
    project = make_project(tmp_path)
    write_plan(project, "01", plan_md("01", files=["a"], tasks=[task_xml("a")]))
    write_plan(project, "02", plan_md("02", files=["b"], tasks=[task_xml("b1"), task_xml("b2")]))
    rt = scripted(project)
    rt.script(("task", "01-01/T1"), Outcome.failed("compile error", exit_code=1))
    out = run_loop(project, rt, jobs=2)
    assert out.result.status == "halted" and "compile error" in out.result.reason
    assert {c.name for c in rt.calls_of("task")} == {"01-01/T1", "01-02/T1", "01-02/T2"}
    assert (project / ".planning/phases/01-demo/01-02-SUMMARY.md").exists()
    assert not (project / ".planning/phases/01-demo/01-01-SUMMARY.md").exists()


def test_existing_artifacts_need_no_agent(tmp_path):
    project = simple_project(tmp_path)
    phase_dir = project / ".planning/phases/01-demo"
    (phase_dir / "01-CONTEXT.md").write_text("ctx")
    rt = scripted(project)
    run_loop(project, rt)
    assert [c.step for c in rt.calls_of("phase")] == ["verify", "ship"]  # no discuss, no plan


def test_empty_points_are_silent_noops(tmp_path):
    project = simple_project(tmp_path)
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "shipped"
    assert [
        c for c in rt.calls if c.kind in ("skill", "agent", "command", "query", "context")
    ] == []


def test_summary_written_per_plan(tmp_path):
    project = simple_project(tmp_path)
    run_loop(project, scripted(project))
    text = (project / ".planning/phases/01-demo/01-01-SUMMARY.md").read_text()
    assert "status: complete" in text and "01-01/T1" in text


def test_journaled_run_records_events(tmp_path):
    project = simple_project(tmp_path)
    caps = caps_dir(tmp_path, *every_kind_at_every_point())
    out = run_loop(project, scripted(project), caps, journal=True)
    from looprail.journal import Journal

    with Journal.open(project, create=False) as jr:
        events = jr.events(out.run_id)
        points = [e.point for e in events if e.kind == "point"]
        assert points == list(POINTS)
        assert jr.get_run(out.run_id).status == "shipped"
        assert [t.status for t in jr.tasks(out.run_id)] == ["done"]
        hooks = [(e.point, e.hook_kind) for e in events if e.kind == "hook"]
        assert len(hooks) == 36
    assert json.loads(json.dumps(out.result.state)) == ["shipped"]


def test_a_verification_that_did_not_pass_is_verified_again(tmp_path):
    project = simple_project(tmp_path)
    (project / ".planning/phases/01-demo/01-VERIFICATION.md").write_text(
        "---\nstatus: gaps_found\n---\n"
    )
    rt = scripted(project)  # its verifier writes `status: passed`
    out = run_loop(project, rt)
    assert out.result.status == "shipped"
    assert "verify" in [c.step for c in rt.calls_of("phase")]


def test_a_run_that_cannot_start_is_not_left_running(tmp_path):
    # A malformed plan already in the phase folder: one clear error before the run starts
    # (tests/test_run_inputs.py has the CLI side), so nothing is journaled at all: no run left
    # `running` as if it had crashed, and no halted run either. Fixing the plan and running
    # again ships as a new run.
    from looprail.errors import RefusedToStart
    from looprail.journal import Journal
    from looprail.journal.writer import journal_path

    project = make_project(tmp_path)
    write_plan(project, "01", "---\nwave: 1\n")  # a frontmatter never closed: refused
    with pytest.raises(RefusedToStart, match=r"01-01-PLAN\.md"):
        run_loop(project, scripted(project), journal=True)
    assert not journal_path(project).exists()
    write_plan(project, "01", plan_md("01", tasks=[task_xml("a")]))
    out = run_loop(project, scripted(project), journal=True)
    assert out.result.status == "shipped" and not out.resumed
    with Journal.open(project, create=False) as jr:
        assert [r.status for r in jr.runs()] == ["shipped"]


def test_phase_folder_deleted_mid_run_halts_with_one_line(tmp_path):
    project = simple_project(tmp_path)
    rt = scripted(project)
    phase_dir = project / ".planning" / "phases" / "01-demo"
    rt.effect(("task", "01-01/T1"), lambda req: shutil.rmtree(phase_dir))
    out = run_loop(project, rt)
    assert out.result.status == "halted"
    assert "01-01-SUMMARY.md" in out.result.reason and "\n" not in out.result.reason


def test_checkpoint_approval_survives_resume(tmp_path):
    # Approved once (--approve), then a later task fails: running again must not ask for the
    # same approval again; the fixed task runs and the phase ships.
    project = checkpoint_project(tmp_path)
    rt = scripted(project)
    rt.script(("task", "01-01/T3"), Outcome.failed("boom"))
    out = run_loop(project, rt, journal=True, approvals=frozenset({"01-01/T2"}))
    assert out.result.status == "halted" and "boom" in out.result.reason
    rt = scripted(project)
    out = run_loop(project, rt, journal=True)
    assert out.result.status == "shipped", out.result.reason
    assert [c.name for c in rt.calls_of("task")] == ["01-01/T3"]


def test_restoring_an_unknown_journaled_state_is_a_clear_error(tmp_path):
    from looprail.errors import LooprailError
    from looprail.machine.runner import LoopRunner, RunContext

    project = simple_project(tmp_path)
    with pytest.raises(LooprailError, match="'reviewing' is not a state of this loop"):
        LoopRunner(
            RunContext(
                project=project,
                phase="1",
                runtime=scripted(project),
                compiled={"caps": {}},
                state=["reviewing"],
            )
        )


def test_dry_run_shows_commands_as_they_would_run(tmp_path):
    # The real phase number, the host tool when one is named, and a command that fails the
    # grammar shown as never run (as the real dispatch treats it), not as if it would run.
    from looprail.machine.dryrun import dry_run, dry_run_plan
    from looprail.machine.session.phase import load_project

    project = simple_project(tmp_path)
    step = {"produces": [], "consumes": [], "onError": "skip"}
    cap = feature(
        "cmd",
        steps=[
            {"point": "plan:pre", "ref": {"command": "beads sync"}, **step},
            {"point": "plan:post", "ref": {"command": "rm -rf /; echo"}, **step},
        ],
    )
    loaded = load_project(project, [caps_dir(tmp_path, cap)])
    text = dry_run(dry_run_plan(loaded, "1", host_tool="gsd_run"))
    assert "command gsd_run beads sync --phase 1 --raw" in text
    (bad,) = [line for line in text.splitlines() if "rm -rf" in line]
    assert "fails the grammar" in bad and "never run" in bad
    assert "(unless VERIFICATION.md reports status: passed)" in text


def test_unconsented_project_resolver_halts_instead_of_falling_back(tmp_path):
    project = make_project(tmp_path)
    write_plan(
        project,
        "01",
        plan_md("01", tasks=[task_xml("x", attrs=' tracker-id="bd:1"', action="inline")]),
    )
    cap = resolver_cap(tmp_path, "print(json.dumps({'description': 'from tracker'}))")
    from tests.support import write_capability

    write_capability(project / ".looprail" / "capabilities", cap)
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "halted"
    assert "bd:1" in out.result.reason and "looprail trust" in out.result.reason
    assert rt.calls_of("task") == []
