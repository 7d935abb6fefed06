"""The JSON Schema of a native hooks file."""

from __future__ import annotations

from typing import Any

from looprail.hooks.native.events import (
    EVENT_NAMES,
    EVENTS,
    OUTCOMES,
)
from looprail.hooks.native.models import DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS
from looprail.hooks.native.parsing import REF_RE, SECTION_RE

# --------------------------------------------------------------------------- JSON Schema


def hooks_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of hooks.json, for editors. `looprail hooks validate` is the
    authority: it also checks what a schema cannot say well (regular expressions compile, an
    Action's `code` can pair with its `outcome`, Preset members are not Presets)."""
    block_events = [name for name, spec in EVENTS.items() if spec.failure == "block"]
    scalar = {"type": ["string", "number", "boolean", "null"]}
    filter_value = {"anyOf": [scalar, {"type": "array", "items": scalar}]}
    regex_value = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    outcome_or_list = {
        "anyOf": [
            {"$ref": "#/$defs/outcome"},
            {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/outcome"}},
        ]
    }
    code = {"type": ["number", "null"]}

    def variant(kind: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        props = {
            "type": {"const": kind},
            "outcome": {
                **outcome_or_list,
                "description": "The owner's Hook Outcome(s) that select this Action.",
            },
            "code": {
                "anyOf": [code, {"type": "array", "minItems": 1, "items": code}],
                "description": "Narrows selection to the owner's exit code: pass has 0, a "
                "failure a non-zero code or null (timeout, could not start).",
            },
            **properties,
        }
        return {
            "type": "object",
            "required": ["type", "outcome", *required],
            "properties": props,
            "additionalProperties": False,
        }

    non_blank = {"type": "string", "pattern": r"\S"}
    message = variant(
        "message",
        {
            "message": {**non_blank, "description": "Static text, never interpolated."},
            "sendAs": {"enum": ["custom", "user"], "default": "custom"},
            "delivery": {"enum": ["steer", "followUp", "nextTurn"]},
            "triggerTurn": {"type": "boolean", "default": False},
        },
        ["message", "delivery"],
    )
    message["allOf"] = [
        {
            "if": {"required": ["sendAs"], "properties": {"sendAs": {"const": "user"}}},
            "then": {
                "properties": {"delivery": {"enum": ["steer", "followUp"]}},
                "not": {"required": ["triggerTurn"]},
            },
        },
        {
            "if": {"properties": {"delivery": {"const": "nextTurn"}}},
            "then": {"properties": {"triggerTurn": {"const": False}}},
        },
    ]
    hook = {
        "type": "object",
        "description": "A Hook: runs `when` then `shell` at `event` when `filter` matches.",
        "required": ["description", "event"],
        "anyOf": [{"required": ["shell"]}, {"required": ["action"]}],
        "properties": {
            "description": {"type": "string"},
            "event": {"enum": list(EVENT_NAMES)},
            "filter": {
                "type": "object",
                "description": "ANDed fields of the event candidate; strings are regular "
                "expressions, other scalars match exactly, arrays are any-of.",
                "additionalProperties": filter_value,
            },
            "when": {"type": "string", "description": "Precondition /bin/sh command."},
            "shell": {
                "type": "string",
                "description": "/bin/sh command: exit 0 passes, anything else is the event's "
                'failure kind. Omitted: the canonical "true".',
            },
            "action": {"$ref": "#/$defs/action"},
            "default": {"type": "boolean", "default": True},
            "timeoutMs": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_MS,
                "default": DEFAULT_TIMEOUT_MS,
            },
            "maxSelections": {
                "type": "integer",
                "minimum": 1,
                "description": "Loop guard: the Action is selected at most this many times per "
                "run.",
            },
        },
        "additionalProperties": False,
        "allOf": [
            {
                "if": {"properties": {"event": {"enum": block_events}}, "required": ["event"]},
                "then": {"properties": {"action": {"$ref": "#/$defs/blockEventAction"}}},
                "else": {"properties": {"action": {"$ref": "#/$defs/reportEventAction"}}},
            },
            {
                "if": {"properties": {"event": {"const": "hook_result"}}, "required": ["event"]},
                "then": {"properties": {"filter": {"$ref": "#/$defs/hookResultFilter"}}},
            },
            {"if": {"required": ["maxSelections"]}, "then": {"required": ["action"]}},
        ],
    }

    def outcomes_only(allowed: list[str]) -> dict[str, Any]:
        return {
            "properties": {
                "outcome": {
                    "anyOf": [
                        {"enum": allowed},
                        {"type": "array", "minItems": 1, "items": {"enum": allowed}},
                    ]
                }
            }
        }

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "looprail native hooks (hooks.json)",
        "description": "Global ~/.looprail/hooks.json and project .looprail/hooks.json: "
        "Sections `local` and `owner/repo` of named Hooks and Presets.",
        "type": "object",
        "properties": {
            "$schema": {"type": "string"},
            "repos": {
                "type": "array",
                "uniqueItems": True,
                "items": {"type": "string", "pattern": SECTION_RE.pattern},
                "description": "owner/repo Sections this (project) file may hold.",
            },
        },
        "patternProperties": {
            "^local$": {"$ref": "#/$defs/section"},
            SECTION_RE.pattern: {"$ref": "#/$defs/section"},
        },
        "additionalProperties": False,
        "$defs": {
            "outcome": {"enum": list(OUTCOMES)},
            "section": {
                "type": "object",
                "propertyNames": {"pattern": "^[^/\\u0000]+$"},
                "additionalProperties": {
                    "oneOf": [{"$ref": "#/$defs/hook"}, {"$ref": "#/$defs/preset"}]
                },
            },
            "hook": hook,
            "preset": {
                "type": "object",
                "description": "A Preset: enables the listed Hooks together.",
                "required": ["description", "preset"],
                "properties": {
                    "description": {"type": "string"},
                    "preset": {
                        "type": "array",
                        "uniqueItems": True,
                        "items": {"type": "string", "pattern": REF_RE.pattern},
                    },
                    "default": {"type": "boolean", "default": True},
                },
                "additionalProperties": False,
            },
            "action": {
                "description": "The owned Action; selected against the owner's own outcome and "
                "code, delivered best-effort as an Effect.",
                "oneOf": [
                    variant("interrupt", {}, []),
                    variant("shutdown", {"interrupt": {"type": "boolean", "default": False}}, []),
                    variant("compact", {"instructions": {"type": "string"}}, []),
                    message,
                    variant("emit-custom-event", {"name": non_blank, "data": {}}, ["name"]),
                ],
            },
            "blockEventAction": outcomes_only(["pass", "block"]),
            "reportEventAction": outcomes_only(["pass", "report"]),
            "hookResultFilter": {
                "type": "object",
                "properties": {
                    "event": regex_value,
                    "hookRef": regex_value,
                    "invocationId": regex_value,
                    "originEvent": regex_value,
                    "outcome": {
                        "anyOf": [
                            {"$ref": "#/$defs/outcome"},
                            {"type": "array", "items": {"$ref": "#/$defs/outcome"}},
                        ]
                    },
                    "code": {"anyOf": [code, {"type": "array", "items": code}]},
                },
                "additionalProperties": False,
            },
        },
    }
