"""Owned Actions: the five variants (their document models and their requests) and selection.
An Action's `outcome` and `code` select it against its owner's own Hook Outcome and exit code,
never the Event Outcome. Action strings and `data` are static: nothing is ever interpolated."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Union, get_args

from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo
from pydantic import WrapValidator as Wrap
from pydantic.json_schema import JsonDict
from pydantic_core.core_schema import ValidatorFunctionWrapHandler as Handler

from looprail.hooks.native._model import (
    Doc,
    Failure,
    Says,
    absent,
    as_list,
    cannot_say,
    fail,
    no_default,
    problem,
)
from looprail.hooks.native.events import EVENTS, OUTCOMES, EventSpec, Outcome
from looprail.hooks.native.filters import selector_matches

ActionType = Literal["interrupt", "shutdown", "compact", "message", "emit-custom-event"]
ACTION_TYPES: tuple[ActionType, ...] = get_args(ActionType)
SendAs = Literal["custom", "user"]
Delivery = Literal["steer", "followUp", "nextTurn"]
# A user message always starts a turn, so it cannot wait for the next run.
DELIVERIES: dict[str, tuple[Delivery, ...]] = {
    "custom": get_args(Delivery),
    "user": ("steer", "followUp"),
}
Code = int | float | None


@dataclass(frozen=True)
class Interrupt:
    """Pause the loop at its next safe point."""

    type: ClassVar[ActionType] = "interrupt"

    def to_json(self) -> dict[str, object]:
        return {"type": self.type}


@dataclass(frozen=True)
class Shutdown:
    """Stop the loop gracefully, optionally interrupting first."""

    type: ClassVar[ActionType] = "shutdown"
    interrupt: bool = False

    def to_json(self) -> dict[str, object]:
        return {"type": self.type, "interrupt": self.interrupt}


@dataclass(frozen=True)
class Compact:
    """Ask the runtime to compact role context, with optional static instructions."""

    type: ClassVar[ActionType] = "compact"
    instructions: str | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"type": self.type}
        if self.instructions is not None:
            out["instructions"] = self.instructions
        return out


@dataclass(frozen=True)
class Message:
    """Queue one static message into role context (`send_as="user"`: as a user message)."""

    type: ClassVar[ActionType] = "message"
    message: str
    delivery: Delivery
    send_as: SendAs = "custom"
    trigger_turn: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "type": self.type,
            "message": self.message,
            "sendAs": self.send_as,
            "delivery": self.delivery,
            "triggerTurn": self.trigger_turn,
        }


@dataclass(frozen=True)
class EmitCustomEvent:
    """Raise the named `custom_event`. `data` is kept as canonical JSON text so the request stays
    immutable; the `data` property returns a fresh copy every time."""

    type: ClassVar[ActionType] = "emit-custom-event"
    name: str
    data_json: str | None = None

    @property
    def data(self) -> Any:
        return None if self.data_json is None else json.loads(self.data_json)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"type": self.type, "name": self.name}
        if self.data_json is not None:
            out["data"] = self.data
        return out


ActionRequest = Interrupt | Shutdown | Compact | Message | EmitCustomEvent


def is_json_number(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not (isinstance(value, float) and not math.isfinite(value))
    )


def invalid_json_reason(value: object, depth: int = 0) -> str | None:
    """Why `value` is not static JSON data (None when it is)."""
    if depth > 64:
        return "nested deeper than 64 levels"
    if value is None or isinstance(value, (str, bool)):
        return None
    if isinstance(value, (int, float)):
        return None if is_json_number(value) else "numbers must be finite"
    if isinstance(value, dict) and not all(isinstance(key, str) for key in value):
        return "object keys must be strings"
    if isinstance(value, (list, dict)):
        items = value.values() if isinstance(value, dict) else value
        return next(filter(None, (invalid_json_reason(item, depth + 1) for item in items)), None)
    return f"{type(value).__name__} is not a JSON value"


def _pairing_possible(outcomes: list[str], codes: list[Code]) -> bool:
    # pass always exits 0; a failure exits non-zero or has no code (timeout, spawn failure)
    return any(
        (code is not None and not isinstance(code, bool) and code == 0)
        if outcome == "pass"
        else (code is None or code != 0)
        for outcome in outcomes
        for code in codes
    )


def _outcome(value: Any, handler: Handler, info: ValidationInfo) -> Any:
    """Each outcome must be possible for the owner's event (every outcome when the Hook's own
    event is invalid)."""
    if isinstance(value, list) and not value:
        raise problem("must not be an empty array")
    if not all(isinstance(o, str) for o in as_list(value)):
        raise problem("must be an outcome string or a non-empty array of them")
    spec: EventSpec | None = EVENTS.get((info.context or {}).get("event") or "")
    possible = spec.outcomes if spec else OUTCOMES
    owner = f"a {spec.name} Hook" if spec else "a Hook"
    reason = "{} is not possible for {} (possible: {})"
    failures: list[Failure] = [
        (
            (i,) if isinstance(value, list) else (),
            problem(reason.format(json.dumps(o), owner, ", ".join(possible))),
        )
        for i, o in enumerate(as_list(value))
        if o not in possible
    ]
    if failures:
        fail(failures)
    return handler(value)


def _code(value: Any, handler: Handler, info: ValidationInfo) -> Any:
    if isinstance(value, list) and not value:
        raise problem("must not be an empty array")
    if not all(c is None or is_json_number(c) for c in as_list(value)):
        raise problem("must be a number, null, or a non-empty array of them")
    outcomes = info.data.get("outcome")
    if outcomes is not None and not _pairing_possible(as_list(outcomes), as_list(value)):
        raise cannot_say(
            "has no possible pairing with outcome: pass always has code 0, "
            "a failure has a non-zero code or null"
        )
    return handler(value)


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must have at least one non-whitespace character")
    return value


NonBlank = Annotated[
    str,
    AfterValidator(_non_blank),
    Field(json_schema_extra={"pattern": r"\S"}),
    Says("must be a string with at least one non-whitespace character"),
]
OutcomeSel = Union[Outcome, Annotated[list[Outcome], Field(min_length=1)]]  # noqa: UP007
CodeSel = Union[Code, Annotated[list[Code], Field(min_length=1)]]  # noqa: UP007


class _Action(Doc):
    outcome: Annotated[OutcomeSel, Wrap(_outcome)] = Field(
        description="The owner's Hook Outcome(s) that select this Action."
    )
    code: Annotated[CodeSel, Wrap(_code)] = absent(
        description="Narrows selection to the owner's exit code: pass has 0, a failure a "
        "non-zero code or null (timeout, could not start)."
    )
    MISSING: ClassVar[Mapping[str, str]] = {
        "outcome": "is required: the owner's Hook Outcome that selects this Action"
    }

    @classmethod
    def kind(cls) -> ActionType:
        return get_args(cls.model_fields["type"].annotation)[0]

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The members a variant may have, `type` first."""
        names = [f.alias or name for name, f in cls.model_fields.items() if name != "type"]
        return ("type", *names)

    @classmethod
    def unknown(cls, key: str) -> str:
        return f"unknown field for Action type {cls.kind()} (allowed: {', '.join(cls.keys())})"

    @property
    def request(self) -> ActionRequest:
        """What this Action asks of the loop once selected."""
        raise NotImplementedError

    def selects(self, outcome: str, code: int | None) -> bool:
        """Whether the owner's own Hook Outcome and code select this Action (`"code": null`
        narrows to no code; an absent `code` does not narrow)."""
        codes = as_list(self.code) if "code" in self.model_fields_set else None
        return selector_matches(as_list(self.outcome), codes, outcome, code)


