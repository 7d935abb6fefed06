"""The hooks.json document as pydantic models: the one declaration its JSON Schema is generated
from (`looprail schema hooks`, `schema.hooks_json_schema()`).

`parsing.validate_hooks_document` stays the reader looprail runs: it is pydantic-free (native
hooks load on every loop event) and words each problem for people. The two must agree, and a
property test (tests/hooks/native/test_schema.py) holds them to it: on generated documents the
models accept exactly what the reader accepts, and the generated schema accepts exactly what
the models accept, except for the rules a JSON Schema cannot state. Those are listed in
`SCHEMA_CANNOT_SAY` and fail with the error type `schema_cannot_say`.

Cross-field rules the models check in validators (an Action's outcomes against its Hook's
event, `hook_result` filters, a `message` Action's delivery) appear in the schema through each
model's `json_schema_extra`, next to the validator that enforces them.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from looprail.hooks.native.actions import ACTION_KEYS, DELIVERIES, ActionType
from looprail.hooks.native.events import (
    EVENT_NAMES,
    EVENTS,
    HOOK_RESULT_EXACT_KEYS,
    HOOK_RESULT_FILTER_KEYS,
    OUTCOMES,
    Outcome,
)
from looprail.hooks.native.filters import compile_pattern
from looprail.hooks.native.models import DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS
from looprail.hooks.native.parsing import REF_RE, SECTION_RE

# Entry names the reader refuses: they would shadow JavaScript object internals in the host.
FORBIDDEN_NAMES = ("__proto__", "constructor", "prototype")
ENTRY_NAME = rf"^(?!(?:{'|'.join(FORBIDDEN_NAMES)})$)[^/\x00]+$"
# What only the reader (and these models) check; the schema accepts documents that break them.
SCHEMA_CANNOT_SAY = {
    "regex": "a filter string compiles as a regular expression",
    "pairing": "an Action's code can pair with its outcome (pass has 0, a failure non-zero "
    "or null)",
    "nested-preset": "a Preset member is not itself a Preset (a rule across entries)",
}
BLOCK_EVENTS = [name for name, spec in EVENTS.items() if spec.failure == "block"]


def _cannot_say(rule: str, message: str) -> PydanticCustomError:
    """The error of a `SCHEMA_CANNOT_SAY` rule: its type is `schema_cannot_say`."""
    return PydanticCustomError(
        "schema_cannot_say", "{rule}: {message}", {"rule": rule, "message": message}
    )


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _unique_items_no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)
    schema["uniqueItems"] = True  # what `_unique` checks


def _absent(**kwargs: Any) -> Any:
    """An optional member that must not be `null` when present: absent reads as None, and the
    schema shows no default (None is not a value the file may hold)."""
    return Field(default=None, json_schema_extra=_no_default, **kwargs)


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must have at least one non-whitespace character")
    return value


def _unique(values: list[Any]) -> list[Any]:
    if len(set(values)) != len(values):
        raise ValueError("items must be unique")
    return values


NonBlank = Annotated[str, AfterValidator(_non_blank), Field(json_schema_extra={"pattern": r"\S"})]
EventName = Literal[EVENT_NAMES]  # type: ignore[valid-type]  # the catalog, as a Literal
Scalar = Union[str, int, float, bool, None]  # noqa: UP007 - a runtime value, read by pydantic
Code = Union[int, float, None]  # noqa: UP007
OutcomeSel = Union[Outcome, Annotated[list[Outcome], Field(min_length=1)]]  # noqa: UP007
CodeSel = Union[Code, Annotated[list[Code], Field(min_length=1)]]  # noqa: UP007
FilterValue = Union[Scalar, list[Scalar]]  # noqa: UP007


class _Doc(BaseModel):
    # strict: `1` is not `true`, `"5"` is not `5`; camelCase members have an explicit alias
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
        regex_engine="python-re",  # the reader's `re`, and lookahead for ENTRY_NAME
    )


# --------------------------------------------------------------------------- Actions


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


class _Action(_Doc):
    outcome: OutcomeSel = Field(description="The owner's Hook Outcome(s) that select this Action.")
    code: CodeSel = _absent(
        description="Narrows selection to the owner's exit code: pass has 0, a failure a "
        "non-zero code or null (timeout, could not start)."
    )

    @model_validator(mode="after")
    def _pairing(self) -> _Action:
        if "code" not in self.model_fields_set:
            return self
        codes = _as_list(self.code)
        outcomes = _as_list(self.outcome)
        if not any(
            (c is not None and c == 0) if o == "pass" else (c is None or c != 0)
            for o in outcomes
            for c in codes
        ):
            raise _cannot_say("pairing", "code has no possible pairing with outcome")
        return self


class InterruptAction(_Action):
    type: Literal["interrupt"]


class ShutdownAction(_Action):
    type: Literal["shutdown"]
    interrupt: bool = False


class CompactAction(_Action):
    type: Literal["compact"]
    instructions: str = _absent()


def _message_rules(schema: dict[str, Any]) -> None:
    schema["allOf"] = [
        {  # a user message always starts a turn, and cannot wait for the next run
            "if": {"required": ["sendAs"], "properties": {"sendAs": {"const": "user"}}},
            "then": {
                "properties": {"delivery": {"enum": list(DELIVERIES["user"])}},
                "not": {"required": ["triggerTurn"]},
            },
        },
        {
            "if": {"properties": {"delivery": {"const": "nextTurn"}}},
            "then": {"properties": {"triggerTurn": {"const": False}}},
        },
    ]


class MessageAction(_Action):
    model_config = ConfigDict(json_schema_extra=_message_rules)

    type: Literal["message"]
    message: NonBlank = Field(description="Static text, never interpolated.")
    send_as: Literal["custom", "user"] = Field("custom", alias="sendAs")
    delivery: Literal["steer", "followUp", "nextTurn"]
    trigger_turn: bool = Field(False, alias="triggerTurn")

    @model_validator(mode="after")
    def _delivery(self) -> MessageAction:
        if self.delivery not in DELIVERIES[self.send_as]:
            raise ValueError(f"delivery {self.delivery} is not possible with sendAs user")
        if self.send_as == "user" and "trigger_turn" in self.model_fields_set:
            raise ValueError("triggerTurn is not allowed with sendAs user")
        if self.trigger_turn and self.delivery == "nextTurn":
            raise ValueError("triggerTurn true is not possible with delivery nextTurn")
        return self


class EmitCustomEventAction(_Action):
    type: Literal["emit-custom-event"]
    name: NonBlank
    data: Any = Field(
        default=None,
        description="Static JSON data, never interpolated.",
        json_schema_extra=_no_default,
    )


Action = Annotated[
    Union[  # noqa: UP007
        InterruptAction, ShutdownAction, CompactAction, MessageAction, EmitCustomEventAction
    ],
    Field(
        discriminator="type",
        description="The owned Action; selected against the owner's own outcome and code, "
        "delivered best-effort as an Effect.",
    ),
]
ACTION_MODELS: dict[ActionType, type[_Action]] = {
    "interrupt": InterruptAction,
    "shutdown": ShutdownAction,
    "compact": CompactAction,
    "message": MessageAction,
    "emit-custom-event": EmitCustomEventAction,
}
assert set(ACTION_MODELS) == set(ACTION_KEYS)


# --------------------------------------------------------------------------- Hooks and Presets


def _outcomes_only(allowed: list[str]) -> dict[str, Any]:
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


def _hook_rules(schema: dict[str, Any]) -> None:
    """The Hook's cross-field rules, as the validators below enforce them."""
    regex_value = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    code = {"type": ["number", "null"]}
    hook_result_filter = {
        "type": "object",
        "properties": {
            key: regex_value for key in HOOK_RESULT_FILTER_KEYS if key not in HOOK_RESULT_EXACT_KEYS
        }
        | {
            "outcome": {
                "anyOf": [
                    {"enum": list(OUTCOMES)},
                    {"type": "array", "items": {"enum": list(OUTCOMES)}},
                ]
            },
            "code": {"anyOf": [code, {"type": "array", "items": code}]},
        },
        "additionalProperties": False,
    }
    schema["anyOf"] = [{"required": ["shell"]}, {"required": ["action"]}]
    schema["allOf"] = [
        {  # an Action is selected by its owner's outcome: pass, or the event's failure kind
            "if": {"properties": {"event": {"enum": BLOCK_EVENTS}}, "required": ["event"]},
            "then": {"properties": {"action": _outcomes_only(["pass", "block"])}},
            "else": {"properties": {"action": _outcomes_only(["pass", "report"])}},
        },
        {
            "if": {"properties": {"event": {"const": "hook_result"}}, "required": ["event"]},
            "then": {"properties": {"filter": hook_result_filter}},
        },
        {"if": {"required": ["maxSelections"]}, "then": {"required": ["action"]}},
    ]


