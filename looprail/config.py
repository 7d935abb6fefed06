"""Project configuration: `<project>/.planning/config.json`, dotted-key lookup and JavaScript
truthiness. Pure functions plus one loader at the edge.

A malformed config file is treated as absent with one warning (never a crash): the reference
does the same, and a host calls `render-hooks` many times per loop, so one typo must not stop it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

# Keys that must never resolve, whatever the file says (prototype-pollution parity).
FORBIDDEN_SEGMENTS = frozenset({"__proto__", "constructor", "prototype"})

_MISSING = object()


def config_path(project: str | Path) -> Path:
    return Path(project) / ".planning" / "config.json"


def load_project_config(project: str | Path) -> tuple[dict[str, Any] | None, list[str]]:
    """Read `.planning/config.json`. Returns `(config or None, warnings)`.

    Absent file → `(None, [])`. Unreadable, not JSON, or not an object → `(None, [one warning])`.
    """
    path = config_path(project)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, []
    except OSError as exc:
        return None, [f"{path}: cannot read ({exc.strerror}); treating config as absent"]
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        return None, [f"{path}: not valid JSON ({reason}); treating config as absent"]
    if not isinstance(value, dict):
        return None, [f"{path}: top level is not a JSON object; treating config as absent"]
    return value, []


def lookup(config: dict[str, Any] | None, dotted: str) -> Any:
    """The value at `dotted` in `config`, or `MISSING`.

    A dotted key is looked up as a literal key first (`{"workflow.research": true}`), then as a
    path through nested objects. `__proto__`/`constructor`/`prototype` segments never resolve.
    """
    if not config or not isinstance(dotted, str) or not dotted:
        return MISSING
    segments = dotted.split(".")
    if any(s in FORBIDDEN_SEGMENTS for s in segments):
        return MISSING
    if dotted in config:
        return config[dotted]
    node: Any = config
    for seg in segments:
        if not isinstance(node, dict) or seg not in node:
            return MISSING
        node = node[seg]
    return node


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


def js_truthy(value: Any) -> bool:
    """JavaScript's `Boolean(value)` for JSON values: false, 0, -0, NaN, "" and null are false;
    every object and array (even empty) is true."""
    if value is None or value is MISSING:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return not (value == 0 or (isinstance(value, float) and math.isnan(value)))
    if isinstance(value, str):
        return value != ""
    return True  # dict, list: objects are truthy in JS
