"""PLAN.md: YAML frontmatter plus an XML-ish body, parsed into `Plan` and `Task` values.

The body is not XML. Task text is markdown that may hold `<`, `&`, code fences and arbitrary
tags, so instead of an XML parser a small scanner walks the *top level* of each region: it finds
an opening tag, jumps to its matching close and carries on after it, so whatever sits inside an
element (code, prose, nested tags) is kept verbatim and never mistaken for structure. Code
fences, inline code spans and HTML comments are blanked out of the copy the scanner looks at,
which is why a `<task>` written inside backticks is text, not a task.
"""

from __future__ import annotations

import bisect
import difflib
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple, cast, get_args

import yaml
from pydantic import BaseModel, ConfigDict, computed_field

from looprail.errors import PlanError
from looprail.layout import plan_id_from_filename as plan_id_from_filename  # its home: layout
from looprail.yamlcache import cached
from looprail.yamlload import NoAliasCSafeLoader, NoAliasSafeLoader, c_path_ok

TaskType = Literal[
    "auto",
    "tdd",
    "tracer",
    "checkpoint:human-verify",
    "checkpoint:decision",
    "checkpoint:human-action",
    "checkpoint:tdd-review",
]
# `advisory`: the reference's tdd-review checkpoint (auto-mode approves it; it never blocks).
TaskGate = Literal["blocking", "blocking-human", "advisory"]
PlanType = Literal["execute", "tdd"]  # the types the reference's templates write

TASK_TYPES: tuple[str, ...] = get_args(TaskType)
TASK_GATES: tuple[str, ...] = get_args(TaskGate)
PLAN_TYPES: tuple[str, ...] = get_args(PlanType)

# Child elements of <task> that get a typed field; any other child lands in `Task.extra`.
_TASK_CHILDREN = ("name", "files", "read_first", "action", "verify", "acceptance_criteria", "done")
# Body sections of a plan that are kept (raw text, outer blank lines and indentation removed).
_SECTIONS = (
    "objective",
    "execution_context",
    "context",
    "verification",
    "success_criteria",
    "output",
)
# Other body sections of the reference's plan vocabulary (its planner's and templates'), kept
# as text in `Plan.sections` and handed to the executor's prompt with the plan.
_OTHER_SECTIONS = (
    "interfaces",
    "threat_model",
    "review_response",
    "feature",
    "user_setup",
    "must_haves",
)
# Frontmatter keys with a typed field on `Plan`; the rest are kept in `Plan.extra`.
_KNOWN_KEYS = (
    "phase",
    "plan",
    "type",
    "wave",
    "depends_on",
    "files_modified",
    "autonomous",
    "requirements",
    "user_setup",
    "must_haves",
)
# Keys GSD writes that looprail does not interpret (the reference's planner, templates and
# real plans): kept in `Plan.extra` without a warning. `status: superseded` drops the plan.
_GSD_EXTRA_KEYS = (
    "gap_closure",
    "execution_strategy",
    "domain",
    "name",
    "title",
    "tags",
    "subsystem",
    "threat_ids",
    "checkpoint_reason",
    "status",
    "objective",
)
# The keys the plan's waves and checkpoints are read from: a YAML error inside one of them
# refuses the plan (running it with the value dropped would lose a dependency); an error
# anywhere else only loses that key, with a warning.
_SCHEDULING_KEYS = ("phase", "plan", "type", "wave", "depends_on", "files_modified", "autonomous")


def unknown_key_warnings(plan: Plan, where: str) -> list[str]:
    """A warning per frontmatter key looprail does not know, with a did-you-mean for a near
    miss: `depend_on:` is silently ignored otherwise and the plan lands in the wrong wave."""
    out: list[str] = []
    for key in plan.extra:
        if key in _GSD_EXTRA_KEYS:
            continue

        close = difflib.get_close_matches(key, _KNOWN_KEYS, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(_KNOWN_KEYS)}"
        out.append(f"{where}: frontmatter key {key!r} is unknown and ignored ({hint})")
    return out


