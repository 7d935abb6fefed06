"""ScriptedRuntime: scripted outcomes, recording, context, thread safety."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from looprail.runtime.base import (
    DispatchContext,
    Outcome,
    Request,
    Runtime,
    TaskWork,
    ask_verdict,
    compact,
    deliver_context,
    deliver_message,
    do_phase_work,
    execute_task,
    run_command,
    run_query_check,
    run_skill,
    spawn_agent,
    spawn_banner,
)
from looprail.runtime.executors import make_executor, run_all
from looprail.runtime.scripted import ScriptedRuntime


def make_ctx(tmp_path: Path, **overrides) -> DispatchContext:
    fields = {"project": tmp_path, "phase_number": "2", "point": "plan:pre", "cap_id": "ui"}
    fields.update(overrides)
    return DispatchContext(**fields)


def task(task_id: str, plan_id: str = "02-01") -> TaskWork:
    return TaskWork(plan_id=plan_id, task_id=task_id, index=int(task_id[1:]), name=task_id)


def test_satisfies_the_runtime_protocol() -> None:
    assert isinstance(ScriptedRuntime(), Runtime)


def test_unscripted_calls_succeed_and_are_recorded_in_order(tmp_path: Path) -> None:
    rt = ScriptedRuntime()
    ctx = make_ctx(tmp_path)
    assert run_skill(rt, "gsd-foo", ctx).ok
    assert spawn_agent(rt, "gsd-mapper", ctx).ok
    assert run_command(rt, ["beads", "sync"], ctx).ok
    query = run_query_check(rt, ["ui", "plan-gate"], ctx)
    assert query.ok and query.data == {"block": False, "message": ""}
    assert do_phase_work(rt, "planner", "plan", ctx).ok
    assert execute_task(rt, task("T1"), ctx).ok
    assert [c.key for c in rt.calls] == [
        ("skill", "gsd-foo"),
        ("agent", "gsd-mapper"),
        ("command", "beads sync"),
        ("query", "ui plan-gate"),
        ("phase", "plan"),
        ("task", "02-01/T1"),
    ]
    first = rt.calls[0]
    assert (first.point, first.cap_id, first.outcome) == ("plan:pre", "ui", Outcome.succeeded())
    assert rt.calls[2].words == ("beads", "sync")
    assert (rt.calls[5].plan_id, rt.calls[5].task_id) == ("02-01", "T1")


def test_scripted_failures_and_verdicts(tmp_path: Path) -> None:
    rt = ScriptedRuntime(
        {
            ("skill", "gsd-lint"): Outcome.failed("lint crashed", exit_code=2),
            ("query", "ui plan-gate"): Outcome.succeeded(
                data={"block": True, "message": "no UI-SPEC"}
            ),
            ("query", "drift"): Outcome.failed("could not look", exit_code=69),
        }
    )
    ctx = make_ctx(tmp_path)
    lint = run_skill(rt, "gsd-lint", ctx)
    assert not lint.ok and lint.exit_code == 2 and lint.detail == "lint crashed"
    gate = run_query_check(rt, ["ui", "plan-gate"], ctx)
    assert gate.ok and gate.data == {"block": True, "message": "no UI-SPEC"}
    drift = run_query_check(rt, ["drift"], ctx)
    assert drift.unavailable and not drift.ok
    assert rt.calls[0].outcome == lint


def test_a_query_without_a_verdict_fails_like_a_real_check(tmp_path: Path) -> None:
    rt = ScriptedRuntime({("query", "ui plan-gate"): Outcome.succeeded("hello")})
    outcome = run_query_check(rt, ["ui", "plan-gate"], make_ctx(tmp_path))
    assert not outcome.ok
    assert outcome.detail == "scripted query 'ui plan-gate' stdout is not a JSON object"


def test_callable_responders_receive_the_request_and_can_write_artifacts(
    tmp_path: Path,
) -> None:
    seen: list[Request] = []

    def planner(request: Request) -> Outcome:
        seen.append(request)
        Path(request.project, "02-01-PLAN.md").write_text("# plan\n")
        return Outcome.succeeded(data={"plans": ["02-01"]})

    rt = ScriptedRuntime({("phase", "plan"): planner})
    outcome = do_phase_work(rt, "planner", "plan", make_ctx(tmp_path, point=None))
    assert outcome.data == {"plans": ["02-01"]}
    assert (tmp_path / "02-01-PLAN.md").exists()
    assert seen[0].role == "planner" and seen[0].phase.number == "2"


def test_effects_run_before_the_outcome(tmp_path: Path) -> None:
    marker = tmp_path / "SUMMARY.md"

    def check_marker(request: Request) -> Outcome:
        return Outcome.succeeded() if marker.exists() else Outcome.failed("no summary")

    rt = ScriptedRuntime(
        {("task", "*"): check_marker},
        effects={("task", "02-01/T1"): lambda request: marker.write_text("done")},
    )
    assert execute_task(rt, task("T1"), make_ctx(tmp_path)).ok


def test_a_list_is_consumed_one_per_call_and_the_last_repeats(tmp_path: Path) -> None:
    rt = ScriptedRuntime({("task", "02-01/T1"): [Outcome.failed("flaky"), Outcome.succeeded()]})
    ctx = make_ctx(tmp_path)
    results = [execute_task(rt, task("T1"), ctx).ok for _ in range(3)]
    assert results == [False, True, True]


def test_wildcard_matches_every_name_of_a_kind_and_exact_wins(tmp_path: Path) -> None:
    rt = ScriptedRuntime(
        {
            ("skill", "*"): Outcome.failed("all skills down"),
            ("skill", "gsd-ok"): Outcome.succeeded(),
        }
    )
    ctx = make_ctx(tmp_path)
    assert not run_skill(rt, "gsd-a", ctx).ok
    assert run_skill(rt, "gsd-ok", ctx).ok


def test_script_can_change_between_calls(tmp_path: Path) -> None:
    rt = ScriptedRuntime()
    ctx = make_ctx(tmp_path)
    assert run_skill(rt, "gsd-a", ctx).ok
    rt.script(("skill", "gsd-a"), Outcome.failed("now broken"))
    assert not run_skill(rt, "gsd-a", ctx).ok


def test_a_responder_must_return_an_outcome(tmp_path: Path) -> None:
    rt = ScriptedRuntime({("skill", "gsd-a"): lambda request: True})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="not an Outcome"):
        run_skill(rt, "gsd-a", make_ctx(tmp_path))


def test_a_contribution_is_recorded_and_work_gets_its_role_context(tmp_path: Path) -> None:
    rt = ScriptedRuntime()
    assert deliver_context(rt, "executor", "Use tokens.", make_ctx(tmp_path, point="execute:pre"))
    execute_task(rt, task("T1"), make_ctx(tmp_path, point=None), ["Use tokens."])
    delivered, work = rt.calls
    assert (delivered.kind, delivered.name, delivered.text) == (
        "context",
        "executor",
        "Use tokens.",
    )
    assert delivered.step == "execute" and delivered.outcome == Outcome.succeeded()
    assert work.role_context == {"executor": ("Use tokens.",)}


def test_agent_verdict_and_banners(tmp_path: Path) -> None:
    printed: list[str] = []
    rt = ScriptedRuntime(progress=printed.append)
    ctx = make_ctx(tmp_path)
    verdict = ask_verdict(rt, {"ref": "ui-auditor", "prompt": "ok?"}, ctx)
    assert verdict.ok and verdict.data == {"block": False, "message": ""}
    spawn_agent(rt, "gsd-mapper", ctx)
    run_skill(rt, "gsd-foo", ctx)
    assert rt.calls[0].request.verdict.prompt == "ok?"
    assert printed == rt.banners == [spawn_banner("ui-auditor"), spawn_banner("gsd-mapper")]
    assert not ask_verdict(rt, {"ref": ""}, ctx).ok


def test_message_and_compact(tmp_path: Path) -> None:
    rt = ScriptedRuntime({("message", "*"): Outcome.failed("session gone")})
    ctx = make_ctx(tmp_path)
    sent = deliver_message(
        rt, "Blocked.", send_as="user", delivery="steer", trigger_turn=False, ctx=ctx
    )
    assert not sent.ok
    assert compact(rt, "Keep decisions.", ctx).ok
    message, compacted = rt.calls
    assert message.key == ("message", "session") and message.text == "Blocked."
    assert compacted.request.instructions == "Keep decisions."


def test_parallel_tasks_are_all_recorded(tmp_path: Path) -> None:
    # All four must be inside the runtime at once for the barrier to open.
    barrier = threading.Barrier(4, timeout=10)

    def meet(request: Request) -> Outcome:
        barrier.wait()
        return Outcome.succeeded()

    rt = ScriptedRuntime({("task", "*"): meet})
    ctx = make_ctx(tmp_path, point=None)
    tasks = [task(f"T{i}") for i in range(4)]
    with make_executor(4) as executor:
        settled = run_all(executor, [lambda t=t: execute_task(rt, t, ctx) for t in tasks])
    assert all(s.ok and s.value.ok for s in settled)
    assert sorted(rt.names("task")) == [t.key for t in tasks]
    assert all(c.outcome is not None and c.outcome.ok for c in rt.calls)
