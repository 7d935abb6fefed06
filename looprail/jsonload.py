"""JSON as looprail reads and writes it.

- `loads_strict`, for files from users and third parties: the standard parser, plus duplicate
  keys collected (which of two values wins differs between readers, so callers refuse to guess)
  and `NaN`/`Infinity` rejected (not JSON).
- `parse_json_js`, `js_dumps`, `js_dump`: `JSON.parse` and `JSON.stringify` as the reference
  (JavaScript) does them, byte for byte, for the project config and `render-hooks` output.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from json.decoder import scanstring  # type: ignore[attr-defined]  # exported, not in typeshed
from typing import Any, NoReturn


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


# --------------------------------------------------------------------------- JSON as JavaScript

_MAX_SAFE_INTEGER = 2**53
# A file nested deeper than Python's C parser allows is parsed iteratively only up to this size.
MAX_DEEP_BYTES = 2 * 1024 * 1024
# Containers nested deeper than this are checked for syntax but kept empty: no key path is that
# long, and a 30 MB run of `[` would otherwise cost gigabytes of Python lists.
MAX_KEPT_DEPTH = 512


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
    key's position), numbers are doubles, any nesting depth. Raises `json.JSONDecodeError`
    (with line and column) for text that `JSON.parse` refuses."""
    try:
        return json.loads(text, parse_int=_js_int, parse_constant=_no_constant)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError):
        # Deeper than the C parser's recursion limit, or NaN/Infinity: the iterative parser
        # gives JSON.parse's answer and the exact error position, at microseconds per nesting
        # level, so past MAX_DEEP_BYTES it is refused (a deliberate difference).
        if len(text) > MAX_DEEP_BYTES:
            raise json.JSONDecodeError(
                f"nested too deeply for a file over {MAX_DEEP_BYTES >> 20} MiB", text, 0
            ) from None
        return _DeepParser(text).parse()


_WS = r"[ \t\n\r]*"
_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
_LITERALS = (("true", True), ("false", False), ("null", None))
_OPENERS_AS_CLOSERS = str.maketrans("[{", "]}", " \t\n\r:")
_NO_WS = str.maketrans("", "", " \t\n\r")
_OPEN: Any = object()  # "a container was opened: parse the next value"