class Task(BaseModel):
    """One `<task>` of a plan, in document order."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    id: str  # "<plan-id>/T<index>", stable while the plan's task order is
    index: int  # 1-based
    line: int  # where the <task> tag opens in the file
    type: TaskType
    gate: TaskGate | None = None
    tdd: bool = False
    tracker_id: str | None = None
    attributes: dict[str, str] = {}  # every attribute as written, known or not
    name: str | None = None
    files: list[str] = []
    read_first: list[str] = []
    action: str | None = None
    verify: str | None = None
    acceptance_criteria: str | None = None
    done: str | None = None
    extra: dict[str, str] = {}  # other children: <what-built>, <resume-signal>, <options>, ...

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorators over @property
    @property
    def is_checkpoint(self) -> bool:
        return self.type.startswith("checkpoint:")


class Plan(BaseModel):
    """One `{phase}-{plan}-PLAN.md`. `wave` is the *declared* wave; the effective one comes from
    `looprail.plans.waves.compute_waves`. `depends_on` holds plan ids of the phase once the plan
    was loaded through `load_phase` (as written when parsed on its own)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    id: str
    path: Path
    phase: str | None = None  # frontmatter `phase` as written (GSD writes the folder name)
    plan: str | None = None
    type: str = "execute"  # execute | tdd; anything else is read (warned) as execute
    wave: int | None = None
    depends_on: list[str] = []
    # entries naming no plan of this phase (a plan of another phase, or none), as written;
    # `unmet` says which of them are not finished (the run halts this plan there)
    outside_depends_on: list[str] = []
    unmet: list[str] = []
    files_modified: list[str] = []
    autonomous: bool = True
    requirements: list[str] = []
    user_setup: Any = None
    must_haves: Any = None  # as written (a mapping of truths/artifacts/key_links, or raw text)
    extra: dict[str, Any] = {}  # frontmatter keys looprail does not interpret (GSD has more)
    sections: dict[str, str] = {}  # other known sections: <interfaces>, <threat_model>, ...
    notes: list[str] = []  # what reading the file had to work around ("file:line: ...")
    objective: str | None = None
    execution_context: str | None = None
    context: str | None = None
    tasks: list[Task] = []
    verification: str | None = None
    success_criteria: str | None = None
    output: str | None = None
    has_summary: bool = False
    summary_path: Path | None = None
    halted: bool = False  # its SUMMARY says `status: halted`: a designed stop, not done

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorators over @property
    @property
    def task_count(self) -> int:
        return len(self.tasks)

    @property
    def has_checkpoints(self) -> bool:
        return any(task.is_checkpoint for task in self.tasks)

    @property
    def objective_line(self) -> str | None:
        """The first non-blank line of `<objective>` (what an index shows), else a frontmatter
        `objective:` (the reference's fallback)."""
        for line in (self.objective or "").splitlines():
            if line.strip():
                return line.strip()
        fallback = self.extra.get("objective")
        return str(fallback) if isinstance(fallback, (str, int, float)) and fallback else None


def read_plan(path: str | Path, *, display: str | None = None) -> Plan:
    """Read and parse one PLAN.md. `display` is how errors name the file (default: the path)."""
    path = Path(path)
    where = display or str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PlanError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > MAX_PLAN_BYTES:
        raise PlanError(f"{where}: larger than {MAX_PLAN_BYTES // (1024 * 1024)} MiB")
    key = (str(path), where, len(raw), hash(raw))
    cached = _PARSED.get(key)
    if cached is not None:
        return cached
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PlanError(f"{where}: not UTF-8 text") from None
    plan = parse_plan(text, path=path, display=where)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[key] = plan
    return plan


# Parsed plans by content: the loop re-reads a phase at every transition, and parsing YAML
# dominates that; a `Plan` is frozen, so sharing one is safe. Keyed by the bytes read, never by
# mtime, so an edit is always seen.
_PARSED: dict[tuple[str, str, int, int], Plan] = {}
_PARSED_MAX = 4096
MAX_PLAN_BYTES = 8 * 1024 * 1024  # a plan is prose for an agent; past this it is an accident


