"""Terminal-safe text: what looprail prints from data (manifests, folder names, the journal, a
child's output) can never move the cursor, recolour or forge a line: C0, DEL and C1 controls
become visible escapes. `one_line` escapes newlines and tabs too; `SafeStream`, installed over
stdout and stderr for every command but `render-hooks` (byte-identical JSON), keeps them.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import TextIO

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    return _NAMED.get(ch) or f"\\x{ord(ch):02x}"


# A regex scans long output at C speed (a Python loop per character made `report --json` slow).
_ANY_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL, C1
_BAD_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # the same without newline and tab


def one_line(text: object) -> str:
    """`text` on one line with every control character (newline included) escaped."""
    return _ANY_CONTROL.sub(_escape, str(text))


def multi_line(text: object) -> str:
    """`text` with newlines and tabs kept and every other control character escaped."""
    return _BAD_CONTROL.sub(_escape, str(text))


# Exact strings looprail itself coloured (`cli._common.paint`: a status word between SGR codes).
# SafeStream lets these through whole; data containing one can at most colour that word, never
# move the cursor or forge a line.
_TRUSTED: set[str] = set()


def trusted(painted: str) -> str:
    """Mark `painted` (looprail's own colour codes around a fixed word) as safe to print."""
    _TRUSTED.add(painted)
    return painted


@functools.cache
def _trusted_pattern(spans: frozenset[str]) -> re.Pattern[str]:
    alternatives = sorted(spans, key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in alternatives))


def _keep_trusted(text: str) -> str:
    out, last = [], 0
    for match in _trusted_pattern(frozenset(_TRUSTED)).finditer(text):
        out += [multi_line(text[last : match.start()]), match.group()]
        last = match.end()
    out.append(multi_line(text[last:]))
    return "".join(out)


class SafeStream:
    """A text stream that escapes control characters in everything written to it (except
    the exact colour spans `trusted` registered)."""

    def __init__(self, inner: TextIO):
        self._inner = inner

    def write(self, text: str) -> int:
        if _TRUSTED and "\x1b" in text:
            self._inner.write(_keep_trusted(text))
        else:
            self._inner.write(multi_line(text))
        return len(text)

    def write_trusted(self, text: str) -> int:
        """looprail's own terminal control (the live status line), never data."""
        return self._inner.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):  # flush, isatty, fileno, encoding, buffer…
        return getattr(self._inner, name)


def install() -> tuple[object, object]:
    """Wrap `sys.stdout` and `sys.stderr`; returns the originals for `restore`."""
    saved = (sys.stdout, sys.stderr)
    if not isinstance(sys.stdout, SafeStream):
        sys.stdout = SafeStream(sys.stdout)
    if not isinstance(sys.stderr, SafeStream):
        sys.stderr = SafeStream(sys.stderr)
    return saved


def restore(saved: tuple[object, object]) -> None:
    sys.stdout, sys.stderr = saved


def plural(n: int, noun: str, many: str | None = None) -> str:
    """`1 error`, `2 errors`, `0 errors` (`many` for irregular nouns: `plural(n, "dispatch",
    "dispatches")`)."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


def wants_escapes(stream: object) -> bool:
    """Escape codes (colour, redrawing) only for a person at a terminal: never into a pipe or
    a file, nor with NO_COLOR set (any value, no-color.org) or TERM=dumb."""
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed stream
        return False
