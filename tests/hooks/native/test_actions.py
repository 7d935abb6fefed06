"""Owned Actions: every validation example and rule of seed 002 (events adapted to the loop:
`tool_call` → `task_call`, `tool_result` → `task_result`, `agent_settled` → `loop_settled`),
and selection against the owner's own outcome and code."""

from __future__ import annotations

import json

import pytest

from looprail.hooks.native.actions import (
    Compact,
    EmitCustomEvent,
    Interrupt,
    Message,
    Shutdown,
)
from looprail.hooks.native.events import EVENTS
from looprail.hooks.native.parsing import validate_hooks_document


def validate(doc):
    return validate_hooks_document(doc, file="hooks.json", scope="global")


def validate_action(action, event):
    """The Action as a Hook of `event` owns it: the Hook alone in a file."""
    assert event in EVENTS
    return validate({"local": {"h": {"description": "d", "event": event, "action": action}}})


def action_problems(action, event="task_call"):
    issues = validate_action(action, event).issues
    return [(i.path.replace("$.local.h.", "$.", 1), i.reason) for i in issues]


def parsed(action, event="task_call"):
    result = validate_action(action, event)
    assert result.issues == (), result.issues
    return result.hooks[0].entry.action


# --------------------------------------------------------------------------- seed documents

SEED_VALID = [
    # "A custom block message"
    """{
      "local": {
        "protect-env": {
          "description": "Block writes to dotenv files",
          "event": "task_call",
          "filter": { "toolName": "^write$", "path": "(^|/)\\\\.env$" },
          "shell": "false",
          "action": {
            "type": "message",
            "outcome": "block",
            "code": 1,
            "message": "A dotenv write was blocked by HooKit.",
            "delivery": "followUp",
            "sendAs": "custom"
          }
        }
      }
    }""",
    # "A user message with Pi input processing"
    """{
      "local": {
        "review-after-tool": {
          "description": "Ask the review Skill to inspect a completed tool result",
          "event": "task_result",
          "action": {
            "type": "message",
            "outcome": "pass",
            "message": "/skill:review focus on safety",
            "delivery": "steer",
            "sendAs": "user"
          }
        }
      }
    }""",
]

SEED_INVALID = [
    # "A user message cannot use nextTurn or configure triggerTurn"
    (
        """{
      "local": {
        "invalid-user-message": {
          "description": "Contradictory user continuation settings",
          "event": "loop_settled",
          "action": {
            "type": "message",
            "outcome": "pass",
            "message": "Continue",
            "delivery": "nextTurn",
            "sendAs": "user",
            "triggerTurn": false
          }
        }
      }
    }""",
        {
            '$.local["invalid-user-message"].action.delivery',
            '$.local["invalid-user-message"].action.triggerTurn',
        },
    ),
    # "A custom nextTurn message cannot request an immediate turn"
    (
        """{
      "local": {
        "invalid-custom-message": {
          "description": "Contradictory custom continuation settings",
          "event": "loop_settled",
          "action": {
            "type": "message",
            "outcome": "pass",
            "message": "Continue later",
            "delivery": "nextTurn",
            "sendAs": "custom",
            "triggerTurn": true
          }
        }
      }
    }""",
        {'$.local["invalid-custom-message"].action.triggerTurn'},
    ),
]


@pytest.mark.parametrize("text", SEED_VALID)
def test_seed_valid_examples_are_valid(text):
    result = validate(json.loads(text))
    assert result.status == "valid", result.issues


def test_seed_block_message_example_parses_to_its_request():
    result = validate(json.loads(SEED_VALID[0]))
    (hook,) = result.hooks
    assert (hook.entry.action.outcome, hook.entry.action.code) == ("block", 1)
    assert hook.entry.action.request == Message(
        message="A dotenv write was blocked by HooKit.", delivery="followUp", send_as="custom"
    )
    user = validate(json.loads(SEED_VALID[1])).hooks[0]
    assert user.entry.shell == "true"  # an action-only Hook is the canonical "true" Hook
    assert user.entry.action.request.send_as == "user"


@pytest.mark.parametrize(("text", "paths"), SEED_INVALID)
def test_seed_invalid_examples_are_invalid_at_the_offending_fields(text, paths):
    result = validate(json.loads(text))
    assert result.status == "invalid"
    assert {i.path for i in result.issues} == paths


