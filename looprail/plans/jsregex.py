"""A key link's `pattern` is a JavaScript regular expression (`new RegExp(pattern)`): compiled
with JavaScript's meaning on Python's `re` where the dialects disagree: `$`, named groups and
backreferences, ASCII `\\d`/`\\w`/`\\b`, `{,n}`, `\\s`, `[^]` and `[]`, `[` in a class, `*+`."""

from __future__ import annotations

import re

# JavaScript's `\s`: WhiteSpace and LineTerminator (ECMA-262 §22.2.2.9), inside a class.
_JS_SPACE = "\\t\\n\\v\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_GROUP_NAME = re.compile(r"\(\?<([A-Za-z_$][\w$]*)>")
_BACKREF = re.compile(r"\\k<([A-Za-z_$][\w$]*)>")
_NO_MIN = re.compile(r"\{,\d*\}")
_COUNTED = re.compile(r"(?<!\\)\{\d+(?:,\d*)?\}\Z")


def js_regex(pattern: str) -> re.Pattern[str]:
    """`pattern` compiled as `new RegExp(pattern)` reads it; `re.error` when it cannot be."""
    return re.compile(_translate(pattern), re.ASCII)


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            ref = None if in_class else _BACKREF.match(pattern, i)
            out.append(f"(?P={ref.group(1)})" if ref else _escape(pattern[i : i + 2], in_class))
            i = ref.end() if ref else i + 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append("\\[" if ch == "[" else ch)
        elif ch == "[":
            i, piece, in_class = _class_start(pattern, i)
            out.append(piece)
            continue
        elif ch == "$":
            out.append("\\Z")
        elif ch == "{" and _NO_MIN.match(pattern, i):
            out.append("\\{")  # `{,3}` is text in JavaScript, a quantifier in Python
        elif ch == "+" and _ends_quantifier(out):
            raise re.error("nothing to repeat (JavaScript has no possessive quantifier)")
        elif (named := _GROUP_NAME.match(pattern, i)) is not None:
            out.append(f"(?P<{named.group(1)}>")
            i = named.end()
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _ends_quantifier(out: list[str]) -> bool:
    """Whether the translation so far ends with a quantifier (`+` after one is possessive in
    Python, an error in JavaScript)."""
    return bool(out) and (out[-1] in ("*", "+", "?") or _COUNTED.search("".join(out)) is not None)


def _escape(pair: str, in_class: bool) -> str:
    if pair == "\\s":
        return _JS_SPACE if in_class else f"[{_JS_SPACE}]"
    if pair == "\\S" and not in_class:
        return f"[^{_JS_SPACE}]"
    return pair


def _class_start(pattern: str, i: int) -> tuple[int, str, bool]:
    """A class opening at `i`: `[^]` (any character) and `[]` (none) are whole; otherwise the
    opening, with a leading `]` kept literal (JavaScript ends the class there, Python not)."""
    if pattern.startswith("[^]", i):
        return i + 3, "[\\s\\S]", False
    if pattern.startswith("[]", i):
        return i + 2, "(?!)", False
    if pattern.startswith("[^", i):
        return i + 2, "[^", True
    return i + 1, "[", True