def parse_plan(
    text: str, *, path: str | Path, plan_id: str | None = None, display: str | None = None
) -> Plan:
    """Parse PLAN.md text (pure). The plan id defaults to the file name without `-PLAN.md`."""
    path = Path(path)
    where = display or str(path)
    plan_id = plan_id or plan_id_from_filename(path.name) or path.stem
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    doc = _Doc(text, where)

    split = _split_frontmatter(doc)
    if split is None:
        fm_text, fm_first_line, body_start = _fenced_frontmatter(doc), 0, 0
    else:
        fm_text, fm_first_line, body_start = split
    data, key_lines, kept = _lenient_yaml(doc, fm_text, fm_first_line)
    fields = _frontmatter_fields(doc, data, key_lines, fm_first_line)
    for key, raw in kept.items():
        fields[key if key in ("must_haves", "user_setup") else "extra"] = (
            raw if key in ("must_haves", "user_setup") else {**fields["extra"], key: raw}
        )

    sections, task_elements, features = _scan_body(doc, body_start)
    tasks = [_make_task(doc, plan_id, i, element) for i, element in enumerate(task_elements, 1)]
    if not tasks:
        tasks = _implicit_tasks(doc, plan_id, body_start, features, sections)
    return Plan(id=plan_id, path=path, tasks=tasks, notes=doc.notes, **fields, **sections)


_MD_TASK = re.compile(r"^(#{2,6})[ \t]*(Task[ \t]*\d+\b.*)$", re.M | re.I)


def _implicit_tasks(
    doc: _Doc, plan_id: str, body_start: int, features: list[_Element], sections: dict[str, Any]
) -> list[Task]:
    """A plan without `<task>` elements still has work in it: each TDD `<feature>` (the
    reference's TDD plan format) is a `tdd` task, else each `## Task N` heading (what the
    reference counts) is a task, else the whole body is one task. A plan must never run as
    zero tasks: the run would write its SUMMARY without doing anything."""
    if features:
        out = []
        for i, element in enumerate(features, 1):
            children = _children(doc, element)
            parts = [
                f"{title}:\n{children[name]}"
                for title, name in (("Behavior", "behavior"), ("Implementation", "implementation"))
                if children.get(name)
            ]
            out.append(
                Task(
                    id=f"{plan_id}/T{i}",
                    index=i,
                    line=doc.line(element.start),
                    type="tdd",
                    tdd=True,
                    name=children.get("name"),
                    files=split_paths(children.get("files", "")),
                    action="\n\n".join(parts) or None,
                    verify=children.get("verify") or sections.get("verification"),
                    done=children.get("done"),
                    extra={k: v for k, v in children.items() if k not in ("name", "files")},
                )
            )
        return out
    body = doc.text[body_start:]
    headings = [m for m in _MD_TASK.finditer(doc.scan, body_start) if m.group(0).strip()]
    if headings:
        out = []
        for i, match in enumerate(headings, 1):
            level = len(match.group(1))
            end_match = re.compile(rf"^#{{1,{level}}}[ \t]", re.M).search(doc.scan, match.end())
            end = end_match.start() if end_match else len(doc.text)
            out.append(
                Task(
                    id=f"{plan_id}/T{i}",
                    index=i,
                    line=doc.line(match.start()),
                    type="auto",
                    name=doc.text[match.start(2) : match.end(2)].strip(),
                    action=_clean(doc.text[match.end() : end]) or None,
                )
            )
        return out
    if not body.strip() or any(k in sections for k in _SECTIONS):
        return []  # an XML-style plan without tasks (as the team's plans have always read)
    doc.notes.append(
        f"{doc.where}: no <task> elements and no '## Task N' headings: the whole plan is one task"
    )
    title = re.search(r"^#[ \t]+(.+)$", body, re.M)
    return [
        Task(
            id=f"{plan_id}/T1",
            index=1,
            line=doc.line(body_start) if body_start else 1,
            type="auto",
            name=title.group(1).strip() if title else None,
            action=_clean(body),
        )
    ]


def _children(doc: _Doc, element: _Element) -> dict[str, str]:
    out: dict[str, str] = {}
    for child in _elements(doc, element.inner_start, element.inner_end, (), "inside <feature>"):
        out.setdefault(child.name, _clean(doc.text[child.inner_start : child.inner_end]))
    return out


