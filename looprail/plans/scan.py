"""The PLAN.md body scanner: the top-level elements of a region of the document. The body is
not XML (task text is markdown), so it finds an opening tag and jumps to its matching close,
keeping what is inside verbatim; code fences, code spans and HTML comments are blanked out of
the copy it searches, so a `<task>` inside backticks is text.
"""

from __future__ import annotations

import bisect
import re
import textwrap
from collections.abc import Iterator
from typing import NamedTuple

from looprail.errors import PlanError


class Doc:
    """The plan text, a copy with code and comments blanked out for tag search, and line lookup."""

    def __init__(self, text: str, where: str):
        self.text = text
        self.where = where
        self.scan = mask_code(text)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.notes: list[str] = []

    def note(self, offset: int | None, message: str) -> None:
        where = self.where if offset is None else f"{self.where}:{self.line(offset)}"
        self.notes.append(f"{where}: {message}")

    def remask_from(self, offset: int) -> None:
        """Mask the text after `offset` on its own (past a fence left open before it)."""
        self.scan = self.scan[:offset] + mask_code(self.text[offset:])

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self._line_starts, offset)

    def fail_line(self, line: int, reason: str) -> PlanError:
        return PlanError(f"{self.where}:{line}: {reason}")

    def fail(self, offset: int, reason: str) -> PlanError:
        return self.fail_line(self.line(offset), reason)


class Element(NamedTuple):
    """A scanned `<name attrs>inner</name>`: offsets into the document."""

    name: str
    attrs: str
    start: int
    inner_start: int
    inner_end: int


_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.M)
_BACKTICKS = re.compile(r"`+")
_OPEN_TAG = re.compile(r"<([A-Za-z][\w:-]*)(\s[^<>]*)?>")


def mask_code(text: str) -> str:
    """Same length and line structure as `text`, with fenced blocks, inline code spans and HTML
    comments replaced by spaces. An unterminated fence is left as text."""
    out = list(text)
    pos = 0
    # fence char → shortest fence length known to have no closing line after it (a longer one
    # has none either), so an unclosed fence does not rescan the rest.
    unclosed: dict[str, int] = {}
    while match := _FENCE_OPEN.search(text, pos):
        fence = match.group(1)
        if len(fence) >= unclosed.get(fence[0], len(text) + 1):
            pos = match.end()
            continue
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        line_end = text.find("\n", match.end())
        closing = close.search(text, line_end + 1) if line_end != -1 else None
        if closing is None:
            unclosed[fence[0]] = len(fence)
            pos = match.end()
            continue
        _blank_range(out, match.start(), closing.end())
        pos = closing.end()
    _blank_comments(out)
    _blank_code_spans(out)
    return "".join(out)


def _blank_range(out: list[str], start: int, end: int) -> None:
    for i in range(start, end):
        if out[i] != "\n":
            out[i] = " "


def _blank_comments(out: list[str]) -> None:
    """`<!-- … -->` (across lines) blanked in one pass (an unclosed `<!--` ends the search)."""
    text = "".join(out)
    pos = 0
    while (start := text.find("<!--", pos)) != -1:
        end = text.find("-->", start + 4)
        if end == -1:
            return
        _blank_range(out, start, end + 3)
        pos = end + 3


def _blank_code_spans(out: list[str]) -> None:
    """Inline code spans blanked: a run of N backticks up to the next run of exactly N on the
    same line, found from a "next run of this length" table (linear, not quadratic)."""
    text = "".join(out)
    line_start = 0
    while line_start <= len(text):
        line_end = text.find("\n", line_start)
        if line_end == -1:
            line_end = len(text)
        runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text, line_start, line_end)]
        nxt: list[int | None] = [None] * len(runs)
        last: dict[int, int] = {}
        for i in range(len(runs) - 1, -1, -1):
            length = runs[i][1] - runs[i][0]
            nxt[i] = last.get(length)
            last[length] = i
        i = 0
        while i < len(runs):
            j = nxt[i]
            if j is None:
                i += 1
                continue
            _blank_range(out, runs[i][0], runs[j][1])
            i = j + 1
        line_start = line_end + 1


