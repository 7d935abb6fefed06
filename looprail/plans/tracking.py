"""GSD's own tracking files, written as the reference writes them: ROADMAP.md after each plan
(`roadmap update-plan-progress`) and ROADMAP.md, STATE.md and REQUIREMENTS.md when a phase is
complete (`phase complete`). Pure text → text (docs/loop.md, "GSD's tracking files"). Edits
work line by line with anchored patterns (linear time on a hostile ROADMAP), confined to the
current milestone: what follows the last `</details>`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

_DETAILS_END = "</details>"
_TAG = r"(?:\s*\([^)\n]{0,200}\))?"  # the reference's OPTIONAL_PHASE_TAG_SOURCE
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_REQ_ID = re.compile(r"^[A-Z][A-Z0-9]*-\d+$", re.I)
_OPEN_REQ = re.compile(r"pending|in progress|gaps found", re.I)  # a row phase complete closes


class Counts(NamedTuple):
    """A phase's plans, those with a SUMMARY, and the SUMMARY file names."""

    plans: int
    summaries: int
    summary_names: Sequence[str] = ()


def phase_source(number: str) -> str:
    """A pattern for phase `number` however it is padded (`phaseMarkdownRegexSource`)."""
    match = re.match(r"^0*(\d+)([A-Z])?((?:\.\d+)*)$", number, re.I)
    if match is None:
        return re.escape(number)
    whole = match.group(1).lstrip("0") or "0"
    return f"0*{whole}{re.escape(match.group(2) or '')}{re.escape(match.group(3) or '')}"


# ---------------------------------------------------------------- ROADMAP.md


def plan_progress(roadmap: str, number: str, counts: Counts, *, verified: bool, today: str) -> str:
    """ROADMAP.md after `roadmap update-plan-progress N`: the phase's table row, `**Plans**:`
    count and plans' checkboxes, its own checkbox once all are done and `verified`."""
    if counts.plans == 0:
        return roadmap
    complete = counts.summaries >= counts.plans and verified
    status = "Complete" if complete else "In Progress" if counts.summaries else "Planned"
    src = phase_source(number)
    cells = _progress_row(src, counts, f" {status.ljust(11)}", complete, today)
    done = "complete" if complete else "executed"
    roadmap = _in_progress_section(roadmap, cells)
    roadmap = _in_active(roadmap, lambda t: _plan_count(t, src, f"{_count(counts)} plans {done}"))
    if complete:
        roadmap = _in_active(roadmap, lambda t: _check_phase(t, src, today, tight=False))
    return _check_plans(roadmap, counts.summary_names)


def phase_complete(roadmap: str, number: str, counts: Counts, *, today: str) -> str:
    """ROADMAP.md after `phase complete N`: the phase's checkbox (`(completed <today>)`), table
    row `Complete` (a date already there kept), `**Plans:**` count and plans' checkboxes."""
    src = phase_source(number)
    roadmap = _in_active(roadmap, lambda t: _check_phase(t, src, today, tight=True))
    cells = _progress_row(src, counts, " Complete    ", True, today)
    roadmap = _in_progress_section(roadmap, cells)
    body = f"{_count(counts)} plans complete"
    roadmap = _in_active(roadmap, lambda t: _plan_count(t, src, body, bold_colon_only=True))
    return _check_plans(roadmap, counts.summary_names)


def _progress_row(
    src: str, counts: Counts, status: str, complete: bool, today: str
) -> Callable[[str], str]:
    """The edit of a progress table that sets the phase's Plans Complete, Status, Completed."""
    row = _row_matcher(src)

    def cells(table: str) -> str:
        table = _set_cell(table, row, "Plans Complete", lambda _: f" {_count(counts)} ")
        table = _set_cell(table, row, "Status", lambda _: status)
        return _set_cell(table, row, "Completed", lambda cur: _completed(cur, complete, today))

    return cells


def _count(counts: Counts) -> str:
    return f"{counts.summaries}/{counts.plans}"


def _completed(current: str, complete: bool, today: str) -> str:
    if not complete:
        return "  "
    return current if _DATE.match(current.strip()) else f" {today} "


