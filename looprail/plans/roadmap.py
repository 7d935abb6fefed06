"""`.planning/ROADMAP.md` as the reference reads it (`init manager` / `roadmap analyze`): the
phases its `## Phase N: Name` headings name, in order, the `- [x] … Phase N:` checkboxes that
mark a phase done, and one phase's section. Archived milestones (`<details>…</details>`) are
left out; phase 0 and 999 (pre-milestone and backlog) are never phases to run.
"""

from __future__ import annotations

import os
import re

from looprail.errors import LooprailError
from looprail.fsutil import read_bounded
from looprail.layout import ROADMAP_FILE, normalize_phase_number

# What plan-phase passes when the requirement ids are unknown.
UNKNOWN_REQ_IDS = "TBD"

_TOKEN = r"\d+[A-Z]?(?:\.\d+)*"
_HEADING = re.compile(
    rf"#{{2,4}}\s*Phase\s+({_TOKEN})(?:\s*\([^)\n]{{0,200}}\))?\s*:\s*([^\n]+)", re.I
)
# A checkbox is `-\s*\[(x| )\]\s*.*Phase\s+N[:\s]`, the last `Phase N` of its line; read in
# two linear steps (the box, then its line), not with `.*`, which backtracks quadratically.
_BOX = re.compile(r"-\s*\[(x| )\]\s*", re.I)
_PHASE_IN_LINE = re.compile(rf"Phase[^\S\n]+({_TOKEN})[:\s]", re.I)
_DETAILS = re.compile(r"<details\b[^>]*>.*?</details>", re.I | re.S)
_SENTINELS = {"0", "999"}
ROADMAP_LIMIT = 16 << 20  # bytes: a roadmap is a page of text


def read_roadmap(project: str | os.PathLike[str]) -> str | None:
    """The ROADMAP.md text, or None when there is none. A regular file of at most
    `ROADMAP_LIMIT` (`fsutil.read_bounded`); anything else raises a one-line `LooprailError`."""
    path = os.path.join(project, ROADMAP_FILE)
    try:
        data = read_bounded(path, ROADMAP_LIMIT)
    except OSError as exc:
        raise LooprailError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    return None if data is None else data.decode("utf-8", errors="replace")


def _checkboxes(text: str) -> list[tuple[str, str]]:
    """(mark, phase token) of every checkbox, in order: a box takes the last `Phase N` after it
    on the line its text begins on. Each line's last `Phase N` is found once (linear time)."""
    found: list[tuple[str, str]] = []
    last_on: dict[int, re.Match[str] | None] = {}  # line start -> its last `Phase N`
    pos = 0
    while (box := _BOX.search(text, pos)) is not None:
        line = text.rfind("\n", 0, box.end()) + 1
        if line not in last_on:
            end = text.find("\n", line)
            last = None
            for last in _PHASE_IN_LINE.finditer(text, line, len(text) if end < 0 else end + 1):  # noqa: B007
                pass
            last_on[line] = last
        phase = last_on[line]
        if phase is not None and phase.start() >= box.end():
            found.append((box.group(1), phase.group(1)))
            pos = phase.end()
        else:
            pos = box.start() + 1
    return found


def roadmap_phases(text: str) -> list[tuple[str, str, bool]]:
    """(number, name, checked) for every phase heading outside archived milestones, in order."""
    current = _DETAILS.sub("", text)
    checked: dict[str, bool] = {}
    for mark, token in _checkboxes(current):
        number = normalize_phase_number(token)
        if number is not None:
            checked[number] = mark.lower() == "x"
    out: list[tuple[str, str, bool]] = []
    seen: set[str] = set()
    for heading in _HEADING.finditer(current):
        number = normalize_phase_number(heading.group(1))
        if number is None or number in seen or _sentinel(number):
            continue
        seen.add(number)
        name = re.sub(r"\(INSERTED\)", "", heading.group(2), flags=re.I).strip()
        out.append((number, name, checked.get(number, False)))
    return out


def roadmap_section(text: str, phase_number: str, *, heading: bool = False) -> str | None:
    """The text after phase `phase_number`'s heading up to the next phase heading, or None.
    `heading`: from the start of the heading's line (the section as written, for an agent)."""
    number = phase_number.lstrip("0") or "0"
    pattern = re.compile(rf"^#{{1,6}}\s*Phase\s+0*{re.escape(number)}(?![0-9.])", re.M)
    found = pattern.search(text)
    if found is None:
        return None
    following = re.compile(r"^#{1,6}\s*Phase\s+", re.M).search(text, found.end())
    end = following.start() if following else len(text)
    if heading:  # for an agent, also not past the end of the heading's own level (`## Progress`)
        level = len(found.group(0)) - len(found.group(0).lstrip("#"))
        above = re.compile(rf"^#{{1,{level}}}[^#]", re.M).search(text, found.end(), end)
        end = above.start() if above else end
    return text[found.start() if heading else found.end() : end]


def _sentinel(number: str) -> bool:
    """Phase 0 or 999 (`999.1` is backlog too); `number` is normalised (no leading zeros)."""
    match = re.match(r"\d+", number)
    return match is not None and match.group() in _SENTINELS


def roadmap_req_ids(project: str | os.PathLike[str], phase_number: str) -> str:
    """The `**Requirements**:` line of the phase's ROADMAP.md section as `init plan-phase`
    reads it (`REQ-01, REQ-02`), or "" when there is none or it is TBD."""
    text = read_roadmap(project)
    section = roadmap_section(text, phase_number) if text is not None else None
    if section is None:
        return ""
    line = re.search(r"^\*\*Requirements:?\*\*[^\S\n]*:?[^\S\n]*([^\n]*)$", section, re.M)
    if line is None:
        return ""
    ids = [p.strip() for p in line.group(1).replace("[", "").replace("]", "").split(",")]
    joined = ", ".join(p for p in ids if p)
    return "" if joined == UNKNOWN_REQ_IDS else joined