# --- document and scanner -------------------------------------------------------------------


class _Doc:
    """The plan text, a copy with code and comments blanked out for tag search, and line lookup."""

    def __init__(self, text: str, where: str):
        self.text = text
        self.where = where
        self.scan = _mask_code(text)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.notes: list[str] = []

    def note(self, offset: int | None, message: str) -> None:
        where = self.where if offset is None else f"{self.where}:{self.line(offset)}"
        self.notes.append(f"{where}: {message}")

    def remask_from(self, offset: int) -> None:
        """Mask the text after `offset` on its own: a code fence left open before it (inside
        an element already read) must not swallow the structure after it."""
        self.scan = self.scan[:offset] + _mask_code(self.text[offset:])

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self._line_starts, offset)

    def fail_line(self, line: int, reason: str) -> PlanError:
        return PlanError(f"{self.where}:{line}: {reason}")

    def fail(self, offset: int | None, reason: str) -> PlanError:
        if offset is None:
            return PlanError(f"{self.where}: {reason}")
        return PlanError(f"{self.where}:{self.line(offset)}: {reason}")


class _Element:
    """A scanned `<name attrs>inner</name>`: offsets into the document."""

    def __init__(self, name: str, attrs: str, start: int, inner_start: int, inner_end: int):
        self.name = name
        self.attrs = attrs
        self.start = start
        self.inner_start = inner_start
        self.inner_end = inner_end


_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.M)
_BACKTICKS = re.compile(r"`+")
_OPEN_TAG = re.compile(r"<([A-Za-z][\w:-]*)(\s[^<>]*)?>")


def _mask_code(text: str) -> str:
    """Same length and line structure as `text`, with fenced blocks, inline code spans and HTML
    comments replaced by spaces. An unterminated fence is left as text."""
    out = list(text)
    pos = 0
    # fence char → shortest fence length already known to have no closing line after it (a
    # longer fence later has none either): each unclosed fence would otherwise rescan the rest.
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
    """`<!-- … -->` (across lines) blanked, in one pass: an unclosed `<!--` ends the search
    (a regex would rescan the rest of the text from every later `<!--`)."""
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
    same line. Linear: each run's partner is found from a precomputed "next run of this length"
    table, not by rescanning the line (a backtracking regex is quadratic in the runs)."""
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


def _elements(
    doc: _Doc, start: int, end: int, required: tuple[str, ...], context: str
) -> Iterator[_Element]:
    """Top-level elements between `start` and `end`. An element named in `required` must be
    closed (else PlanError); any other unclosed tag is treated as text."""
    pos = start
    # tag name → offset after which it has no closing tag: a thousand unclosed `<b>` must not
    # each rescan the rest of the document.
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
            yield _Element(name, match.group(2) or "", match.start(), match.end(), close_at)
            pos = raw.end()
            continue
        if closing is None:
            pos = match.end()
            continue
        yield _Element(name, match.group(2) or "", match.start(), match.end(), closing.start())
        pos = closing.end()


def _split_frontmatter(doc: _Doc) -> tuple[str, int, int] | None:
    """(frontmatter text, its first line number, offset where the body starts), or None for a
    plan without frontmatter (read with defaults, as the reference reads it). A frontmatter
    opened and never closed is refused: its declared dependencies would be lost."""
    text = doc.text
    first_end = text.find("\n")
    first = text if first_end == -1 else text[:first_end]
    if first.rstrip() != "---":
        return None
    closing = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.M).search(text, first_end + 1)
    if first_end == -1 or closing is None:
        raise doc.fail(0, "unterminated frontmatter: no closing '---' line")
    return text[first_end + 1 : closing.start()], 2, closing.end()


_FENCED_YAML = re.compile(r"^```[ \t]*ya?ml[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S | re.I)
_FM_KEY = re.compile(r"^(?:phase|plan|wave|depends_on|files_modified|autonomous|type):", re.M)


def _fenced_frontmatter(doc: _Doc) -> str:
    """No frontmatter: the first ```yaml block that declares plan keys (some planners write
    the frontmatter there, under a heading) is read as the frontmatter, with a warning; the
    reference reads such a plan with defaults. "" when there is none (defaults, warned)."""
    match = _FENCED_YAML.search(doc.text)
    if match is None or not _FM_KEY.search(match.group(1)):
        doc.note(0, "no YAML frontmatter: read with defaults (no depends_on, autonomous)")
        return ""
    first_line = doc.line(match.start(1))
    doc.note(
        match.start(),
        "the frontmatter is in a ```yaml block, not between '---' lines at the top; read "
        "from there (the reference ignores it and reads defaults: move it to the top)",
    )
    # Line numbers of YAML errors count from the file's first line (see _lenient_yaml).
    return "\n" * (first_line - 1) + match.group(1)