# The "Small valid Action" column of the seed's variant table, each on a fitting event.
SMALL_VALID = [
    ({"type": "interrupt", "outcome": "block"}, "task_call", Interrupt()),
    (
        {"type": "shutdown", "outcome": "report", "interrupt": True},
        "loop_settled",
        Shutdown(interrupt=True),
    ),
    (
        {"type": "compact", "outcome": "pass", "instructions": "Preserve policy decisions."},
        "plan:post",
        Compact(instructions="Preserve policy decisions."),
    ),
    (
        {"type": "message", "outcome": "block", "message": "Blocked.", "delivery": "followUp"},
        "execute:pre",
        Message(message="Blocked.", delivery="followUp"),
    ),
    (
        {"type": "emit-custom-event", "outcome": "pass", "name": "audit:complete"},
        "ship:post",
        EmitCustomEvent(name="audit:complete"),
    ),
]


@pytest.mark.parametrize(("action", "event", "expected"), SMALL_VALID)
def test_seed_small_valid_actions(action, event, expected):
    assert parsed(action, event).request == expected


def test_seed_field_table_examples():
    # `outcome: ["pass", "report"]`, `code: [1, null]`, `data: {"source": "HooKit"}`
    action = parsed(
        {
            "type": "emit-custom-event",
            "outcome": ["pass", "report"],
            "code": [1, None],
            "name": "audit:blocked",
            "data": {"source": "HooKit"},
        },
        "task_result",
    )
    assert (action.outcome, action.code) == (["pass", "report"], [1, None])
    assert action.request.data == {"source": "HooKit"}


# --------------------------------------------------------------------------- rules


def test_outcome_is_required():
    assert action_problems({"type": "interrupt"}) == [
        ("$.action.outcome", "is required: the owner's Hook Outcome that selects this Action")
    ]


@pytest.mark.parametrize(
    ("event", "outcome", "path"),
    [
        ("task_call", "patch", "$.action.outcome"),
        ("task_call", "report", "$.action.outcome"),
        ("loop_settled", "block", "$.action.outcome"),
        ("plan:post", "cancel", "$.action.outcome"),
        ("verify:pre", ["pass", "report"], "$.action.outcome[1]"),
    ],
)
def test_outcome_must_be_possible_for_the_event(event, outcome, path):
    problems = action_problems({"type": "interrupt", "outcome": outcome}, event)
    assert [p for p, _ in problems] == [path]
    assert "is not possible for a" in problems[0][1]


def test_empty_selector_arrays_are_rejected():
    assert [p for p, _ in action_problems({"type": "interrupt", "outcome": []})] == [
        "$.action.outcome"
    ]
    assert [
        p for p, _ in action_problems({"type": "interrupt", "outcome": "block", "code": []})
    ] == ["$.action.code"]


@pytest.mark.parametrize(
    ("outcome", "code", "ok"),
    [
        ("pass", 1, False),
        ("block", 0, False),
        ("pass", 0, True),
        ("block", None, True),
        ("block", [0, 2], True),
        (["pass", "block"], [1, None], True),
        (["pass", "block"], [0], True),
        ("pass", [None, 3], False),
        ("block", True, False),  # a boolean is not an exit code
        ("block", "1", False),
    ],
)
def test_code_must_have_a_possible_pairing_with_outcome(outcome, code, ok):
    problems = action_problems({"type": "interrupt", "outcome": outcome, "code": code})
    assert (problems == []) is ok, problems


@pytest.mark.parametrize(
    ("action", "path"),
    [
        ({"type": "interrupt", "outcome": "block", "instructions": "x"}, "$.action.instructions"),
        ({"type": "shutdown", "outcome": "block", "message": "x"}, "$.action.message"),
        ({"type": "compact", "outcome": "block", "interrupt": True}, "$.action.interrupt"),
        (
            {
                "type": "message",
                "outcome": "block",
                "message": "m",
                "delivery": "steer",
                "name": "n",
            },
            "$.action.name",
        ),
        (
            {"type": "emit-custom-event", "outcome": "block", "name": "n", "sendAs": "user"},
            "$.action.sendAs",
        ),
        ({"type": "interrupt", "outcome": "block", "maxSelections": 1}, "$.action.maxSelections"),
    ],
)
def test_no_fields_outside_a_variants_shape(action, path):
    problems = action_problems(action)
    assert [p for p, _ in problems] == [path]
    assert problems[0][1].startswith("unknown field for Action type")


