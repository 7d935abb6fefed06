"""Owned Actions: the five variants, their validation rules and their selection.

A Hook may own one Action. Its `outcome` (required) and `code` (optional) select it against the
owner's own Hook Outcome and exit code, never against the aggregate Event Outcome. A selected
Action becomes an immutable Effect holding only the variant's request (no `outcome`/`code`).
Action strings and `data` are static: nothing is ever interpolated.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

from looprail.hooks.native._jsonpath import member
from looprail.hooks.native.events import EventSpec
from looprail.hooks.native.filters import selector_matches

ActionType = Literal["interrupt", "shutdown", "compact", "message", "emit-custom-event"]
ACTION_TYPES: tuple[ActionType, ...] = (
    "interrupt",
    "shutdown",
    "compact",
    "message",
    "emit-custom-event",
)
SendAs = Literal["custom", "user"]
Delivery = Literal["steer", "followUp", "nextTurn"]
DELIVERIES: dict[str, tuple[Delivery, ...]] = {
    "custom": ("steer", "followUp", "nextTurn"),
    "user": ("steer", "followUp"),
}
Code = int | float | None

_SELECTOR_KEYS = ("type", "outcome", "code")
ACTION_KEYS: dict[str, tuple[str, ...]] = {
    "interrupt": _SELECTOR_KEYS,
    "shutdown": (*_SELECTOR_KEYS, "interrupt"),
    "compact": (*_SELECTOR_KEYS, "instructions"),
    "message": (*_SELECTOR_KEYS, "message", "sendAs", "delivery", "triggerTurn"),
    "emit-custom-event": (*_SELECTOR_KEYS, "name", "data"),
}


# --------------------------------------------------------------------------- requests (payloads)


@dataclass(frozen=True)
class Interrupt:
    """Pause the loop at its next safe point."""

    type: ClassVar[ActionType] = "interrupt"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}


@dataclass(frozen=True)
class Shutdown:
    """Stop the loop gracefully, optionally interrupting first."""

    type: ClassVar[ActionType] = "shutdown"
    interrupt: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "interrupt": self.interrupt}


@dataclass(frozen=True)
class Compact:
    """Ask the runtime to compact role context, with optional static instructions."""

    type: ClassVar[ActionType] = "compact"
    instructions: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
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

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "name": self.name}
        if self.data_json is not None:
            out["data"] = self.data
        return out


ActionRequest = Interrupt | Shutdown | Compact | Message | EmitCustomEvent


@dataclass(frozen=True)
class OwnedAction:
    """An Action as configured on its Hook: the selector plus the request it becomes."""

    request: ActionRequest
    outcomes: tuple[str, ...]
    codes: tuple[Code, ...] | None = None

    @property
    def type(self) -> ActionType:
        return self.request.type

    def selects(self, outcome: str, code: int | None) -> bool:
        """Whether the owner's own Hook Outcome and code select this Action."""
        return selector_matches(self.outcomes, self.codes, outcome, code)


# --------------------------------------------------------------------------- validation

Problems = list[tuple[str, str]]  # (JSON path, reason)


def _blank(value: Any) -> bool:
    return not isinstance(value, str) or value.strip() == ""


def is_json_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not (isinstance(value, float) and not math.isfinite(value))
    )


def invalid_json_reason(value: Any, depth: int = 0) -> str | None:
    """Why `value` is not static JSON data (None when it is)."""
    if depth > 64:
        return "nested deeper than 64 levels"
    if value is None or isinstance(value, (str, bool)):
        return None
    if isinstance(value, (int, float)):
        return None if is_json_number(value) else "numbers must be finite"
    if isinstance(value, list):
        for item in value:
            reason = invalid_json_reason(item, depth + 1)
            if reason:
                return reason
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return "object keys must be strings"
            reason = invalid_json_reason(item, depth + 1)
            if reason:
                return reason
        return None
    return f"{type(value).__name__} is not a JSON value"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _pairing_possible(outcomes: list[str], codes: list[Code]) -> bool:
    # pass always exits 0; a failure exits non-zero or has no code (timeout, spawn failure)
    return any(
        (code is not None and not isinstance(code, bool) and code == 0)
        if outcome == "pass"
        else (code is None or code != 0)
        for outcome in outcomes
        for code in codes
    )