def _scan_body(doc: _Doc, body_start: int) -> tuple[dict[str, Any], list[_Element], list[_Element]]:
    sections: dict[str, Any] = {}  # `Plan` keyword arguments: section name -> its text
    other: dict[str, str] = {}
    tasks: list[_Element] = []
    features: list[_Element] = []
    wanted = (*_SECTIONS, *_OTHER_SECTIONS, "tasks", "task")
    for element in _elements(doc, body_start, len(doc.text), wanted, "in the plan body"):
        if element.name == "tasks":
            inside = "inside <tasks>"
            for child in _elements(doc, element.inner_start, element.inner_end, ("task",), inside):
                if child.name == "task":
                    tasks.append(child)
                elif child.name == "feature":
                    features.append(child)
        elif element.name == "task":  # tolerated: tasks written without a <tasks> wrapper
            tasks.append(element)
        elif element.name == "feature":
            features.append(element)
        elif element.name in _SECTIONS or element.name in _OTHER_SECTIONS:
            into = sections if element.name in _SECTIONS else other
            text = _clean(doc.text[element.inner_start : element.inner_end])
            if element.name in into:
                doc.note(element.start, f"a second <{element.name}> section: appended")
                text = f"{into[element.name]}\n\n{text}"
            into[element.name] = text
    if "context" in sections and "interfaces" not in other:
        # The reference's planner puts <interfaces> inside <context>.
        match = re.search(r"<interfaces>(.*?)</interfaces>", sections["context"], re.S)
        if match:
            other["interfaces"] = _clean(match.group(1))
    sections["sections"] = other
    return sections, tasks, features


# --- tasks ----------------------------------------------------------------------------------

