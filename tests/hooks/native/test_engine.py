"""Native hook evaluation, selection, ordering, reactions, delivery and the loop guard
(HooKit checklist §A.15 items 17–42 that apply to the loop)."""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from looprail.hooks.native.actions import Compact, EmitCustomEvent, Interrupt, Message, Shutdown
from looprail.hooks.native.document import HookEntry
from looprail.hooks.native.engine import Effect, EffectSink, NativeHookEngine
from looprail.hooks.native.events import (
    loop_settled_candidate,
    point_candidate,
    task_candidate,
)
from looprail.hooks.native.models import NativeHook
from looprail.hooks.native.parsing import validate_hooks_document

PY = sys.executable
# A shell that appends its whole environment as one JSON line to $DUMP.
DUMP_ENV = (
    f'"{PY}" -c "import json,os; '
    "open(os.environ['DUMP'],'a').write(json.dumps(dict(os.environ))+chr(10))\""
)


def engine_for(entries: dict, tmp_path: Path, **kwargs) -> NativeHookEngine:
    loaded = validate_hooks_document({"local": entries}, file="hooks.json", scope="global")
    assert loaded.status == "valid", loaded.issues
    return NativeHookEngine(loaded.hooks, cwd=kwargs.pop("cwd", tmp_path), **kwargs)


def h(event="task_call", **fields):
    return {"description": "d", "event": event, **fields}


def task(**overrides):
    fields = {
        "task_id": "03-01-1",
        "name": "Write config",
        "plan": "03-01",
        "wave": 1,
        "files": ["src/app.py", "config/.env"],
        "tracker_id": "beads:GSD-42",
        "phase": "03",
    }
    fields.update(overrides)
    return task_candidate("task_call", **fields)


