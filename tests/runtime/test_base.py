"""The shared runtime models: Outcome invariants, DispatchContext, Request JSON, and the typed
calls' own checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from looprail.runtime.base import (
    BaseRuntime,
    DispatchContext,
    Outcome,
    Request,
    TaskWork,
    ask_verdict,
    build_request,
    deliver_context,
    do_phase_work,
    message_ask,
    parse_json_object,
    require_verdict,
    run_command,
    run_query_check,
    spawn_banner,
    step_of,
    verdict_ask,
)
from looprail.runtime.scripted import ScriptedRuntime


def ctx(**overrides) -> DispatchContext:
    fields = {"project": Path("/p"), "phase_number": "4", "point": "execute:wave:pre"}
    fields.update(overrides)
    return DispatchContext(**fields)


def test_banner_is_the_canonical_line() -> None:
    assert spawn_banner("gsd-mapper") == (
        "◆ Spawning gsd-mapper... (runs in a subagent — no output until it returns; "
        "expected, not a freeze)"
    )


def test_step_of_point() -> None:
    assert step_of("execute:wave:pre") == "execute"
    assert step_of("ship:post") == "ship"
    assert ctx().step == "execute"
    assert ctx(point=None).step is None


def test_outcome_constructors() -> None:
    ok = Outcome.succeeded(data={"block": False})
    assert ok.ok and ok.exit_code == 0 and json.loads(ok.stdout) == {"block": False}
    parsed = Outcome.succeeded('{"a": 1}\n')
    assert parsed.data == {"a": 1}
    failed = Outcome.failed("broke\n  badly", exit_code=2)
    assert failed.detail == "broke badly" and not failed.unavailable
    assert Outcome.failed("could not look", exit_code=69).unavailable


@pytest.mark.parametrize(
    "fields",
    [
        {"ok": False},  # a failure must say why
        {"ok": True, "detail": "but why"},
        {"ok": True, "timed_out": True},
        {"ok": False, "detail": "x", "exit_code": 69},  # unavailable must be set
        {"ok": False, "detail": "x", "unavailable": True, "exit_code": 1},
        {"ok": False, "detail": "two\nlines"},
    ],
)
def test_outcome_invariants(fields: dict) -> None:
    with pytest.raises(ValidationError):
        Outcome(**fields)


def test_outcome_is_frozen() -> None:
    with pytest.raises(ValidationError):
        Outcome.succeeded().ok = False  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", None), ("  ", None), ("nope", None), ("[1]", None), ('{"a": 1}', {"a": 1}), ("3", None)],
)
def test_parse_json_object(text: str, expected) -> None:
    assert parse_json_object(text) == expected


def test_require_verdict_leaves_failures_and_good_verdicts_alone() -> None:
    failed = Outcome.failed("exited 1", exit_code=1)
    assert require_verdict(failed, "x") is failed
    good = Outcome.succeeded(data={"block": True, "message": "m"})
    assert require_verdict(good, "x") is good
    no_message = Outcome.succeeded(data={"block": False})
    assert require_verdict(no_message, "x").ok
    cut = Outcome.succeeded('{"block": tr', truncated=True)
    assert require_verdict(cut, "chk").detail == (
        "chk printed more than the output cap; the verdict was cut"
    )


def test_dispatch_context_validation() -> None:
    with pytest.raises(ValidationError, match="absolute"):
        ctx(phase_dir=Path("relative/dir"))
    with pytest.raises(ValidationError, match="phase_number"):
        ctx(phase_number=" ")
    with pytest.raises(ValidationError, match="timeout_s"):
        ctx(timeout_s=0)
    with pytest.raises(ValidationError):
        ctx(flavor="other")
    with pytest.raises(ValidationError):
        ctx(unknown_field=1)


def test_request_json_has_common_keys_and_only_its_kinds_extras() -> None:
    request = build_request("skill", "gsd-foo", ctx(cap_id="docs"))
    body = json.loads(request.to_json())
    assert body == {
        "protocol": 1,
        "kind": "skill",
        "name": "gsd-foo",
        "project": "/p",
        "point": "execute:wave:pre",
        "capId": "docs",
        "flavor": "gsd",
        "phase": {"number": "4", "dir": None},
        "planId": None,
        "taskId": None,
        "wave": None,
    }
    compact = json.loads(build_request("compact", "session", ctx()).to_json())
    assert compact["instructions"] is None


def test_task_work_reads_and_writes_camel_case() -> None:
    work = TaskWork.model_validate(
        {"planId": "04-01", "taskId": "T1", "index": 0, "name": "n", "readFirst": ["a.md"]}
    )
    assert work.read_first == ("a.md",) and work.key == "04-01/T1"
    assert work.model_dump(by_alias=True)["readFirst"] == ("a.md",)


def test_a_contribution_needs_a_point_and_a_role() -> None:
    rt = ScriptedRuntime()
    with pytest.raises(ValueError, match="point"):
        deliver_context(rt, "planner", "x", ctx(point=None))
    with pytest.raises(ValueError, match="role"):
        deliver_context(rt, "", "x", ctx())
    assert rt.calls == []


def test_the_typed_calls_refuse_a_caller_s_bug_before_the_runtime_sees_it() -> None:
    rt = ScriptedRuntime()
    with pytest.raises(TypeError):
        run_command(rt, "sync", ctx())  # type: ignore[arg-type]  # words, not a str
    with pytest.raises(ValueError, match="step"):
        do_phase_work(rt, "planner", "", ctx())
    unusable = ask_verdict(rt, {"prompt": "no ref"}, ctx())
    assert not unusable.ok and unusable.detail == 'agentVerdict has no "ref" naming an agent'
    assert rt.calls == []


def test_a_runtime_that_does_not_check_a_verdict_is_checked_by_the_call() -> None:
    class Plain(BaseRuntime):
        def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
            return Outcome.succeeded("all good")

    outcome = run_query_check(Plain(), ["ui", "gate"], ctx())
    assert outcome.detail == "query 'ui gate' stdout is not a JSON object"
    assert ask_verdict(Plain(), {"ref": "judge"}, ctx()).detail.startswith("verdict 'judge' ")


@pytest.mark.parametrize(
    ("send_as", "delivery", "trigger"),
    [("custom", "nextTurn", True), ("user", "nextTurn", False), ("bot", "steer", False)],
)
def test_invalid_message_deliveries(send_as: str, delivery: str, trigger: bool) -> None:
    with pytest.raises(ValueError):
        message_ask("x", send_as=send_as, delivery=delivery, trigger_turn=trigger)


def test_verdict_ask() -> None:
    assert verdict_ask({"ref": "a", "prompt": "p"}).prompt == "p"
    assert verdict_ask({"ref": "a"}).prompt == ""
    assert verdict_ask({"prompt": "p"}) == 'agentVerdict has no "ref" naming an agent'
    assert "not a string" in verdict_ask({"ref": "a", "prompt": 3})


def test_a_verdict_given_as_data_needs_no_stdout() -> None:
    outcome = Outcome(ok=True, exit_code=0, data={"block": True, "message": "m"})
    assert require_verdict(outcome, "x") is outcome
    empty = Outcome(ok=True, exit_code=0)
    assert require_verdict(empty, "x").detail == "x printed no verdict (stdout is empty)"


def test_an_ok_outcome_has_exit_code_zero_or_none() -> None:
    with pytest.raises(ValidationError, match="exit code 3"):
        Outcome(ok=True, exit_code=3)
    assert Outcome(ok=True).exit_code is None