@pytest.mark.parametrize(
    ("action", "path"),
    [
        ({"type": "nope", "outcome": "block"}, "$.action.type"),
        ({"outcome": "block"}, "$.action.type"),
        ({"type": "shutdown", "outcome": "block", "interrupt": "yes"}, "$.action.interrupt"),
        ({"type": "compact", "outcome": "block", "instructions": 3}, "$.action.instructions"),
        ({"type": "message", "outcome": "block", "delivery": "steer"}, "$.action.message"),
        ({"type": "message", "outcome": "block", "message": "m"}, "$.action.delivery"),
        (
            {"type": "message", "outcome": "block", "message": " \n\t", "delivery": "steer"},
            "$.action.message",
        ),
        (
            {"type": "message", "outcome": "block", "message": "m", "delivery": "later"},
            "$.action.delivery",
        ),
        (
            {
                "type": "message",
                "outcome": "block",
                "message": "m",
                "delivery": "steer",
                "sendAs": "system",
            },
            "$.action.sendAs",
        ),
        (
            {
                "type": "message",
                "outcome": "block",
                "message": "m",
                "delivery": "steer",
                "sendAs": "user",
                "triggerTurn": True,
            },
            "$.action.triggerTurn",
        ),
        (
            {
                "type": "message",
                "outcome": "block",
                "message": "m",
                "delivery": "nextTurn",
                "triggerTurn": True,
            },
            "$.action.triggerTurn",
        ),
        (
            {
                "type": "message",
                "outcome": "block",
                "message": "m",
                "delivery": "steer",
                "triggerTurn": "yes",
            },
            "$.action.triggerTurn",
        ),
        ({"type": "emit-custom-event", "outcome": "block", "name": "  "}, "$.action.name"),
        ({"type": "emit-custom-event", "outcome": "block"}, "$.action.name"),
        (
            {"type": "emit-custom-event", "outcome": "block", "name": "n", "data": float("nan")},
            "$.action.data",
        ),
        (
            {"type": "emit-custom-event", "outcome": "block", "name": "n", "data": {"s": {1, 2}}},
            "$.action.data",
        ),
        ("interrupt", "$.action"),
    ],
)
def test_variant_rules(action, path):
    problems = action_problems(action)
    assert [p for p, _ in problems] == [path], problems


def test_message_defaults_and_valid_combinations():
    custom = parsed(
        {"type": "message", "outcome": "pass", "message": " keep ", "delivery": "nextTurn"}
    )
    assert custom.request == Message(message=" keep ", delivery="nextTurn", send_as="custom")
    trigger = parsed(
        {
            "type": "message",
            "outcome": "pass",
            "message": "go",
            "delivery": "steer",
            "triggerTurn": True,
        }
    )
    assert trigger.request.trigger_turn is True
    user = parsed(
        {
            "type": "message",
            "outcome": "pass",
            "message": "go",
            "delivery": "followUp",
            "sendAs": "user",
        }
    )
    assert user.request.send_as == "user"


def test_problems_are_reported_together_through_the_file_validator():
    result = validate(
        {
            "local": {
                "x": {
                    "description": "d",
                    "event": "plan:pre",
                    "action": {"type": "message", "outcome": "report", "code": 0, "extra": 1},
                }
            }
        }
    )
    assert {i.path for i in result.issues} == {
        "$.local.x.action.extra",
        "$.local.x.action.outcome",
        "$.local.x.action.message",
        "$.local.x.action.delivery",
    }


# --------------------------------------------------------------------------- selection


@pytest.mark.parametrize(
    ("outcome", "code", "result_outcome", "result_code", "selected"),
    [
        ("block", None, "block", 1, True),
        ("block", None, "pass", 0, False),
        ("block", 1, "block", 2, False),
        ("block", [1, None], "block", None, True),
        ("block", 1, "block", 1.0, True),
        (["pass", "block"], None, "pass", 0, True),
        ("pass", 0, "pass", 0, True),
    ],
)
def test_selection_is_an_exact_and_of_outcome_and_code(
    outcome, code, result_outcome, result_code, selected
):
    action = {"type": "interrupt", "outcome": outcome}
    if code is not None:
        action["code"] = code
    assert parsed(action).selects(result_outcome, result_code) is selected


def test_custom_event_data_is_static_and_cannot_be_mutated_through_the_request():
    request = parsed(
        {"type": "emit-custom-event", "outcome": "pass", "name": "n", "data": {"list": [1]}}
    ).request
    request.data["list"].append(2)
    assert request.data == {"list": [1]}
    with pytest.raises(AttributeError):
        request.name = "other"  # type: ignore[misc]