def dumps(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class Recorder:
    def __init__(self, fail_types=()):
        self.seen: list[Effect] = []
        self.fail_types = set(fail_types)

    def deliver(self, effect: Effect) -> None:
        self.seen.append(effect)
        if effect.type in self.fail_types:
            raise RuntimeError(f"cannot deliver {effect.type}")


# --------------------------------------------------------------------------- filters


def test_filter_miss_runs_nothing_and_leaves_no_trace(tmp_path):
    marker = tmp_path / "ran"
    engine = engine_for(
        {
            "x": h(
                filter={"name": "^Deploy"},
                shell=f"touch {marker}",
                action={"type": "interrupt", "outcome": ["pass", "block"]},
            )
        },
        tmp_path,
    )
    evaluation = engine.evaluate("task_call", task())
    assert evaluation.outcome == "pass"
    assert (evaluation.results, evaluation.effects, evaluation.report_rows) == ((), (), ())
    assert evaluation.hook_result_evaluations == ()
    assert not marker.exists()


@pytest.mark.parametrize(
    ("filter_", "matches"),
    [
        ({"name": "onfig"}, True),  # unanchored
        ({"name": "^onfig"}, False),
        ({"wave": "1"}, False),  # a pattern never matches a number
        ({"wave": 1}, True),
        ({"wave": 1.0}, True),
        ({"resolved": 0}, False),  # no coercion between booleans and numbers
        ({"resolved": False}, True),
        ({"missing": None}, False),  # a missing field never matches, not even null
        ({"content": None}, True),
        ({"name": []}, False),  # an empty any-of matches nothing
        ({"name": ["^x", "Write"]}, True),
        ({"files": "(^|/)\\.env$"}, True),  # a scalar matches any member of an array field
        ({"files.0": "app\\.py$"}, True),  # dotted paths walk lists and objects
        ({"files.5": ".*"}, False),
        ({"trackerId": "^beads:", "plan": "^03-"}, True),  # keys are ANDed
        ({"trackerId": "^beads:", "plan": "^04-"}, False),
        ({}, True),
    ],
)
def test_filter_semantics(tmp_path, filter_, matches):
    engine = engine_for({"x": h(filter=filter_, shell="true")}, tmp_path)
    assert bool(engine.evaluate("task_call", task()).results) is matches


def test_dotted_filter_keys_walk_nested_content(tmp_path):
    engine = engine_for({"x": h(filter={"content.verify": "pytest"}, shell="false")}, tmp_path)
    candidate = task(content={"verify": "run pytest -q"}, resolved=True)
    assert engine.evaluate("task_call", candidate).blocked
    assert not engine.evaluate("task_call", task()).blocked


def test_custom_event_filters_on_name_and_points_on_their_fields(tmp_path):
    engine = engine_for(
        {
            "wave": h("execute:wave:pre", filter={"wave": 2}, shell="false"),
            "custom": h("custom_event", filter={"name": "^audit:"}, shell="false"),
        },
        tmp_path,
    )
    assert engine.evaluate("execute:wave:pre", point_candidate("execute:wave:pre", wave=2)).blocked
    assert not engine.evaluate(
        "execute:wave:pre", point_candidate("execute:wave:pre", wave=1)
    ).blocked
    assert engine.evaluate("custom_event", {"name": "audit:done"}).outcome == "report"
    assert engine.evaluate("custom_event", {"name": "other"}).outcome == "pass"


# --------------------------------------------------------------------------- shells


def test_exit_codes_map_to_outcomes_and_every_hook_runs_after_a_failure(tmp_path):
    engine = engine_for(
        {
            "seven": h(shell="exit 7"),
            "ok": h(shell="exit 0"),
            "no": h(shell="false"),
        },
        tmp_path,
    )
    evaluation = engine.evaluate("task_call", task())
    assert [(r.hook_ref, r.outcome, r.code) for r in evaluation.results] == [
        ("local/seven", "block", 7),
        ("local/ok", "pass", 0),
        ("local/no", "block", 1),
    ]
    assert evaluation.outcome == "block"
    assert evaluation.reason == (
        "2 native hooks blocked task_call: local/seven (exit 7); local/no (exit 1)"
    )


def test_a_post_point_failure_is_a_report_with_a_single_line_reason(tmp_path):
    engine = engine_for({"x": h("plan:post", shell="exit 3")}, tmp_path)
    evaluation = engine.evaluate("plan:post", point_candidate("plan:post", phase="03"))
    assert evaluation.outcome == "report"
    assert evaluation.reason == "1 native hook failed at plan:post: local/x (exit 3)"


def test_exact_true_and_false_do_not_spawn_but_count_as_rows(tmp_path, monkeypatch):
    import looprail.hooks.native.shell as shell_module

    def no_processes(*args, **kwargs):
        raise AssertionError("a process was started")

    monkeypatch.setattr(shell_module, "run_bounded", no_processes)
    engine = engine_for({"t": h(shell="true"), "f": h(shell="false")}, tmp_path)
    evaluation = engine.evaluate("task_call", task())
    assert [(r.kind, r.hook_ref, r.outcome) for r in evaluation.report_rows] == [
        ("hook", "local/t", "pass"),
        ("hook", "local/f", "block"),
    ]


def test_a_string_that_is_not_exactly_true_runs_a_real_shell(tmp_path):
    marker = tmp_path / "x"
    engine = engine_for({"t": h(shell=f" true && touch {marker}")}, tmp_path)
    assert engine.evaluate("task_call", task()).outcome == "pass"
    assert marker.exists()


def test_timeout_fails_closed_with_code_null_using_the_hooks_own_timeout(tmp_path):
    engine = engine_for({"slow": h(shell="sleep 30", timeoutMs=300)}, tmp_path)
    evaluation = engine.evaluate("task_call", task())
    (result,) = evaluation.results
    assert (result.outcome, result.code, result.started) == ("block", None, True)
    assert "timed out after 300 ms" in evaluation.reason
    assert evaluation.report_rows[0].code is None


def test_spawn_failure_fails_closed_without_a_hook_row(tmp_path):
    engine = engine_for(
        {
            "x": h(
                shell="true; echo", action={"type": "interrupt", "outcome": "block", "code": None}
            )
        },
        tmp_path,
        cwd=tmp_path / "does-not-exist",
    )
    evaluation = engine.evaluate("task_call", task())
    (result,) = evaluation.results
    assert (result.outcome, result.code, result.started) == ("block", None, False)
    assert "could not start" in result.detail
    assert [(r.kind, r.action_type) for r in evaluation.report_rows] == [("action", "interrupt")]


def test_nul_byte_in_a_command_is_a_spawn_failure_not_a_crash(tmp_path):
    entry = HookEntry.model_validate(
        {"description": "d", "event": "task_call", "shell": "echo a\x00b"}
    )
    hook = NativeHook(section="local", name="nul", entry=entry)
    evaluation = NativeHookEngine([hook], cwd=tmp_path).evaluate("task_call", task())
    assert (evaluation.outcome, evaluation.results[0].code, evaluation.errors) == (
        "block",
        None,
        (),
    )


def test_stdin_is_closed(tmp_path):
    # `cat` returns at once on a closed stdin; on an open pipe it would hang until the timeout.
    engine = engine_for({"x": h(shell="cat", timeoutMs=10000)}, tmp_path)
    assert engine.evaluate("task_call", task()).outcome == "pass"


# --------------------------------------------------------------------------- preconditions


def test_when_false_skips_the_hook_entirely(tmp_path):
    marker = tmp_path / "ran"
    engine = engine_for(
        {
            "x": h(
                when="exit 1",
                shell=f"touch {marker}; exit 1",
                action={"type": "interrupt", "outcome": ["pass", "block"]},
            )
        },
        tmp_path,
    )
    evaluation = engine.evaluate("task_call", task())
    assert (evaluation.outcome, evaluation.results, evaluation.report_rows) == ("pass", (), ())
    assert not marker.exists()


def test_when_that_cannot_run_fails_closed_and_still_selects_a_null_code_action(tmp_path):
    engine = engine_for(
        {
            "x": h(
                when="sleep 30",
                timeoutMs=300,
                shell="true",
                action={
                    "type": "message",
                    "outcome": "block",
                    "code": None,
                    "message": "precondition broke",
                    "delivery": "steer",
                },
            )
        },
        tmp_path,
    )
    evaluation = engine.evaluate("task_call", task())
    (result,) = evaluation.results
    assert (result.outcome, result.code, result.failed_during) == ("block", None, "when")
    assert "during when" in evaluation.reason
    assert [(r.kind, r.action_type) for r in evaluation.report_rows] == [("action", "message")]
    assert [e.type for e in evaluation.effects] == ["message"]


def test_hook_row_duration_includes_a_passing_when(tmp_path):
    engine = engine_for({"x": h(when="sleep 0.2", shell="true")}, tmp_path)
    (row,) = engine.evaluate("task_call", task()).report_rows
    assert row.duration_s >= 0.2


# --------------------------------------------------------------------------- environment


def test_shells_see_event_data_in_looprail_variables(tmp_path, monkeypatch):
    dump = tmp_path / "env.jsonl"
    monkeypatch.setenv("LOOPRAIL_TASK_ID", "stale-from-an-outer-hook")
    monkeypatch.setenv("LOOPRAIL_ORIGIN_HOOK_REF", "stale")
    monkeypatch.setenv("LOOPRAIL_HOME", "/keep/this")
    engine = engine_for(
        {"a": h(when=DUMP_ENV, shell=DUMP_ENV), "b": h(shell=DUMP_ENV)},
        tmp_path,
        run_id="run-1",
        env={"DUMP": str(dump)},
    )
    candidate = task(task_id="03-01-2", content={"action": "edit"}, resolved=True)
    engine.evaluate("task_call", candidate, env={"EXTRA": "yes"})
    when_env, a_env, b_env = dumps(dump)
    assert when_env["LOOPRAIL_HOOK_INVOCATION_ID"] == a_env["LOOPRAIL_HOOK_INVOCATION_ID"]
    assert a_env["LOOPRAIL_HOOK_INVOCATION_ID"] != b_env["LOOPRAIL_HOOK_INVOCATION_ID"]
    assert uuid.UUID(a_env["LOOPRAIL_HOOK_INVOCATION_ID"]).version == 4
    assert a_env["LOOPRAIL_EVENT"] == "task_call"
    assert a_env["LOOPRAIL_HOOK_REF"] == "local/a"
    assert a_env["LOOPRAIL_HOOK_EVENT"] == "task_call"
    assert a_env["LOOPRAIL_RUN_ID"] == "run-1"
    assert a_env["LOOPRAIL_TASK_ID"] == "03-01-2"
    assert a_env["LOOPRAIL_TASK_TRACKER_ID"] == "beads:GSD-42"
    assert a_env["LOOPRAIL_TASK_NAME"] == "Write config"
    assert a_env["LOOPRAIL_TASK_PLAN"] == "03-01"
    assert a_env["LOOPRAIL_WAVE"] == "1"
    assert a_env["LOOPRAIL_PHASE"] == "03"
    assert a_env["LOOPRAIL_TASK_FILES"] == "src/app.py\nconfig/.env"
    assert a_env["LOOPRAIL_TASK_RESOLVED"] == "true"
    assert json.loads(a_env["LOOPRAIL_TASK_CONTENT"]) == {"action": "edit"}
    assert json.loads(a_env["LOOPRAIL_EVENT_PAYLOAD"])["taskId"] == "03-01-2"
    assert "LOOPRAIL_ORIGIN_HOOK_REF" not in a_env  # stale managed data is removed
    assert a_env["LOOPRAIL_HOME"] == "/keep/this"  # user settings are not
    assert a_env["PWD"] == a_env["LOOPRAIL_CWD"] == str(tmp_path)
    assert a_env["EXTRA"] == "yes"


def test_null_values_leave_variables_unset(tmp_path):
    dump = tmp_path / "env.jsonl"
    engine = engine_for({"a": h("loop_settled", shell=DUMP_ENV)}, tmp_path, env={"DUMP": str(dump)})
    engine.evaluate("loop_settled", loop_settled_candidate(status="completed"))
    (env,) = dumps(dump)
    assert env["LOOPRAIL_LOOP_STATUS"] == "completed"
    assert "LOOPRAIL_PHASE" not in env


# --------------------------------------------------------------------------- crashes


def test_a_crashing_hook_has_no_result_siblings_run_and_the_event_fails_closed(tmp_path):
    # a filter the reader would refuse, so built without validation
    bad_filter = HookEntry.model_construct(description="d", event="task_call", filter={"name": "["})
    broken = NativeHook(section="local", name="broken", entry=bad_filter)
    fine_entry = HookEntry.model_validate(
        {"description": "d", "event": "task_call", "shell": "true"}
    )
    fine = NativeHook(section="local", name="fine", entry=fine_entry)
    evaluation = NativeHookEngine([broken, fine], cwd=tmp_path).evaluate("task_call", task())
    assert [r.hook_ref for r in evaluation.results] == ["local/fine"]
    assert evaluation.outcome == "block"
    assert "native hook local/broken failed to execute" in evaluation.reason
    assert len(evaluation.errors) == 1


# --------------------------------------------------------------------------- actions + ordering


def test_owned_action_matches_only_its_owners_result_never_the_aggregate(tmp_path):
    engine = engine_for(
        {
            "blocker": h(
                shell="exit 2",
                action={
                    "type": "message",
                    "outcome": "block",
                    "code": 2,
                    "message": "blocked",
                    "delivery": "followUp",
                },
            ),
            "passer": h(shell="true", action={"type": "compact", "outcome": "pass"}),
            "wrong-code": h(
                shell="exit 3", action={"type": "interrupt", "outcome": "block", "code": 2}
            ),
        },
        tmp_path,
    )
    evaluation = engine.evaluate("task_call", task())
    assert evaluation.outcome == "block"
    assert [(e.hook_ref, e.type) for e in evaluation.effects] == [
        ("local/blocker", "message"),
        ("local/passer", "compact"),
    ]
    assert [r.action_selected for r in evaluation.results] == [True, True, False]


def test_effects_are_immutable_requests_without_outcome_or_code(tmp_path):
    engine = engine_for(
        {
            "x": h(
                shell="false",
                action={
                    "type": "emit-custom-event",
                    "outcome": "block",
                    "code": 1,
                    "name": "n",
                    "data": {"k": [1]},
                },
            )
        },
        tmp_path,
    )
    evaluation = engine.evaluate("task_call", task())
    (effect,) = evaluation.effects
    assert effect.hook_ref == "local/x"
    assert effect.invocation_id == evaluation.results[0].invocation_id
    assert effect.to_json() == {
        "hookRef": "local/x",
        "event": "task_call",
        "action": {"type": "emit-custom-event", "name": "n", "data": {"k": [1]}},
    }
    assert not hasattr(effect.request, "outcome") and not hasattr(effect.request, "code")
    with pytest.raises(FrozenInstanceError):
        effect.hook_ref = "other"  # type: ignore[misc]
    effect.request.data["k"].append(2)
    assert effect.request.data == {"k": [1]}


def test_effects_and_rows_are_result_major_with_one_hook_result_per_result(tmp_path):
    engine = engine_for(
        {
            "one": h(shell="false", action={"type": "interrupt", "outcome": "block"}),
            "two": h(shell="true", action={"type": "compact", "outcome": "pass"}),
            "watch": h(
                "hook_result",
                shell="true",
                action={"type": "emit-custom-event", "outcome": "pass", "name": "seen"},
            ),
            "fussy": h("hook_result", filter={"outcome": "block"}, shell="exit 4"),
        },
        tmp_path,
    )
    evaluation = engine.evaluate("task_call", task())
    assert [(e.hook_ref, e.hook_event, e.origin_ref) for e in evaluation.effects] == [
        ("local/one", "task_call", None),
        ("local/watch", "hook_result", "local/one"),
        ("local/two", "task_call", None),
        ("local/watch", "hook_result", "local/two"),
    ]
    rows = evaluation.report_rows
    assert [(r.hook_ref, r.outcome, r.code, r.action_type, r.origin_ref) for r in rows] == [
        ("local/one", "block", 1, None, None),
        ("local/one", "block", 1, "interrupt", None),
        ("local/watch", "pass", 0, None, "local/one"),
        ("local/watch", "pass", 0, "emit-custom-event", "local/one"),
        ("local/fussy", "report", 4, None, "local/one"),
        ("local/two", "pass", 0, None, None),
        ("local/two", "pass", 0, "compact", None),
        ("local/watch", "pass", 0, None, "local/two"),
        ("local/watch", "pass", 0, "emit-custom-event", "local/two"),
    ]
    assert [r.origin_outcome for r in rows if r.origin_ref] == ["block"] * 3 + ["pass"] * 2
    projected = evaluation.hook_result_evaluations
    assert len(projected) == len(evaluation.results) == 2
    assert [(p.origin_ref, p.outcome) for p in projected] == [
        ("local/one", "report"),
        ("local/two", "pass"),
    ]
    # Reactions never change the frozen native outcome and are never projected again.
    assert evaluation.outcome == "block"
    assert all(p.hook_result_evaluations == () for p in projected)


def test_reactions_cannot_turn_a_pass_into_a_failure(tmp_path):
    engine = engine_for(
        {"ok": h(shell="true"), "angry": h("hook_result", shell="exit 9")}, tmp_path
    )
    evaluation = engine.evaluate("task_call", task())
    assert evaluation.outcome == "pass"
    assert evaluation.hook_result_evaluations[0].outcome == "report"


def test_action_only_hook_is_a_true_hook_with_a_row_and_a_projection(tmp_path):
    engine = engine_for(
        {
            "only": h("plan:pre", action={"type": "compact", "outcome": "pass"}),
            "see": h(
                "hook_result",
                filter={
                    "hookRef": "^local/only$",
                    "outcome": "pass",
                    "code": 0,
                    "originEvent": "plan:pre",
                },
                shell="true",
            ),
        },
        tmp_path,
    )
    evaluation = engine.evaluate("plan:pre", point_candidate("plan:pre"))
    assert [(r.kind, r.hook_ref) for r in evaluation.report_rows] == [
        ("hook", "local/only"),
        ("action", "local/only"),
        ("hook", "local/see"),
    ]
    assert evaluation.hook_result_evaluations[0].results[0].hook_ref == "local/see"


def test_hook_result_shells_see_the_origin_and_their_own_invocation(tmp_path):
    dump = tmp_path / "env.jsonl"
    engine = engine_for(
        {"origin": h(shell="exit 5"), "see": h("hook_result", shell=DUMP_ENV)},
        tmp_path,
        env={"DUMP": str(dump)},
    )
    evaluation = engine.evaluate("task_call", task())
    (env,) = dumps(dump)
    assert env["LOOPRAIL_EVENT"] == "hook_result"
    assert env["LOOPRAIL_ORIGIN_HOOK_REF"] == "local/origin"
    assert env["LOOPRAIL_ORIGIN_OUTCOME"] == "block"
    assert env["LOOPRAIL_ORIGIN_CODE"] == "5"
    assert env["LOOPRAIL_ORIGIN_EVENT"] == "task_call"
    assert env["LOOPRAIL_ORIGIN_INVOCATION_ID"] == evaluation.results[0].invocation_id
    assert env["LOOPRAIL_HOOK_INVOCATION_ID"] != env["LOOPRAIL_ORIGIN_INVOCATION_ID"]


def test_report_rows_hold_no_commands_payloads_messages_or_ids(tmp_path):
    engine = engine_for(
        {
            "x": h(
                shell="echo SECRET-COMMAND; exit 1",
                action={
                    "type": "message",
                    "outcome": "block",
                    "message": "SECRET-BODY",
                    "delivery": "steer",
                },
            )
        },
        tmp_path,
    )
    evaluation = engine.evaluate("task_call", task(name="SECRET-PAYLOAD"))
    text = json.dumps([r.to_json() for r in evaluation.report_rows])
    for secret in ("SECRET", evaluation.results[0].invocation_id):
        assert secret not in text
    assert [r.to_json()["type"] for r in evaluation.report_rows] == ["hook", "action"]
    assert "SECRET" not in evaluation.reason


def test_unknown_events_and_direct_hook_result_are_programming_errors(tmp_path):
    engine = engine_for({}, tmp_path)
    with pytest.raises(ValueError, match="supported events"):
        engine.evaluate("tool_call", {})
    with pytest.raises(ValueError, match="raised by the engine"):
        engine.evaluate("hook_result", {})


def test_the_candidate_is_snapshotted(tmp_path):
    engine = engine_for({"x": h(filter={"files": "\\.env$"}, shell="false")}, tmp_path)
    candidate = task(files=["a.py"])
    evaluation = engine.evaluate("task_call", candidate)
    candidate["files"].append(".env")
    assert evaluation.outcome == "pass"


# --------------------------------------------------------------------------- delivery


def test_a_delivery_failure_leaves_the_block_standing_and_later_effects_go_out(tmp_path):
    engine = engine_for(
        {
            "a": h(
                shell="false",
                action={
                    "type": "message",
                    "outcome": "block",
                    "message": "m",
                    "delivery": "followUp",
                },
            ),
            "b": h(
                shell="false", action={"type": "shutdown", "outcome": "block", "interrupt": True}
            ),
        },
        tmp_path,
    )
    evaluation = engine.evaluate("task_call", task())
    sink = Recorder(fail_types={"message"})
    assert isinstance(sink, EffectSink)
    records = engine.deliver(evaluation.effects, sink)
    assert [(r.effect.type, r.delivered) for r in records] == [
        ("message", False),
        ("shutdown", True),
    ]
    assert records[0].error == "RuntimeError: cannot deliver message"
    assert evaluation.blocked  # frozen, whatever delivery did
    assert [e.request for e in sink.seen] == [
        Message(message="m", delivery="followUp"),
        Shutdown(interrupt=True),
    ]


def test_effect_requests_are_typed_for_the_sink(tmp_path):
    engine = engine_for(
        {
            "i": h(shell="false", action={"type": "interrupt", "outcome": "block"}),
            "c": h(
                shell="true",
                action={"type": "compact", "outcome": "pass", "instructions": "keep decisions"},
            ),
        },
        tmp_path,
    )
    sink = Recorder()
    engine.deliver(engine.evaluate("task_call", task()).effects, sink)
    assert [e.request for e in sink.seen] == [Interrupt(), Compact(instructions="keep decisions")]


def test_emit_custom_event_raises_one_level_of_custom_event(tmp_path):
    dump = tmp_path / "env.jsonl"
    engine = engine_for(
        {
            "emit": h(
                "verify:post",
                shell="true",
                action={
                    "type": "emit-custom-event",
                    "outcome": "pass",
                    "name": "audit:verified",
                    "data": {"n": 1},
                },
            ),
            "listen": h(
                "custom_event",
                filter={"name": "^audit:"},
                shell=DUMP_ENV,
                action={"type": "emit-custom-event", "outcome": "pass", "name": "audit:again"},
            ),
        },
        tmp_path,
        env={"DUMP": str(dump)},
    )
    evaluation = engine.evaluate("verify:post", point_candidate("verify:post"))
    sink = Recorder()
    records = engine.deliver(evaluation.effects, sink)
    assert [(r.effect.hook_ref, r.effect.event, r.raised is not None) for r in records] == [
        ("local/emit", "verify:post", True),
        ("local/listen", "custom_event", False),  # delivered, but never raised again
    ]
    raised = records[0].raised
    assert raised.event == "custom_event"
    assert [r.hook_ref for r in raised.results] == ["local/listen"]
    (env,) = dumps(dump)  # the listener ran exactly once
    assert env["LOOPRAIL_CUSTOM_EVENT_NAME"] == "audit:verified"
    assert json.loads(env["LOOPRAIL_CUSTOM_EVENT_DATA"]) == {"n": 1}
    assert env["LOOPRAIL_ORIGIN_HOOK_REF"] == "local/emit"
    assert [e.request for e in sink.seen] == [
        EmitCustomEvent(name="audit:verified", data_json='{"n":1}'),
        EmitCustomEvent(name="audit:again"),
    ]


# --------------------------------------------------------------------------- loop guard


def test_the_loop_guard_stops_a_runaway_continuation(tmp_path):
    # The seed's warning: an unconditional user message on "the loop settled" loops forever.
    engine = engine_for(
        {
            "keep-going": h(
                "loop_settled",
                action={
                    "type": "message",
                    "outcome": "pass",
                    "message": "Continue",
                    "delivery": "steer",
                    "sendAs": "user",
                },
                maxSelections=2,
            )
        },
        tmp_path,
    )
    sink = Recorder()
    continuations = 0
    for _ in range(10):  # each delivered message would make the loop settle again
        evaluation = engine.evaluate("loop_settled", loop_settled_candidate(status="completed"))
        continuations += len(engine.deliver(evaluation.effects, sink))
        if not evaluation.effects:
            break
    assert continuations == 2
    assert engine.selections("local/keep-going") == 2
    rows = evaluation.report_rows
    assert [(r.kind, r.action_type, r.guarded) for r in rows] == [
        ("hook", None, False),
        ("action", "message", True),
    ]
    assert evaluation.results[0].guarded and not evaluation.results[0].action_selected


def test_loop_guard_counts_per_engine_so_each_run_starts_fresh(tmp_path):
    entries = {
        "x": h(shell="false", maxSelections=1, action={"type": "interrupt", "outcome": "block"})
    }
    first = engine_for(entries, tmp_path)
    assert len(first.evaluate("task_call", task()).effects) == 1
    assert len(first.evaluate("task_call", task()).effects) == 0
    second = engine_for(entries, tmp_path, run_id="next")
    assert len(second.evaluate("task_call", task()).effects) == 1
