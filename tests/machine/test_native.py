"""Native hooks inside real runs: a `:pre` hook refuses a transition, `task_call` blocks a task,
a delivery failure leaves a block standing, the loop guard stops a runaway continuation, and
`loop_settled` sees how the run ended."""

from __future__ import annotations

import json

from looprail.runtime.base import Outcome
from tests.support import run_cli
from tests.support.loop import make_project, plan_md, run_loop, scripted, task_xml, write_plan


def global_hooks(home, hooks: dict) -> None:
    d = home / ".looprail"
    d.mkdir(parents=True, exist_ok=True)
    (d / "hooks.json").write_text(json.dumps({"local": hooks}))


def project_with_tasks(tmp_path, n=3):
    project = make_project(tmp_path)
    write_plan(
        project,
        "01",
        plan_md("01", tasks=[task_xml(f"t{i}", files=[f"f{i}"]) for i in range(1, n + 1)]),
    )
    return project


def test_pre_native_hook_refuses_transition_in_real_run(tmp_path, _isolated_home):
    import shutil

    from tests.support import REPO

    project = tmp_path / "hello"
    shutil.copytree(REPO / "examples" / "hello-loop", project)
    global_hooks(
        _isolated_home,
        {
            "no-planning": {
                "description": "planning is frozen",
                "event": "plan:pre",
                "shell": "exit 7",
            }
        },
    )
    p = run_cli(
        "run",
        str(project),
        "--phase",
        "1",
        "--capabilities",
        str(REPO / "examples" / "capabilities"),
    )
    assert p.returncode == 1
    assert "native hook local/no-planning" in p.stderr and "plan:pre" in p.stderr
    assert not list(
        (project / ".planning/phases/01-greeting").glob("*-PLAN.md")
    )  # the planner never ran
    p = run_cli("status", "--project", str(project))
    assert "state: discuss" in p.stdout


def test_task_call_blocks_a_task_by_filter(tmp_path, _isolated_home):
    project = project_with_tasks(tmp_path)
    global_hooks(
        _isolated_home,
        {
            "no-t2": {
                "description": "t2 is off limits",
                "event": "task_call",
                "filter": {"name": "^t2$"},
                "shell": "false",
            }
        },
    )
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "halted" and "no-t2" in out.result.reason
    assert [c.name for c in rt.calls_of("task")] == ["01-01/T1"]


def test_post_failure_only_reports(tmp_path, _isolated_home):
    project = project_with_tasks(tmp_path, 1)
    global_hooks(
        _isolated_home,
        {"noisy": {"description": "always fails", "event": "plan:post", "shell": "false"}},
    )
    out = run_loop(project, scripted(project))
    assert out.result.status == "shipped"


def test_delivery_failure_leaves_block_standing(tmp_path, _isolated_home):
    project = project_with_tasks(tmp_path, 1)
    global_hooks(
        _isolated_home,
        {
            "stop": {
                "description": "block and tell",
                "event": "plan:pre",
                "shell": "false",
                "action": {
                    "type": "message",
                    "outcome": "block",
                    "message": "Blocked.",
                    "delivery": "steer",
                },
            }
        },
    )
    rt = scripted(project)
    rt.script(("message", "session"), Outcome.failed("no session to deliver to"))
    out = run_loop(project, rt)
    assert out.result.status == "halted" and "stop" in out.result.reason
    assert len(rt.calls_of("message")) == 1  # delivery was attempted, failed, and changed nothing


def test_loop_guard_stops_runaway_continuation(tmp_path, _isolated_home):
    project = project_with_tasks(tmp_path, 4)
    global_hooks(
        _isolated_home,
        {
            "nudge": {
                "description": "keep going",
                "event": "task_result",
                "maxSelections": 2,
                "action": {
                    "type": "message",
                    "outcome": "pass",
                    "message": "continue",
                    "delivery": "steer",
                    "sendAs": "user",
                },
            }
        },
    )
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "shipped"
    assert len(rt.calls_of("task")) == 4
    assert [c.text for c in rt.calls_of("message")] == ["continue", "continue"]  # guard: at most 2


def test_interrupt_action_pauses_at_next_safe_point(tmp_path, _isolated_home):
    project = project_with_tasks(tmp_path, 3)
    global_hooks(
        _isolated_home,
        {
            "pause-after-first": {
                "description": "pause",
                "event": "task_result",
                "filter": {"name": "^t1$"},
                "action": {"type": "interrupt", "outcome": "pass"},
            }
        },
    )
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "paused" and "pause-after-first" in out.result.reason
    assert [c.name for c in rt.calls_of("task")] == ["01-01/T1"]


def test_loop_settled_sees_the_end(tmp_path, _isolated_home):
    project = project_with_tasks(tmp_path, 1)
    marker = tmp_path / "settled.txt"
    global_hooks(
        _isolated_home,
        {
            "note": {
                "description": "record",
                "event": "loop_settled",
                "shell": f'echo "$LOOPRAIL_LOOP_STATUS" > {marker}',
            }
        },
    )
    out = run_loop(project, scripted(project))
    assert out.result.status == "shipped"
    assert marker.read_text().strip() == "shipped"


def test_dry_run_lists_native_hooks(tmp_path, _isolated_home):
    project = project_with_tasks(tmp_path, 1)
    global_hooks(
        _isolated_home,
        {"gate-plan": {"description": "lint first", "event": "plan:pre", "shell": "true"}},
    )
    from tests.support import run_cli

    p = run_cli("run", str(project), "--phase", "1", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "native        local/gate-plan: lint first" in p.stdout