class InterruptAction(_Action):
    type: Literal["interrupt"]

    @property
    def request(self) -> ActionRequest:
        return Interrupt()


class ShutdownAction(_Action):
    type: Literal["shutdown"]
    interrupt: Annotated[bool, Says("must be true or false")] = False

    @property
    def request(self) -> ActionRequest:
        return Shutdown(interrupt=self.interrupt)


class CompactAction(_Action):
    type: Literal["compact"]
    instructions: Annotated[str, Says("must be a string")] = absent()

    @property
    def request(self) -> ActionRequest:
        return Compact(instructions=self.instructions)


def _message_rules(schema: JsonDict) -> None:
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


def _delivery(value: Any, handler: Handler, info: ValidationInfo) -> Any:
    send_as = info.data.get("send_as")
    if send_as is None:
        return value  # sendAs is invalid: its own problem says enough
    allowed = DELIVERIES[send_as]
    if value not in allowed:
        if send_as == "user" and value == "nextTurn":
            raise problem(
                f"nextTurn is not possible with sendAs user (allowed: {', '.join(allowed)})"
            )
        raise problem(f"must be one of {', '.join(allowed)}")
    return handler(value)


def _trigger_turn(value: Any, handler: Handler, info: ValidationInfo) -> Any:
    if not isinstance(value, bool):
        raise problem("must be true or false")
    if info.data.get("send_as") == "user":
        raise problem("is not allowed with sendAs user (a user message always starts a turn)")
    if value and info.data.get("delivery") == "nextTurn":
        raise problem("true is not possible with delivery nextTurn (it waits for the next run)")
    return handler(value)


