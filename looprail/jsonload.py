"""Strict JSON for files looprail reads from users and third parties: the standard parser, plus
duplicate keys collected (which of two values wins differs between readers, so callers refuse
to guess) and `NaN`/`Infinity` rejected (not JSON). Only `json` is imported: this is on the
`render-hooks` start path."""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def loads_strict(text: str) -> tuple[Any, list[str]]:
    """Parse `text`. Returns `(value, duplicate keys in order of appearance)`. Raises
    `json.JSONDecodeError`, `ValueError` (NaN/Infinity) or `RecursionError` (deep nesting)."""
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                duplicates.append(key)
            out[key] = value
        return out

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=no_constants), duplicates


def json_type_name(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages ("got array")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict) or hasattr(value, "keys"):
        return "object"
    return type(value).__name__