_ATTR = re.compile(r"""([A-Za-z_][\w:.-]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")


def _parse_attributes(doc: _Doc, element: _Element) -> dict[str, str]:
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


def _make_task(doc: _Doc, plan_id: str, index: int, element: _Element) -> Task:
    attrs = _parse_attributes(doc, element)
    task_type = attrs.get("type", "auto")
    if task_type not in TASK_TYPES:
        # Read, not refused: an unknown checkpoint still stops for a person (the safe side).
        read_as = "checkpoint:human-verify" if task_type.startswith("checkpoint") else "auto"
        doc.note(
            element.start,
            f"<task> has unknown type {task_type!r}; run as {read_as} "
            f"(known: {', '.join(TASK_TYPES)})",
        )
        task_type = read_as
    gate = attrs.get("gate")
    if gate is not None and gate not in TASK_GATES:
        doc.note(
            element.start,
            f"<task> has unknown gate {gate!r}; read as blocking (known: {', '.join(TASK_GATES)})",
        )
        gate = "blocking"
    tdd_raw = attrs.get("tdd")
    if tdd_raw is not None and tdd_raw.lower() not in ("true", "false", ""):
        doc.note(element.start, f"<task> attribute tdd must be true or false, got {tdd_raw!r}")
        tdd_raw = "false"

    fields: dict[str, Any] = {}
    extra: dict[str, str] = {}
    inside = f"inside the <task> at line {doc.line(element.start)}"
    for child in _elements(doc, element.inner_start, element.inner_end, _TASK_CHILDREN, inside):
        value = _clean(doc.text[child.inner_start : child.inner_end])
        if child.name in fields or child.name in extra:
            doc.note(child.start, f"<task> has a second <{child.name}>: the first is used")
            continue
        if child.name in ("files", "read_first"):
            fields[child.name] = split_paths(value)
        elif child.name in _TASK_CHILDREN:
            fields[child.name] = value
        else:
            extra[child.name] = value

    return Task(
        id=f"{plan_id}/T{index}",
        index=index,
        line=doc.line(element.start),
        type=cast(TaskType, task_type),  # checked against TASK_TYPES above
        gate=cast("TaskGate | None", gate),  # checked against TASK_GATES above
        tdd=tdd_raw is not None and tdd_raw.lower() in ("true", ""),
        tracker_id=attrs.get("tracker-id"),  # (an `id=` is kept in `attributes`)
        attributes=attrs,
        extra=extra,
        **fields,
    )


class Fragment(NamedTuple):
    """One element inside a task child's text (`child_elements`)."""

    name: str
    attributes: dict[str, str]
    text: str  # cleaned like a task child (`_clean`)


def child_elements(text: str, where: str) -> list[Fragment]:
    """The top-level elements of a task child's text, read by the plan's own scanner: a
    checkpoint's `<options>` holds `<option id="…">` elements, each with `<name>`, `<pros>` and
    `<cons>`. A malformed attribute list reads as none (the text is still shown)."""
    doc = _Doc(text, where)
    out = []
    for element in _elements(doc, 0, len(text), (), where):
        try:
            attrs = _parse_attributes(doc, element)
        except PlanError:
            attrs = {}
        inner = _clean(text[element.inner_start : element.inner_end])
        out.append(Fragment(element.name, attrs, inner))
    return out


def _clean(raw: str) -> str:
    """Element text without the blank lines around it and without its common indentation. Text
    that starts on the tag's own line is kept as is and the following lines are dedented."""
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


def split_paths(text: str) -> list[str]:
    """A `<files>`/`<read_first>` list: one path per line or comma-separated, with `- ` bullets
    removed. A backticked span is the path (`- \\`src/a.py\\` (the handler)` → `src/a.py`)."""
    paths: list[str] = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line).strip()
        if not line:
            continue
        spans = re.findall(r"`([^`]+)`", line)
        items = spans if spans else line.split(",")
        for item in items:
            item = item.strip().strip("`").strip()
            if item and item not in paths:
                paths.append(item)
    return paths


# --- frontmatter ----------------------------------------------------------------------------


