"""JSON paths for error messages, spelled like the rest of looprail: `$.local["my-hook"].event`."""

from __future__ import annotations

import json
import re

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def member(path: str, key: str) -> str:
    """`path` extended by an object member."""
    return f"{path}.{key}" if _PLAIN.fullmatch(key) else f"{path}[{json.dumps(key)}]"


def item(path: str, index: int) -> str:
    """`path` extended by an array index."""
    return f"{path}[{index}]"


def json_path(loc: tuple[str | int, ...], root: str = "$") -> str:
    """The JSON path of a validation error's place (a dict key's own marker is left out;
    `$schema` is spelled as people write it)."""
    path = root
    for part in loc:
        if isinstance(part, int):
            path = item(path, part)
        elif part != "[key]":
            path = f"{path}.{part}" if part == "$schema" else member(path, part)
    return path