def parse_action(
    value: Any, spec: EventSpec | None, path: str
) -> tuple[OwnedAction | None, Problems]:
    """Validate one `action` object owned by a Hook of event `spec` (None when the Hook's event
    is itself invalid: the outcome check is then skipped). Returns `(action or None, problems)`
    with every problem found, each with its JSON path."""
    problems: Problems = []

    def add(sub: str, reason: str) -> None:
        problems.append((f"{path}{sub}", reason))

    if not isinstance(value, dict):
        add("", "must be an object with a `type`")
        return None, problems
    kind = value.get("type")
    if not isinstance(kind, str) or kind not in ACTION_KEYS:
        if "type" not in value:
            add(".type", f"is required; one of {', '.join(ACTION_TYPES)}")
        else:
            add(
                ".type",
                f"{json.dumps(kind)} is not an Action type; one of {', '.join(ACTION_TYPES)}",
            )
        return None, problems
    allowed = ACTION_KEYS[kind]
    for key in value:
        if key not in allowed:
            add(
                member("", key),
                f"unknown field for Action type {kind} (allowed: {', '.join(allowed)})",
            )

    # Selector: outcome (required), code (optional, with a possible pairing).
    outcomes: list[str] = []
    if "outcome" not in value:
        add(".outcome", "is required: the owner's Hook Outcome that selects this Action")
    else:
        raw = value["outcome"]
        if isinstance(raw, list) and not raw:
            add(".outcome", "must not be an empty array")
        elif not all(isinstance(o, str) for o in _as_list(raw)):
            add(".outcome", "must be an outcome string or a non-empty array of them")
        else:
            possible = spec.outcomes if spec else ("pass", "block", "report")
            for i, outcome in enumerate(_as_list(raw)):
                if outcome not in possible:
                    where = f".outcome[{i}]" if isinstance(raw, list) else ".outcome"
                    event = f"a {spec.name} Hook" if spec else "a Hook"
                    add(
                        where,
                        f"{json.dumps(outcome)} is not possible for {event} "
                        f"(possible: {', '.join(possible)})",
                    )
                else:
                    outcomes.append(outcome)
            if len(outcomes) != len(_as_list(raw)):
                outcomes = []
    codes: list[Code] | None = None
    if "code" in value:
        raw_code = value["code"]
        if isinstance(raw_code, list) and not raw_code:
            add(".code", "must not be an empty array")
        elif not all(c is None or is_json_number(c) for c in _as_list(raw_code)):
            add(".code", "must be a number, null, or a non-empty array of them")
        else:
            codes = list(_as_list(raw_code))
            if outcomes and not _pairing_possible(outcomes, codes):
                add(
                    ".code",
                    "has no possible pairing with outcome: pass always has code 0, "
                    "a failure has a non-zero code or null",
                )

    request, variant_problems = _parse_request(kind, value)
    problems += [(f"{path}{sub}", reason) for sub, reason in variant_problems]
    if problems or request is None:
        return None, problems
    return OwnedAction(request, tuple(outcomes), tuple(codes) if codes is not None else None), []


def _parse_request(kind: str, value: dict[str, Any]) -> tuple[ActionRequest | None, Problems]:
    problems: Problems = []

    def add(sub: str, reason: str) -> None:
        problems.append((sub, reason))

    def optional_bool(key: str) -> bool:
        raw = value.get(key, False)
        if not isinstance(raw, bool):
            add(f".{key}", "must be true or false")
            return False
        return raw

    if kind == "interrupt":
        return Interrupt(), problems
    if kind == "shutdown":
        interrupt = optional_bool("interrupt")
        return (Shutdown(interrupt=interrupt) if not problems else None), problems
    if kind == "compact":
        instructions = value.get("instructions")
        if "instructions" in value and not isinstance(instructions, str):
            add(".instructions", "must be a string")
            return None, problems
        return Compact(instructions=instructions), problems
    if kind == "message":
        return _parse_message(value)
    # emit-custom-event
    name = value.get("name")
    if "name" not in value:
        add(".name", "is required: the custom event's name")
    elif _blank(name):
        add(".name", "must be a string with at least one non-whitespace character")
    data_json = None
    if "data" in value:
        reason = invalid_json_reason(value["data"])
        if reason:
            add(".data", f"must be static JSON data ({reason})")
        else:
            data_json = json.dumps(value["data"], ensure_ascii=False, separators=(",", ":"))
    if problems:
        return None, problems
    # No problems: `name` is a non-blank string.
    return EmitCustomEvent(name=cast(str, name), data_json=data_json), problems


def _parse_message(value: dict[str, Any]) -> tuple[Message | None, Problems]:
    problems: Problems = []

    def add(sub: str, reason: str) -> None:
        problems.append((sub, reason))

    message = value.get("message")
    if "message" not in value:
        add(".message", "is required: the static text to deliver")
    elif _blank(message):
        add(".message", "must be a string with at least one non-whitespace character")
    send_as = value.get("sendAs", "custom")
    if not isinstance(send_as, str) or send_as not in DELIVERIES:
        add(".sendAs", 'must be "custom" or "user"')
        send_as = None
    delivery = value.get("delivery")
    if "delivery" not in value:
        add(".delivery", "is required: steer, followUp or nextTurn")
    elif send_as is not None and delivery not in DELIVERIES[send_as]:
        allowed = ", ".join(DELIVERIES[send_as])
        if send_as == "user" and delivery == "nextTurn":
            add(".delivery", f"nextTurn is not possible with sendAs user (allowed: {allowed})")
        else:
            add(".delivery", f"must be one of {allowed}")
    trigger_turn = False
    if "triggerTurn" in value:
        raw = value["triggerTurn"]
        if not isinstance(raw, bool):
            add(".triggerTurn", "must be true or false")
        elif send_as == "user":
            add(
                ".triggerTurn",
                "is not allowed with sendAs user (a user message always starts a turn)",
            )
        elif raw and delivery == "nextTurn":
            add(
                ".triggerTurn",
                "true is not possible with delivery nextTurn (it waits for the next run)",
            )
        else:
            trigger_turn = raw
    if problems:
        return None, problems
    # No problems: `message` is a non-blank string and `delivery` one of DELIVERIES[send_as].
    return Message(
        message=cast(str, message),
        delivery=cast(Delivery, delivery),
        send_as=send_as,
        trigger_turn=trigger_turn,
    ), []
