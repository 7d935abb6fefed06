"""JSON as looprail reads and writes it: `loads_strict` for files from users and third parties
(duplicate keys collected, since readers differ on which wins; `NaN`/`Infinity` rejected), and
`JSON.parse`/`JSON.stringify` as the reference (JavaScript) does them, byte for byte
(`parse_json_js`, `js_dumps`, `js_dump`), for the project config and `render-hooks` output.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads_strict(text: str) -> tuple[Any, list[str]]:
    """Parse `text`. Returns `(value, duplicate keys in order of appearance)`. Raises
    `json.JSONDecodeError`, `ValueError` (NaN/Infinity) or `RecursionError` (deep nesting)."""
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, value in items:
            if key in out:
                duplicates.append(key)
            out[key] = value
        return out

    return json.loads(text, object_pairs_hook=pairs, parse_constant=_no_constant), duplicates


def loads_file(
    raw: bytes, max_bytes: int, depth: int, *, column: bool = False
) -> tuple[Any, list[str]]:
    """A file's bytes (UTF-8, a BOM allowed) through `loads_strict`: `(value, problems)`, the
    problems a duplicate key each, or `(None, [why it is no JSON])` (`depth`: the nesting named)."""
    if len(raw) > max_bytes:
        return None, [f"file is larger than {max_bytes} bytes"]
    try:
        value, duplicates = loads_strict(raw.decode("utf-8").removeprefix("\ufeff"))
    except UnicodeDecodeError as exc:
        return None, [f"not UTF-8 (byte {exc.start})"]
    except RecursionError:
        return None, [f"JSON nested deeper than {depth} levels"]
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}" + (f" column {exc.colno}" if column else "")
        return None, [f"not valid JSON: {exc.msg} at {where}"]
    except ValueError as exc:  # NaN / Infinity
        return None, [f"not valid JSON: {exc}"]
    return value, [f"duplicate key {json.dumps(k)}" for k in dict.fromkeys(duplicates)]


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


_MAX_SAFE_INTEGER = 2**53


def _as_double(value: int) -> int | float:
    """An integer as a JavaScript double: exact up to 2**53, rounded above, ±Infinity past it."""
    if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
        return value
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _js_int(text: str) -> int | float:
    if len(text) > 400:  # past 1.8e308 (JSON has no leading zeros); int() would refuse it
        return -math.inf if text.startswith("-") else math.inf
    return _as_double(int(text))


def parse_json_js(text: str) -> Any:
    """`JSON.parse(text)` in Python values: duplicate keys keep the last value (at the first
    key's position), numbers are doubles. Raises `json.JSONDecodeError` (with line and column)
    for text that `JSON.parse` refuses, and `RecursionError` for text nested deeper than
    Python's parser goes (about 1,000 levels), which `JSON.parse` reads: a deliberate
    difference (docs/security.md)."""
    try:
        return json.loads(text, parse_int=_js_int, parse_constant=_no_constant)
    except json.JSONDecodeError:
        raise
    except ValueError:  # NaN or Infinity: JSON.parse refuses them where they start
        raise json.JSONDecodeError("Expecting value", text, _constant_at(text)) from None


def _constant_at(text: str) -> int:
    """Where the first NaN/Infinity outside a string starts (the text before it parsed)."""
    masked = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: " " * len(m.group()), text)
    found = re.search(r"-?(?:NaN|Infinity)", masked)
    return found.start() if found is not None else 0


def js_number(value: float | int) -> str:
    """`String(n)`/`JSON.stringify(n)` of a JavaScript number (Infinity/NaN give `null`)."""
    if isinstance(value, int):
        value = _as_double(value)
        if isinstance(value, int):
            return str(value)
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr() is the shortest round-trip digit string, as ECMAScript's Number::toString uses;
    # only the layout differs (1e+21 vs 1e21, 1.5e-7 vs 1.5e-07, 100 vs 100.0).
    mantissa, _, exp = repr(abs(value)).partition("e")
    int_part, _, frac = mantissa.partition(".")
    every = int_part + frac
    digits = every.lstrip("0")
    n = len(int_part) + (int(exp) if exp else 0) - (len(every) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * -n + digits
    else:
        e = n - 1
        frac_digits = "." + digits[1:] if k > 1 else ""
        out = f"{digits[0]}{frac_digits}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + out


def _js_string(value: str) -> str:
    out = _dumps_str(value)
    if value.isascii():
        return out
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: JSON.stringify escapes them (\udXXX)
        out = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    return out


_dumps_str = json.encoder.encode_basestring
_SURROGATE = re.compile("[\ud800-\udfff]")


class JSText:
    """A JSON string value given as its pieces, in order (`str()` joins them). `js_dump` writes
    each piece as it comes, so a value that repeats one big text (a fragment named by many
    hooks) is never held whole: escaping is per character, so escaped pieces concatenate."""

    __slots__ = ("_pieces",)

    def __init__(self, pieces: Callable[[], Iterable[str]]):
        self._pieces = pieces

    def pieces(self) -> Iterable[str]:
        return self._pieces()

    def __str__(self) -> str:
        return "".join(self._pieces())


# A string at least this long is escaped once per dump however often the value names it.
_SHARED_MIN = 1 << 16
# Small parts are gathered to about this size before a write (one write per token is slow).
_WRITE_CHUNK = 1 << 16


def js_dump(value: Any, write: Callable[[str], object], indent: int | None = None) -> None:
    """`JSON.stringify(value, null, indent)` written through `write` piece by piece (no trailing
    newline), byte for byte as `js_dumps`. Memory stays near the largest single string in
    `value`, not the size of the output: a long string that `value` names many times (the same
    object) is escaped once and written each time, and `JSText` values are never joined."""
    pending: list[str] = []
    size = 0

    def put(part: str) -> None:
        nonlocal size
        if len(part) >= _WRITE_CHUNK:
            flush()
            write(part)
            return
        pending.append(part)
        size += len(part)
        if size >= _WRITE_CHUNK:
            flush()

    def flush() -> None:
        nonlocal size
        if pending:
            write("".join(pending))
            pending.clear()
            size = 0

    _emit(value, put, indent)
    flush()


def js_dumps(value: Any, indent: int | None = None) -> str:
    """`JSON.stringify(value, null, indent)` for JSON-shaped Python values, byte for byte."""
    parts: list[str] = []
    _emit(value, parts.append, indent)
    return "".join(parts)


def _js_scalar(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return js_number(v)
    raise TypeError(f"not JSON: {type(v).__name__}")


def _escaped(v: str, shared: dict[int, tuple[str, str]], quoted: bool = True) -> str:
    """`v` as a JSON string (without its quotes unless `quoted`). A long string is escaped once
    per dump however often it is named; the entry keeps it alive, so its id is not reused."""
    if len(v) < _SHARED_MIN:
        return _js_string(v) if quoted else _js_string(v)[1:-1]
    key = id(v) if quoted else ~id(v)
    hit = shared.get(key)
    if hit is None:
        out = _js_string(v)
        hit = shared[key] = (v, out if quoted else out[1:-1])
    return hit[1]


def _emit(value: Any, put: Callable[[str], object], indent: int | None) -> None:
    sep_key = ":" if indent is None else ": "
    shared: dict[int, tuple[str, str]] = {}

    def emit(v: Any, level: int) -> None:
        if isinstance(v, str):
            put(_escaped(v, shared))
        elif isinstance(v, JSText):
            put('"')
            for piece in v.pieces():
                put(_escaped(piece, shared, quoted=False))
            put('"')
        elif isinstance(v, dict):
            container(list(v.items()), "{}", level)
        elif isinstance(v, (list, tuple)):
            container(list(v), "[]", level)
        else:
            put(_js_scalar(v))

    def container(items: list[Any], brackets: str, level: int) -> None:
        if not items:
            put(brackets)
            return
        is_dict = brackets == "{}"
        inner = "" if indent is None else "\n" + " " * (indent * (level + 1))
        outer = "" if indent is None else "\n" + " " * (indent * level)
        put(brackets[0])
        for i, item in enumerate(items):
            if i:
                put(",")
            put(inner)
            if is_dict:
                put(_js_string(str(item[0])) + sep_key)
                emit(item[1], level + 1)
            else:
                emit(item, level + 1)
        put(outer + brackets[1])

    emit(value, 0)