class _PlanRules:
    """What PLAN.md frontmatter adds to the frontmatter loader (`looprail.yamlload`, aliases
    refused): duplicate keys are rejected, and zero-padded numbers stay strings (plan and phase
    ids are written `01`, and YAML 1.1 would read that as the octal integer 1)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = self.construct_scalar(key_node)  # type: ignore[attr-defined]
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _PlanYamlLoader(_PlanRules, NoAliasSafeLoader):
    """The pure-Python PLAN.md loader: its errors are the ones users read."""

    # PyYAML reads this as a class attribute; its stubs declare it on instances.
    yaml_implicit_resolvers: ClassVar[dict[Any, list[Any]]] = {  # type: ignore[misc]
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:int"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


_PlanYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)\Z"), list("-+0123456789")
)
# The same rules on libyaml's parser (same composer, constructor and resolvers), when PyYAML
# was built with it.
_PlanYamlCLoader: type | None = (
    None
    if NoAliasCSafeLoader is None
    else type(
        "_PlanYamlCLoader",
        (_PlanRules, NoAliasCSafeLoader),
        {"yaml_implicit_resolvers": _PlanYamlLoader.yaml_implicit_resolvers},
    )
)


class _YamlSyntaxError(PlanError):
    """A YAML syntax error (scanner or parser): the only kind `_lenient_yaml` works around."""


def _cached_yaml(text: str, first_line: int, where: str) -> tuple[Any, dict[str, int]]:
    """`_load_yaml`, through the frontmatter cache (errors are never cached)."""

    def parse(_: str) -> dict[str, Any]:
        data, key_lines = _load_yaml(text, first_line, where)
        return {"data": data, "lines": key_lines}

    value = cached("plan", __file__, f"{first_line}\n{text}", parse)
    return value["data"], value["lines"]


def _compose(loader_class: type, text: str, first_line: int) -> tuple[Any, dict[str, int]]:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    key_lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key_lines[key_node.value] = first_line + key_node.start_mark.line
    return data, key_lines


def _load_yaml(text: str, first_line: int, where: str) -> tuple[Any, dict[str, int]]:
    if _PlanYamlCLoader is not None and c_path_ok(text):
        try:
            return _compose(_PlanYamlCLoader, text, first_line)
        except Exception:  # the pure loader below says what is wrong, in its own words
            pass
    try:
        loader = _PlanYamlLoader(text)  # the reader rejects control characters here
    except yaml.YAMLError as exc:
        raise PlanError(
            f"{where}: invalid YAML frontmatter: {' '.join(str(exc).split())}"
        ) from None
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join((exc.problem or exc.context or "invalid YAML").split())
        line = f":{first_line + mark.line}" if mark is not None else ""
        # A syntax error may be worked around (`_lenient_yaml`); a refused alias, a tag or a
        # duplicate key never is.
        syntax = isinstance(exc, (yaml.scanner.ScannerError, yaml.parser.ParserError))
        error = _YamlSyntaxError if syntax else PlanError
        raise error(f"{where}{line}: invalid YAML frontmatter: {reason}") from None
    except yaml.YAMLError as exc:
        raise PlanError(f"{where}: invalid YAML frontmatter: {exc}") from None
    except RecursionError:
        raise PlanError(f"{where}: YAML frontmatter is nested too deeply") from None
    finally:
        loader.dispose()
    key_lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key_lines[key_node.value] = first_line + key_node.start_mark.line
    return data, key_lines


def _lenient_yaml(
    doc: _Doc, text: str, first_line: int
) -> tuple[Any, dict[str, int], dict[str, str]]:
    """The frontmatter parsed; on a YAML error inside a key looprail keeps only as written
    (`must_haves`, `user_setup`, an unknown key), that key's block is taken out, kept as raw
    text and warned about, and the rest is read. An error in a key the waves are read from
    (`_SCHEDULING_KEYS`) refuses the plan, naming the line."""
    kept: dict[str, str] = {}
    lines = text.split("\n")
    while True:
        try:
            data, key_lines = _cached_yaml("\n".join(lines), first_line, doc.where)
            return data, key_lines, kept
        except _YamlSyntaxError as exc:
            error = exc
        blocks = _top_level_blocks(lines)
        bad = _error_line(str(error), doc.where, first_line)
        around = [b for b in blocks if bad is not None and b[1] <= bad < b[2]]
        candidates = around + [b for b in blocks if b[0] in ("must_haves", "user_setup")]
        candidates += [b for b in blocks if b[0] not in _KNOWN_KEYS]
        for key, start, end in candidates:
            if key in _SCHEDULING_KEYS or key in kept:
                continue
            trial = lines[:start] + [""] * (end - start) + lines[end:]
            try:
                _cached_yaml("\n".join(trial), first_line, doc.where)
            except _YamlSyntaxError:
                if (key, start, end) not in around:
                    continue
            except PlanError:
                continue
            reason = str(error).split("invalid YAML frontmatter: ", 1)[-1]
            doc.notes.append(
                f"{doc.where}:{first_line + start}: {key}: invalid YAML ({reason}); kept as "
                "written, unread (looprail does not schedule on it)"
            )
            kept[key] = "\n".join(lines[start:end])
            lines = trial
            break
        else:
            raise error


def _top_level_blocks(lines: list[str]) -> list[tuple[str, int, int]]:
    """(key, first line, line after the last) of each top-level `key:` of a YAML mapping."""
    starts = [
        (m.group(1), i) for i, line in enumerate(lines) if (m := re.match(r"([\w-]+)\s*:", line))
    ]
    return [
        (key, start, starts[n + 1][1] if n + 1 < len(starts) else len(lines))
        for n, (key, start) in enumerate(starts)
    ]


def _error_line(message: str, where: str, first_line: int) -> int | None:
    """The 0-based frontmatter line of a `where:LINE: invalid YAML` error."""
    match = re.match(rf"{re.escape(where)}:(\d+):", message)
    return int(match.group(1)) - first_line if match else None


def _frontmatter_fields(
    doc: _Doc, data: Any, key_lines: dict[str, int], first_line: int
) -> dict[str, Any]:
    """The typed fields, read as leniently as the reference reads them: what it would read
    is read (a string `depends_on` is a one-item list, an unquoted `3` is "3"); a value that
    cannot mean anything is dropped with a warning naming file, line and field. Nothing here
    refuses the plan."""
    where = doc.where
    if data is None:
        data = {}
    if not isinstance(data, dict):
        # Not a plan's frontmatter at all (the reference would read defaults): refused.
        kind = type(data).__name__
        raise doc.fail_line(max(first_line, 1), f"frontmatter must be a YAML mapping, got a {kind}")

    def warn(key: str, reason: str) -> None:
        doc.notes.append(f"{where}:{key_lines.get(key, max(first_line, 1))}: {key}: {reason}")

    def text_or_none(key: str) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            warn(key, f"must be a string, got {_describe(value)}; ignored")
            return None
        return str(value)

    def string_list(key: str, example: str, *aliases: str) -> list[str]:
        value = next((data[k] for k in (key, *aliases) if data.get(k) is not None), None)
        if value is None:
            return []
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            value = [value]  # the reference reads `depends_on: 01-01` as ["01-01"]
        # A dependency that cannot be read would be lost: refused (other lists: warned).
        strict = key == "depends_on"
        if not isinstance(value, list):
            reason = f"must be a list of strings such as {example}, got {_describe(value)}"
            if strict:
                raise doc.fail_line(key_lines.get(key, max(first_line, 1)), f"{key}: {reason}")
            warn(key, reason)
            return []
        out: list[str] = []
        for i, item in enumerate(value):
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                item = str(item)
            if not isinstance(item, str) or not item.strip():
                if strict:
                    raise doc.fail_line(
                        key_lines.get(key, max(first_line, 1)),
                        f"{key}: item {i} must be a non-empty string such as {example}, "
                        f"got {_describe(item)}",
                    )
                warn(
                    key,
                    f"item {i} must be a non-empty string such as {example}, got "
                    f"{_describe(item)}; ignored",
                )
                continue
            out.append(item.strip())
        return out

    fields: dict[str, Any] = {"phase": text_or_none("phase"), "plan": text_or_none("plan")}

    plan_type = data.get("type", "execute")
    if plan_type is None:
        plan_type = "execute"
    if plan_type not in PLAN_TYPES:
        warn(
            "type",
            f"unknown plan type {_describe(plan_type)}; run as execute "
            f"(known: {', '.join(PLAN_TYPES)})",
        )
        plan_type = str(plan_type)
    fields["type"] = plan_type

    wave = data.get("wave")
    if wave is not None:
        # As the reference's parseInt reads it: `wave: 2` and `wave: "02"` are 2.
        digits = None if isinstance(wave, bool) else re.match(r"\s*(\d+)", str(wave))
        if digits is None:
            warn("wave", f"must be a non-negative integer, got {_describe(wave)}; ignored")
            wave = None
        else:
            wave = int(digits.group(1))
    fields["wave"] = wave

    fields["depends_on"] = string_list("depends_on", '"01-01"')
    fields["files_modified"] = string_list("files_modified", '"src/app.py"', "files-modified")
    fields["requirements"] = string_list("requirements", '"AUTH-01"')

    autonomous = data.get("autonomous", True)
    if autonomous is None:
        autonomous = True
    if not isinstance(autonomous, bool):
        # The reference: autonomous only when it reads the word `true`.
        read = str(autonomous).strip().lower() == "true"
        warn("autonomous", f"must be true or false, got {_describe(autonomous)}; read as {read}")
        autonomous = read
    fields["autonomous"] = autonomous

    must_haves = data.get("must_haves")
    if must_haves is not None and not isinstance(must_haves, dict):
        warn(
            "must_haves",
            f"is {_describe(must_haves)}, not a mapping (truths, artifacts, "
            "key_links); kept as written",
        )
    fields["must_haves"] = must_haves
    fields["user_setup"] = data.get("user_setup")
    fields["extra"] = {str(k): v for k, v in data.items() if k not in _KNOWN_KEYS}
    return fields


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
    return f"a {type(value).__name__}"
