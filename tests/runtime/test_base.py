"""The shared runtime models: Outcome invariants, DispatchContext, Request JSON, role context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from looprail.runtime.base import (
    DispatchContext,
    Outcome,
    RoleContextBook,
    TaskWork,
    build_request,
    message_ask,
    parse_json_object,
    require_verdict,
    spawn_banner,
    step_of,
    verdict_ask,
)


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


def test_role_context_book_scopes_to_phase_and_step() -> None:
    book = RoleContextBook()
    book.deliver("executor", "A", ctx(point="execute:pre"))
    book.deliver("executor", "B", ctx(point="execute:wave:pre"))
    book.deliver("executor", "A", ctx(point="execute:wave:pre"))  # same text again: kept once
    assert book.for_role("executor", "execute", ctx()) == ("A", "B")
    assert book.for_role("planner", "execute", ctx()) == ()
    assert book.for_role("executor", "execute", ctx(phase_number="5")) == ()  # another phase
    assert book.for_role("executor", "verify", ctx()) == ()  # another step


def test_execute_contributions_into_verifier_reach_the_verify_step() -> None:
    book = RoleContextBook()
    book.deliver("verifier", "check the API", ctx(point="execute:post"))
    assert book.for_role("verifier", "verify", ctx()) == ("check the API",)
    assert book.for_role("verifier", "execute", ctx()) == ()


def test_role_context_needs_a_point_and_a_role() -> None:
    book = RoleContextBook()
    with pytest.raises(ValueError, match="point"):
        book.deliver("planner", "x", ctx(point=None))
    with pytest.raises(ValueError, match="role"):
        book.deliver("", "x", ctx())


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