def _in_active(text: str, edit: Callable[[str], str]) -> str:
    """`edit` applied to the current milestone only: what follows the last `</details>`."""
    cut = text.rfind(_DETAILS_END)
    start = 0 if cut < 0 else cut + len(_DETAILS_END)
    return text[:start] + edit(text[start:])


def _in_progress_section(text: str, edit: Callable[[str], str]) -> str:
    """`edit` applied to the current milestone's `## Progress` section, or to all of it."""

    def scoped(active: str) -> str:
        head = re.search(r"^##[ \t]+Progress\b", active, re.M | re.I)
        if head is None:
            return edit(active)
        after = re.search(r"^#{1,2}[ \t]", active[head.end() :], re.M)
        end = len(active) if after is None else head.end() + after.start()
        return active[: head.start()] + edit(active[head.start() : end]) + active[end:]

    return _in_active(text, scoped)


def _plan_count(text: str, src: str, value: str, *, bold_colon_only: bool = False) -> str:
    """The phase's `**Plans**: N plans` line set to `value` (text after an old count kept)."""
    lines = text.splitlines(keepends=True)
    heading = re.compile(rf"^#{{2,4}}\s*Phase\s+{src}{_TAG}(?=[:\s])", re.I)
    labels = r"\*\*Plans:\*\*" if bold_colon_only else r"\*\*Plans\*\*:|\*\*Plans:\*\*|^Plans:"
    label = re.compile(rf"^(.*?(?:{labels})[ \t]*)(.*?)(\r?\n?)$", re.I | re.S)
    old = re.compile(r"^(\d+\s*/\s*\d+\s+plans(?:\s+(?:complete|executed))?|\d+\s+plans)(.*)$")
    start = next((i for i, line in enumerate(lines) if heading.match(line)), None)
    if start is None:
        return text
    for i in range(start + 1, len(lines)):
        if re.match(r"#{1,4}\s", lines[i]):
            break
        found = label.match(lines[i])
        if found is None:
            continue
        rest = found.group(2)
        counted = old.match(rest) if not bold_colon_only else None
        suffix = counted.group(2) if counted else ""
        lines[i] = f"{found.group(1)}{value}{suffix}{found.group(3)}"
        break
    return "".join(lines)


def _check_phase(text: str, src: str, today: str, *, tight: bool) -> str:
    """The first unchecked `- [ ] … Phase N: …` line ticked, `(completed <today>)` appended
    (`tight`: only whitespace or `**` between the box and `Phase`, as `phase complete`)."""
    gap = r"\s*(?:\*\*)?\s*" if tight else r"\s*.*"
    box = re.compile(rf"^([ \t]*-\s*\[) (\]{gap}Phase\s+{src}{_TAG}[:\s].*?)(\r?\n?)$", re.I)
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        found = box.match(line)
        if found is not None:
            lines[i] = f"{found.group(1)}x{found.group(2)} (completed {today}){found.group(3)}"
            break
    return "".join(lines)


def _check_plans(text: str, summary_names: Sequence[str]) -> str:
    """Each plan with a SUMMARY ticked where the ROADMAP lists it: the first unticked line
    naming it (`- [ ] 01-02-PLAN.md`, `- [ ] **01-02**`)."""
    lines = text.splitlines(keepends=True)
    for name in summary_names:
        plan_id = name.replace("-SUMMARY.md", "", 1).replace("SUMMARY.md", "", 1)
        if not plan_id:
            continue
        box = re.compile(rf"^([ \t]*-\s*\[) (\]\s*(?:\*\*)?{re.escape(plan_id)})", re.I)
        for i, line in enumerate(lines):
            if plan_id.lower() in line.lower() and (found := box.match(line)):
                lines[i] = f"{found.group(1)}x{found.group(2)}{line[found.end() :]}"
                break
    return "".join(lines)


# ---------------------------------------------------------------- tables


def _row_matcher(src: str) -> Callable[[dict[str, str]], bool]:
    cell = re.compile(rf"^{src}\.?(?:\s|$)", re.I)
    return lambda row: bool(cell.match(row.get("Phase", "").strip()))