class _DeepParser:
    """`JSON.parse` without recursion. Containers below MAX_KEPT_DEPTH are checked for syntax
    only (`deep` holds their closers), and runs of openers and closers there are consumed in one
    regex step, so a pathological `[[[[…` file is checked at C speed, not per character."""

    def __init__(self, s: str) -> None:
        self.s, self.n = s, len(s)
        self._ws = re.compile(_WS).match  # matches at every position: never None
        self._number = re.compile(r"(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?").match
        self._opener_run = re.compile(rf"(?:\[{_WS}|\{{{_WS}{_STRING}{_WS}:{_WS}){{1,4096}}").match
        self._closer_run = re.compile(rf"(?:[\]}}]{_WS}){{1,4096}}").match
        self._strings = re.compile(_STRING)
        self.stack: list[list[Any]] = []  # kept containers: [container, pending key, closer]
        self.deep = bytearray()
        self.result: Any = None

    def skip(self, pos: int) -> int:
        return self._ws(self.s, pos).end()  # type: ignore[union-attr]

    def fail(self, msg: str, pos: int) -> NoReturn:
        raise json.JSONDecodeError(msg, self.s, pos)

    def key_at(self, pos: int) -> tuple[str, int]:
        if pos >= self.n or self.s[pos] != '"':
            self.fail("Expecting property name enclosed in double quotes", pos)
        key, pos = scanstring(self.s, pos + 1, True)
        pos = self.skip(pos)
        if pos >= self.n or self.s[pos] != ":":
            self.fail("Expecting ':' delimiter", pos)
        return key, self.skip(pos + 1)

    def parse(self) -> Any:
        pos = self.skip(0)
        while True:
            value, pos = self.value(pos)
            if value is not _OPEN:
                pos = self.attach(value, pos)
                if pos < 0:
                    return self.result

    def value(self, pos: int) -> tuple[Any, int]:
        """The value at `pos` and the position after it, or `_OPEN` for an opened container."""
        s = self.s
        if pos >= self.n:
            self.fail("Expecting value", pos)
        c = s[pos]
        if c == "{" or c == "[":
            return self.open(c, pos)
        if c == '"':
            return scanstring(s, pos + 1, True)
        for word, literal in _LITERALS:
            if s.startswith(word, pos):
                return literal, pos + len(word)
        m = self._number(s, pos)
        if m is None:
            self.fail("Expecting value", pos)
        integer, frac, exp = m.groups()
        return (float(m.group()) if frac or exp else _js_int(integer)), m.end()

    def open(self, c: str, pos: int) -> tuple[Any, int]:
        if len(self.stack) >= MAX_KEPT_DEPTH:
            m = self._opener_run(self.s, pos)
            if m is not None:
                self.deep += (
                    self._strings.sub("", m.group()).translate(_OPENERS_AS_CLOSERS).encode()
                )
                pos = m.end()
                if pos >= self.n or self.s[pos] != "]" or self.deep[-1] != 93:
                    return _OPEN, pos
                del self.deep[-1]  # the run ended with an empty array
                return [], pos + 1
        closer = "}" if c == "{" else "]"
        pos = self.skip(pos + 1)
        if pos < self.n and self.s[pos] == closer:
            return ({} if c == "{" else []), pos + 1
        entry: list[Any] = [{} if c == "{" else [], None, closer]
        if c == "{":  # below MAX_KEPT_DEPTH only a malformed first key gets here: it raises
            entry[1], pos = self.key_at(pos)
        self.stack.append(entry)
        return _OPEN, pos

    def attach(self, value: Any, pos: int) -> int:
        """Put `value` into its container and close the containers that end here. Returns where
        the next value starts, or -1 at the end of the text (the value is `self.result`)."""
        s, n, stack = self.s, self.n, self.stack
        while True:
            pos = self.skip(pos)
            if self.deep:
                value, pos = self.close_deep(pos)
                if value is _OPEN:
                    return pos
                continue
            if not stack:
                if pos != n:
                    self.fail("Extra data", pos)
                self.result = value
                return -1
            top = stack[-1]
            container, closer = top[0], top[2]
            if closer == "}":
                container[top[1]] = value
            else:
                container.append(value)
            if pos < n and s[pos] == ",":
                pos = self.skip(pos + 1)
                if closer == "}":
                    top[1], pos = self.key_at(pos)
                return pos
            if pos >= n or s[pos] != closer:
                self.fail("Expecting ',' delimiter", pos)
            pos += 1
            stack.pop()
            value = container

    def close_deep(self, pos: int) -> tuple[Any, int]:
        """After a value below MAX_KEPT_DEPTH: a comma (`_OPEN`), or a run of closers (the closed
        container, or None while still below MAX_KEPT_DEPTH)."""
        s, deep = self.s, self.deep
        if pos < self.n and s[pos] == ",":
            pos = self.skip(pos + 1)
            if deep[-1] == 125:
                _, pos = self.key_at(pos)
            return _OPEN, pos
        m = self._closer_run(s, pos)
        if m is None:
            self.fail("Expecting ',' delimiter", pos)
        run = m.group()
        closers = run.translate(_NO_WS).encode()
        k = min(len(closers), len(deep))
        if deep[len(deep) - k :] != closers[:k][::-1]:
            i = next(i for i in range(k) if deep[-1 - i] != closers[i])
            self.fail("Expecting ',' delimiter", pos + _offset_of(run, closers, i))
        last = deep[len(deep) - k]
        del deep[len(deep) - k :]
        pos += _offset_of(run, closers, k) if k < len(closers) else len(run)
        return (({} if last == 125 else []) if not deep else None), pos


def _offset_of(run: str, closers: bytes, count: int) -> int:
    """Offset in `run` (closers and whitespace) of its closer number `count`."""
    if len(closers) == len(run):
        return count
    seen = 0
    for offset, ch in enumerate(run):
        if ch in "]}":
            if seen == count:
                return offset
            seen += 1
    return len(run)


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
    """A JSON string value given as its pieces, in order (their concatenation is the string).

    `js_dump` writes each piece as it comes, so a value that repeats one big text (a fragment
    named by many hooks) is never held whole: JSON string escaping is per character, so the
    escaped pieces concatenate to the escaped whole. `str()` joins them."""

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
