"""`<read_first>` as real plans write it (`01-CONTEXT.md (D-01, D-02)`, `- src/a.tsx — read the
full file`, `src/a.js i src/b.js (…)`): each entry's path part is one or more path-like words at
its start (or one bare name alone, `Makefile`), the rest its note. Commas split entries outside
brackets; a dash or colon note runs to the end of its line; a line with no path joins the
previous note.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

# A path-like word: has a `/` or ends in a file extension; no glob characters, no URL.
_EXT = re.compile(r"\.[A-Za-z0-9]{1,12}$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
# What opens a note that runs to the end of the line (em/en dash, a spaced hyphen, a colon).
_LINE_NOTE = re.compile(r"^(?:—|–|--?|:)\s*")
_CONNECTOR = re.compile(r"^(?:[A-Za-z]{1,4}|&|\+)$")  # `i`, `and`, `und`, `&` between two paths
# A file name with no extension, alone as an entry (`Makefile`); never ends in `.` (prose).
_BARE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?<!\.)")


class ReadFirst(NamedTuple):
    """One file to read: `path` as written (its path part) and `note`, the rest of the entry."""

    path: str
    note: str = ""


def read_first_entries(text: str) -> list[ReadFirst]:
    """The files a `<read_first>` names, in order, each once, with its note (a note before any
    file has an empty path)."""
    out: list[ReadFirst] = []
    for raw in text.splitlines():
        line = _BULLET.sub("", raw).strip()
        if not line:
            continue
        parts = _split_commas(line)
        for n, part in enumerate(parts):
            paths, note = _path_part(part.strip())
            if not paths:
                _add_note(out, part.strip(), ", " if n else "\n")
                continue
            for path in paths:
                _add(out, ReadFirst(path, note))
            if _LINE_NOTE.match(_raw_note(part.strip(), paths)) and n + 1 < len(parts):
                _add_note(out, ",".join(parts[n + 1 :]).strip(), ", ")  # the note's own commas
                break
    return out


def resolve(project: Path, phase_dir: Path | None, path: str) -> str:
    """`path` as the project-relative path of the file it names: a bare file name (no `/`) in
    the phase folder is the phase's (`01-RESEARCH.md`), anything else the project's as written."""
    if "/" in path or phase_dir is None or not (phase_dir / path).is_file():
        return path
    try:
        return (phase_dir / path).resolve().relative_to(project.resolve()).as_posix()
    except ValueError:  # a phase folder outside the project: the written name, checked as is
        return path


def _path_part(part: str) -> tuple[list[str], str]:
    """The leading path-like words of an entry and the note after them."""
    words = part.split()
    paths: list[str] = []
    i = 0
    while i < len(words):
        word = words[i].strip("`")
        if _path_like(word):
            paths.append(word.rstrip(",;"))
            i += 1
        elif paths and _CONNECTOR.match(word) and i + 1 < len(words):
            if not _path_like(words[i + 1].strip("`")):
                break
            i += 1
        else:
            break
    if not paths:
        bare = words[0].strip("`") if len(words) == 1 else ""
        return ([bare], "") if _BARE_NAME.fullmatch(bare) else ([], "")
    return paths, _LINE_NOTE.sub("", " ".join(words[i:])).strip()


def _raw_note(part: str, paths: list[str]) -> str:
    """The text after the last path of `part`, before its separator is removed."""
    at = part.rfind(paths[-1])
    return part[at + len(paths[-1]) :].lstrip("`").strip()


def _path_like(word: str) -> bool:
    if not word or any(c in word for c in "*?[]{}()<>") or "://" in word:
        return False
    if word.startswith(("(", "§", "@")) or word.endswith(":"):
        return False
    word = word.rstrip(",;")
    return "/" in word.strip("/") or bool(_EXT.search(word) and _EXT.sub("", word))


def _split_commas(line: str) -> list[str]:
    """`line` split at commas outside brackets and backticks."""
    parts, depth, tick, start = [], 0, False, 0
    for i, ch in enumerate(line):
        if ch == "`":
            tick = not tick
        elif ch in "([{" and not tick:
            depth += 1
        elif ch in ")]}" and not tick and depth:
            depth -= 1
        elif ch == "," and not depth and not tick:
            parts.append(line[start:i])
            start = i + 1
    parts.append(line[start:])
    return [p for p in parts if p.strip()]


def _add(out: list[ReadFirst], entry: ReadFirst) -> None:
    for n, seen in enumerate(out):
        if seen.path == entry.path:
            if entry.note and entry.note not in seen.note:
                out[n] = seen._replace(note=f"{seen.note}; {entry.note}".strip("; "))
            return
    out.append(entry)


def _add_note(out: list[ReadFirst], text: str, joiner: str) -> None:
    if not text:
        return
    if not out:
        out.append(ReadFirst("", text))
        return
    last = out[-1]
    out[-1] = last._replace(note=f"{last.note}{joiner}{text}" if last.note else text)