def elements(
    doc: Doc, start: int, end: int, required: tuple[str, ...], context: str
) -> Iterator[Element]:
    """Top-level elements between `start` and `end`. An element named in `required` must be
    closed (else PlanError); any other unclosed tag is treated as text."""
    pos = start
    # tag name → offset after which it has no closing tag (unclosed tags rescan nothing)
    unclosed: dict[str, int] = {}
    while match := _OPEN_TAG.search(doc.scan, pos, end):
        name = match.group(1)
        if match.end() >= unclosed.get(name, end + 1):
            closing = None
        else:
            closing = re.compile(rf"</{re.escape(name)}\s*>").search(doc.scan, match.end(), end)
            if closing is None:
                unclosed[name] = match.end()
        if name == "task" and closing is not None:
            # A second <task> before this one's </task> means this one was never closed.
            nxt = re.compile(r"<task(\s[^<>]*)?>").search(doc.scan, match.end(), closing.start())
            if nxt is not None:
                raise doc.fail(
                    match.start(),
                    f"<task> has no </task> before the next <task> (line {doc.line(nxt.start())})",
                )
        if closing is None and name in required:
            # The close may sit behind an unbalanced code fence (its ``` pairs with a fence
            # further on and masks the close): take the close in the text as written.
            raw = re.compile(rf"^[ \t]*</{re.escape(name)}\s*>", re.M).search(
                doc.text, match.end(), end
            )
            if raw is None:
                raise doc.fail(match.start(), f"<{name}> has no </{name}> {context}")
            doc.note(
                match.start(),
                f"<{name}> holds an unbalanced code fence; read up to its </{name}> "
                f"(line {doc.line(raw.start())})",
            )
            doc.remask_from(raw.end())
            unclosed.pop(name, None)
            close_at = raw.start() + raw.group(0).index("<")
            yield Element(name, match.group(2) or "", match.start(), match.end(), close_at)
            pos = raw.end()
            continue
        if closing is None:
            pos = match.end()
            continue
        yield Element(name, match.group(2) or "", match.start(), match.end(), closing.start())
        pos = closing.end()


_ATTR = re.compile(r"""([A-Za-z_][\w:.-]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")


def parse_attributes(doc: Doc, element: Element) -> dict[str, str]:
    attrs: dict[str, str] = {}
    text = element.attrs
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        match = _ATTR.match(text, pos)
        if match is None:
            raise doc.fail(
                element.start, f"<task> has a malformed attribute list: {text.strip()!r}"
            )
        key = match.group(1)
        value = next((g for g in match.groups()[1:] if g is not None), "")
        if key in attrs:
            raise doc.fail(element.start, f"<task> repeats the attribute {key!r}")
        attrs[key] = value
        pos = match.end()
    return attrs


class Fragment(NamedTuple):
    """One element inside a task child's text (`child_elements`)."""

    name: str
    attributes: dict[str, str]
    text: str  # cleaned like a task child (`_clean`)


def child_elements(text: str, where: str) -> list[Fragment]:
    """The top-level elements of a task child's text (a checkpoint's `<options>`)."""
    doc = Doc(text, where)
    out = []
    for element in elements(doc, 0, len(text), (), where):
        try:
            attrs = parse_attributes(doc, element)
        except PlanError:
            attrs = {}
        inner = clean(text[element.inner_start : element.inner_end])
        out.append(Fragment(element.name, attrs, inner))
    return out


def clean(raw: str) -> str:
    """Element text without the blank lines around it and its common indentation (text on the
    tag's own line is kept as is, the following lines dedented)."""
    lines = raw.split("\n")
    starts_inline = bool(lines[0].strip())
    first = lines.pop(0).strip() if starts_inline else None
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    rest = textwrap.dedent("\n".join(lines)).rstrip()
    if first is None:
        return rest
    return f"{first}\n{rest}" if rest else first