def _cells(line: str) -> list[tuple[int, int]]:
    """The (start, end) of each cell of a `| a | b |` row (escaped `\\|` kept in a cell)."""
    first = line.index("|")
    bounds = [first]
    i = first + 1
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] == "|":
            bounds.append(i)
        i += 1
    if line[bounds[-1] + 1 :].strip():  # a row without its closing pipe
        bounds.append(len(line.rstrip("\r\n")))
    return [(a + 1, b) for a, b in itertools.pairwise(bounds)]


def _set_cell(
    text: str, match: Callable[[dict[str, str]], bool], column: str, value: Callable[[str], str]
) -> str:
    """The first table's first row `match` accepts, its cell of `column` set to `value(cur)`."""
    lines = text.splitlines(keepends=True)
    head = next((i for i, line in enumerate(lines) if _is_row(line)), None)
    if head is None or head + 1 >= len(lines) or not _is_delimiter(lines[head + 1]):
        return text
    columns = [lines[head][a:b].strip() for a, b in _cells(lines[head])]
    if column not in columns or len(_cells(lines[head + 1])) != len(columns):
        return text
    at = columns.index(column)
    for i in range(head + 2, len(lines)):
        if not _is_row(lines[i]):
            break
        spans = _cells(lines[i])
        row = {c: lines[i][a:b].strip() for c, (a, b) in zip(columns, spans, strict=False)}
        if at < len(spans) and match(row):
            a, b = spans[at]
            new = value(lines[i][a:b].strip())
            if new != lines[i][a:b].strip():
                lines[i] = lines[i][:a] + new + lines[i][b:]
            break
    return "".join(lines)