class HookEntry(_Doc):
    """A Hook: runs `when` then `shell` at `event` when `filter` matches."""

    model_config = ConfigDict(json_schema_extra=_hook_rules)

    description: str
    event: EventName
    filter: dict[str, FilterValue] = _absent(
        description="ANDed fields of the event candidate; strings are regular expressions, "
        "other scalars match exactly, arrays are any-of."
    )
    when: str = _absent(description="Precondition /bin/sh command.")
    shell: str = _absent(
        description="/bin/sh command: exit 0 passes, anything else is the event's failure "
        'kind. Omitted: the canonical "true".'
    )
    action: Action = _absent()
    default: bool = True
    timeout_ms: int = Field(DEFAULT_TIMEOUT_MS, ge=1, le=MAX_TIMEOUT_MS, alias="timeoutMs")
    max_selections: int = _absent(
        ge=1,
        alias="maxSelections",
        description="Loop guard: the Action is selected at most this many times per run.",
    )

    @model_validator(mode="after")
    def _rules(self) -> HookEntry:
        given = self.model_fields_set
        if "shell" not in given and "action" not in given:
            raise ValueError('needs "shell" or "action"')
        if "max_selections" in given and "action" not in given:
            raise ValueError('maxSelections guards an Action; this Hook has no "action"')
        if self.action is not None:
            possible = EVENTS[self.event].outcomes
            if any(o not in possible for o in _as_list(self.action.outcome)):
                raise ValueError(f"an Action of a {self.event} Hook selects on {possible}")
        for key, expected in (self.filter or {}).items():
            # The field is checked even when it lists no value (`"phase": []`).
            if self.event == "hook_result" and key not in HOOK_RESULT_FILTER_KEYS:
                raise ValueError(f"{key} is not a hook_result filter field")
            for value in _as_list(expected):
                self._check_filter_value(key, value)
        return self

    def _check_filter_value(self, key: str, value: Any) -> None:
        if self.event == "hook_result":
            if key == "outcome":
                if value not in OUTCOMES:
                    raise ValueError(f"{value!r} is not an outcome")
                return
            if key == "code":
                if isinstance(value, (str, bool)):
                    raise ValueError(f"{value!r} is not an exit code")
                return
            if not isinstance(value, str):
                raise ValueError("a hook_result filter value is a regular expression string")
        if isinstance(value, str):
            try:
                compile_pattern(value)
            except re.error as exc:
                raise _cannot_say("regex", f"invalid regular expression: {exc}") from None