class MessageAction(_Action):
    model_config = ConfigDict(json_schema_extra=_message_rules)

    type: Literal["message"]
    message: NonBlank = Field(description="Static text, never interpolated.")
    send_as: Annotated[SendAs, Says('must be "custom" or "user"')] = Field("custom", alias="sendAs")
    delivery: Annotated[Delivery, Wrap(_delivery)]
    trigger_turn: Annotated[bool, Wrap(_trigger_turn)] = Field(False, alias="triggerTurn")
    MISSING: ClassVar[Mapping[str, str]] = {
        **_Action.MISSING,
        "message": "is required: the static text to deliver",
        "delivery": "is required: steer, followUp or nextTurn",
    }

    @property
    def request(self) -> ActionRequest:
        return Message(self.message, self.delivery, self.send_as, self.trigger_turn)


def _static_json(value: Any, handler: Handler) -> Any:
    reason = invalid_json_reason(value)
    if reason:
        raise problem(f"must be static JSON data ({reason})")
    return handler(value)


class EmitCustomEventAction(_Action):
    type: Literal["emit-custom-event"]
    name: NonBlank
    data: Annotated[Any, Wrap(_static_json)] = Field(
        default=None,
        description="Static JSON data, never interpolated.",
        json_schema_extra=no_default,
    )
    MISSING: ClassVar[Mapping[str, str]] = {
        **_Action.MISSING,
        "name": "is required: the custom event's name",
    }

    @property
    def request(self) -> ActionRequest:
        if "data" not in self.model_fields_set:
            return EmitCustomEvent(self.name)
        return EmitCustomEvent(
            self.name, json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        )


ACTION_MODELS: dict[str, type[_Action]] = {
    model.kind(): model
    for model in (
        InterruptAction,
        ShutdownAction,
        CompactAction,
        MessageAction,
        EmitCustomEventAction,
    )
}
assert tuple(ACTION_MODELS) == ACTION_TYPES


def _hook_action(value: Any, handler: Handler, info: ValidationInfo) -> _Action:
    """The Action a Hook owns, checked against the Hook's event (every outcome is possible when
    the event is itself invalid)."""
    if not isinstance(value, dict):
        fail([((), problem("must be an object with a `type`"))])
    kind = value.get("type")
    if not isinstance(kind, str) or kind not in ACTION_MODELS:
        one_of = f"one of {', '.join(ACTION_TYPES)}"
        if "type" not in value:
            fail([(("type",), problem(f"is required; {one_of}"))])
        fail([(("type",), problem(f"{json.dumps(kind)} is not an Action type; {one_of}"))])
    return ACTION_MODELS[kind].model_validate(value, context={"event": info.data.get("event")})


# An Action as its Hook owns it: the selector (`outcome`, `code`) and the `request` it becomes.
OwnedAction = Union[  # noqa: UP007 - a runtime value, read by pydantic
    InterruptAction, ShutdownAction, CompactAction, MessageAction, EmitCustomEventAction
]
Action = Annotated[
    OwnedAction,
    Field(
        discriminator="type",
        description="The owned Action; selected against the owner's own outcome and code, "
        "delivered best-effort as an Effect.",
    ),
    Wrap(_hook_action),
]