def _is_row(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("|") and stripped.find("|", 1) != -1


def _is_delimiter(line: str) -> bool:
    if not _is_row(line):
        return False
    return all(re.fullmatch(r"\s*:?-+:?\s*", line[a:b]) for a, b in _cells(line))


# ---------------------------------------------------------------- REQUIREMENTS.md


def requirement_ids(section: str | None) -> list[str]:
    """The requirement ids the phase's `**Requirements**:` line cites (`phase complete`)."""
    if not section:
        return []
    found = re.search(r"\*\*Requirements:?\*\*[^\S\n]*:?[^\S\n]*([^\n]+)", section, re.I)
    if found is None:
        return []
    words = re.split(r"[,\s]+", found.group(1).replace("[", "").replace("]", ""))
    return [w for w in words if w and _REQ_ID.match(w)]


def requirements_complete(requirements: str, ids: Sequence[str]) -> str:
    """REQUIREMENTS.md after `phase complete`: each cited requirement's checkbox ticked and its
    Traceability row's Status `Complete` when it was Pending, In Progress or Gaps Found (a row
    that says otherwise, Deferred, …, keeps its checkbox as it was)."""
    for req in ids:
        box = re.compile(rf"^([ \t]*-\s*\[) (\]\s*\*\*{re.escape(req)}\*\*)", re.I)
        lines = requirements.splitlines(keepends=True)
        ticked = [i for i, line in enumerate(lines) if box.match(line)]
        row_state = _traceability_status(requirements, req)
        if row_state is not None and not _OPEN_REQ.fullmatch(row_state):
            continue  # the row says deferred (or done): the two places must not disagree
        for i in ticked:
            lines[i] = box.sub(r"\1x\2", lines[i], count=1)
        requirements = _in_traceability("".join(lines), _closer(req))
    return requirements


def _closer(req: str) -> Callable[[str], str]:
    """The edit of a Traceability table that marks `req`'s (open) row Complete."""
    row = _first_cell(req)
    return lambda table: _set_cell(table, row, "Status", lambda _: " Complete ")


def _first_cell(req: str) -> Callable[[dict[str, str]], bool]:
    return lambda row: next(iter(row.values()), "").strip().lower() == req.lower()


def _in_traceability(text: str, edit: Callable[[str], str]) -> str:
    head = re.search(r"^#{1,6}\s+Traceability\b", text, re.M | re.I)
    start = 0 if head is None else head.start()
    return text[:start] + edit(text[start:])


def _traceability_status(text: str, req: str) -> str | None:
    seen: list[str] = []

    def probe(current: str) -> str:
        seen.append(current)
        return current

    _in_traceability(text, lambda t: _set_cell(t, _first_cell(req), "Status", probe))
    return seen[0] if seen else None


# ---------------------------------------------------------------- STATE.md


class NextPhase(NamedTuple):
    """The phase after a complete one (None: it was the last) and its name."""

    number: str | None
    name: str | None


def state_complete(state: str, number: str, after: NextPhase, *, today: str) -> str:
    """STATE.md after `phase complete N`: the current phase moved to the next one (`3 of 5
    (Name)` keeps its shape), its Status, Plan and Last activity, in body and frontmatter."""
    front, body = _split_frontmatter(state)
    phase = after.number or number
    current = _field(body, "Current Phase") or _field(body, "Phase")
    value = phase
    if current is not None:
        total = re.search(r"of\s+(\d+)", current)
        named = re.search(r"\(([^)\n]{1,200})\)", current)
        shown = after.name or (named.group(1) if named else None)
        if total:
            value = f"{phase} of {total.group(1)}" + (f" ({shown})" if shown else "")
        elif after.name:
            value = f"{phase} — {after.name}"
    status = "Ready to plan" if after.number else "All phases complete"
    said = f"Phase {number} complete" + (
        f", transitioned to Phase {after.number}" if after.number else ""
    )
    body = _set_field(body, ("Current Phase", "Phase"), value)
    if after.name:
        body = _set_field(body, ("Current Phase Name",), after.name)
    body = _set_field(body, ("Status",), status)
    body = _set_field(body, ("Current Plan", "Plan"), "Not started")
    if re.search(r"^Last activity:", body, re.M):
        body = _set_field(body, ("Last activity",), f"{today} — {said}")
    else:
        body = _set_field(body, ("Last Activity",), today)
    body = _set_field(body, ("Last Activity Description",), said)
    if front is None:
        return body
    keys = {
        "current_phase": phase,
        "status": "planning" if after.number else "completed",
        "current_plan": "Not started",
        "last_activity": today,
        "last_activity_desc": said,
    }
    if after.name:
        keys["current_phase_name"] = after.name
    return f"---\n{_set_keys(front, keys)}---\n{body}"


def _split_frontmatter(text: str) -> tuple[str | None, str]:
    """(the frontmatter's lines, the rest), or (None, text) when it has none."""
    if not text.startswith("---\n"):
        return None, text
    end = text.find("\n---", 3)
    if end < 0:
        return None, text
    close = text.find("\n", end + 4)
    rest = "" if close < 0 else text[close + 1 :]
    return text[4 : end + 1], rest


def _field_pattern(name: str) -> re.Pattern[str]:
    """`**Name:** value` or a line `Name: value` (the reference's `stateExtractField`)."""
    escaped = re.escape(name)
    return re.compile(rf"^(.*?\*\*{escaped}:\*\*[ \t]*|{escaped}:[ \t]*)(.*)$", re.I)


def _field(body: str, name: str) -> str | None:
    pattern = _field_pattern(name)
    for line in body.splitlines():
        found = pattern.match(line)
        if found and (found.group(2).strip() or "**" in found.group(1)):
            return found.group(2).strip()
    return None


def _set_field(body: str, names: Sequence[str], value: str) -> str:
    """The first of `names` that the body has, set to `value` (the first line only)."""
    lines = body.splitlines(keepends=True)
    for name in names:
        pattern = _field_pattern(name)
        for i, line in enumerate(lines):
            content = line.rstrip("\r\n")
            found = pattern.match(content)
            if found is not None:
                lines[i] = found.group(1) + value + line[len(content) :]
                return "".join(lines)
    return body


def _set_keys(front: str, keys: dict[str, str]) -> str:
    """Top-level `key: value` lines of a frontmatter set (quoted), missing ones added."""
    lines = front.splitlines(keepends=True)
    left = dict(keys)
    for i, line in enumerate(lines):
        found = re.match(r"^([A-Za-z_][\w-]*):(.*)$", line.rstrip("\r\n"))
        if found and found.group(1) in left:
            lines[i] = f"{found.group(1)}: {_yaml_scalar(left.pop(found.group(1)))}\n"
    lines += [f"{key}: {_yaml_scalar(value)}\n" for key, value in left.items()]
    return "".join(lines)


def _yaml_scalar(value: str) -> str:
    if re.fullmatch(r"[A-Za-z][\w .-]*", value) and value.lower() not in ("yes", "no", "null"):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