class PresetEntry(_Doc):
    """A Preset: enables the listed Hooks together."""

    description: str
    preset: Annotated[
        list[Annotated[str, Field(pattern=REF_RE.pattern)]],
        AfterValidator(_unique),
        Field(json_schema_extra={"uniqueItems": True}),
    ]
    default: bool = True


Entry = Union[HookEntry, PresetEntry]  # noqa: UP007
Section = dict[Annotated[str, Field(pattern=ENTRY_NAME)], Entry]


# --------------------------------------------------------------------------- the file


def _sections(schema: dict[str, Any]) -> None:
    # Post-processing, for what the models cannot say in a schema:
    # - Section names are a pattern, which a model's fields cannot be: `extra` holds the
    #   Sections and a validator checks their names; here the schema says which names an extra
    #   member may have.
    # - pydantic writes a dict with a constrained key as `patternProperties` only, which lets
    #   any other key through; the entry-name rule is closed with `additionalProperties`.
    section = dict(schema.pop("additionalProperties"))
    section["additionalProperties"] = False
    schema["patternProperties"] = {"^local$": section, SECTION_RE.pattern: section}
    schema["additionalProperties"] = False


class HooksDocument(_Doc):
    """Global ~/.looprail/hooks.json and project .looprail/hooks.json: Sections `local` and
    `owner/repo` of named Hooks and Presets."""

    model_config = ConfigDict(
        extra="allow", title="looprail native hooks (hooks.json)", json_schema_extra=_sections
    )
    __pydantic_extra__: dict[str, Section] = Field(init=False)

    schema_: str = _absent(alias="$schema")
    repos: Annotated[
        list[Annotated[str, Field(pattern=SECTION_RE.pattern)]],
        AfterValidator(_unique),
        Field(
            default=None,
            description="owner/repo Sections this (project) file may hold.",
            json_schema_extra=_unique_items_no_default,
        ),
    ]

    @model_validator(mode="after")
    def _section_names_and_presets(self) -> HooksDocument:
        sections = self.__pydantic_extra__ or {}
        for name in sections:
            if name != "local" and not SECTION_RE.fullmatch(name):
                raise ValueError(f'section {name!r} is not "local" or owner/repo')
        kinds = {
            f"{section}/{name}": entry
            for section, entries in sections.items()
            for name, entry in entries.items()
        }
        for entry in kinds.values():
            if isinstance(entry, PresetEntry):
                for ref in entry.preset:
                    if isinstance(kinds.get(ref), PresetEntry):
                        raise _cannot_say("nested-preset", f"{ref} is a Preset")
        return self
