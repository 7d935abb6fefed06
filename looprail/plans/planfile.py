"""PLAN.md: YAML frontmatter (`plans/planyaml.py`) plus an XML-ish body (`plans/scan.py`),
parsed into `Plan` and `Task` values."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, computed_field

from looprail.errors import PlanError
from looprail.layout import plan_id_from_filename as plan_id_from_filename  # its home: layout
from looprail.plans.planyaml import (
    GSD_EXTRA_KEYS,
    KNOWN_KEYS,
    KeyReader,
    PlanFields,
    lenient_yaml,
    top_level_blocks,
)
from looprail.plans.readfirst import read_first_entries
from looprail.plans.scan import Doc, Element, clean, elements, parse_attributes

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


TASK_TYPES: tuple[str, ...] = get_args(TaskType)
TASK_GATES: tuple[str, ...] = get_args(TaskGate)

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


def unknown_key_warnings(plan: Plan, where: str) -> list[str]:
    """A warning per unknown frontmatter key, with a did-you-mean for a near miss (a silently
    ignored `depend_on:` would put the plan in the wrong wave)."""
    out: list[str] = []
    for key in plan.extra:
        if key in GSD_EXTRA_KEYS:
            continue
        close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(KNOWN_KEYS)}"
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
    read_first: list[str] = []  # the path part of each entry (plans/readfirst.py)
    # what an entry says beside its path (`01-CONTEXT.md (D-01, D-02)` → "(D-01, D-02)"),
    # passed on to the executor with the file; "" holds a note that names no file
    read_first_notes: dict[str, str] = {}
    action: str | None = None
    verify: str | None = None
    # each `<automated>` inside `<verify>`, as written (`plans/taskchecks.py` reads them)
    automated: list[str] = []
    acceptance_criteria: str | None = None
    done: str | None = None
    extra: dict[str, str] = {}  # other children: <what-built>, <resume-signal>, <options>, ...

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects decorators over @property
    @property
    def is_checkpoint(self) -> bool:
        return self.type.startswith("checkpoint:")


class Plan(BaseModel):
    """One `{phase}-{plan}-PLAN.md`. `wave` is the *declared* wave (`compute_waves` gives the
    effective one); `depends_on` holds plan ids of the phase once loaded through `load_phase`."""

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
    # each top-level frontmatter key's lines, byte for byte (what an agent is handed verbatim)
    written: dict[str, str] = {}
    extra: dict[str, object] = {}  # frontmatter keys looprail does not interpret (GSD has more)
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
        """The first non-blank line of `<objective>`, else a frontmatter `objective:`."""
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


# Parsed plans by content (the loop re-reads a phase at every transition; a `Plan` is frozen):
# keyed by the bytes read, never by mtime, so an edit is always seen.
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
    doc = Doc(text, where)

    split = _split_frontmatter(doc)
    if split is None:
        fm_text, fm_first_line, body_start = _fenced_frontmatter(doc), 0, 0
    else:
        fm_text, fm_first_line, body_start = split
    data, key_lines, kept = lenient_yaml(doc, fm_text, fm_first_line)
    fields = _frontmatter_fields(doc, data, key_lines, fm_first_line, kept)

    sections, other, task_elements, features = _scan_body(doc, body_start)
    tasks = [_make_task(doc, plan_id, i, element) for i, element in enumerate(task_elements, 1)]
    if not tasks:
        tasks = _implicit_tasks(doc, plan_id, body_start, features, sections)
    fm_lines = fm_text.split("\n")
    written = {k: "\n".join(fm_lines[a:b]).rstrip() for k, a, b in top_level_blocks(fm_lines)}
    return Plan(
        id=plan_id,
        path=path,
        tasks=tasks,
        notes=doc.notes,
        sections=other,
        objective=sections.get("objective"),
        execution_context=sections.get("execution_context"),
        context=sections.get("context"),
        verification=sections.get("verification"),
        success_criteria=sections.get("success_criteria"),
        output=sections.get("output"),
        written=written,
        **fields,
    )


_MD_TASK = re.compile(r"^(#{2,6})[ \t]*(Task[ \t]*\d+\b.*)$", re.M | re.I)


def _implicit_tasks(
    doc: Doc, plan_id: str, body_start: int, features: list[Element], sections: dict[str, str]
) -> list[Task]:
    """A plan without `<task>` elements: each TDD `<feature>` is a `tdd` task, else each
    `## Task N` heading is a task, else the whole body is one (never zero tasks: the run would
    write its SUMMARY without doing anything)."""
    if features:
        verification = sections.get("verification")
        return [_feature_task(doc, plan_id, i, e, verification) for i, e in enumerate(features, 1)]
    headings = [m for m in _MD_TASK.finditer(doc.scan, body_start) if m.group(0).strip()]
    if headings:
        return [_heading_task(doc, plan_id, i, match) for i, match in enumerate(headings, 1)]
    body = doc.text[body_start:]
    if not body.strip() or any(k in sections for k in _SECTIONS):
        return []  # an XML-style plan without tasks (as the team's plans have always read)
    doc.notes.append(
        f"{doc.where}: no <task> elements and no '## Task N' headings: the whole plan is one task"
    )
    title = re.search(r"^#[ \t]+(.+)$", body, re.M)
    line = doc.line(body_start) if body_start else 1
    name = title.group(1).strip() if title else None
    return [
        Task(id=f"{plan_id}/T1", index=1, line=line, type="auto", name=name, action=clean(body))
    ]


def _feature_task(
    doc: Doc, plan_id: str, index: int, element: Element, verification: str | None
) -> Task:
    children: dict[str, str] = {}
    automated: list[str] = []
    for child in elements(doc, element.inner_start, element.inner_end, (), "inside <feature>"):
        if child.name == "verify" and child.name not in children:
            automated = automated_commands(doc, child)
        children.setdefault(child.name, clean(doc.text[child.inner_start : child.inner_end]))
    parts = [
        f"{title}:\n{children[name]}"
        for title, name in (("Behavior", "behavior"), ("Implementation", "implementation"))
        if children.get(name)
    ]
    return Task(
        id=f"{plan_id}/T{index}",
        index=index,
        line=doc.line(element.start),
        type="tdd",
        tdd=True,
        name=children.get("name"),
        files=split_paths(children.get("files", "")),
        action="\n\n".join(parts) or None,
        verify=children.get("verify") or verification,
        automated=automated,
        done=children.get("done"),
        extra={k: v for k, v in children.items() if k not in ("name", "files")},
    )


def _heading_task(doc: Doc, plan_id: str, index: int, match: re.Match[str]) -> Task:
    """A `## Task N` heading's task: its text runs to the next heading of its level or above."""
    level = len(match.group(1))
    end_match = re.compile(rf"^#{{1,{level}}}[ \t]", re.M).search(doc.scan, match.end())
    end = end_match.start() if end_match else len(doc.text)
    return Task(
        id=f"{plan_id}/T{index}",
        index=index,
        line=doc.line(match.start()),
        type="auto",
        name=doc.text[match.start(2) : match.end(2)].strip(),
        action=clean(doc.text[match.end() : end]) or None,
    )


def _split_frontmatter(doc: Doc) -> tuple[str, int, int] | None:
    """(frontmatter text, its first line, where the body starts), or None; one never closed is
    refused (its declared dependencies would be lost)."""
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


def _fenced_frontmatter(doc: Doc) -> str:
    """No frontmatter: the first ```yaml block that declares plan keys is read as it, with a
    warning; "" when there is none (defaults, warned)."""
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


def _scan_body(
    doc: Doc, body_start: int
) -> tuple[dict[str, str], dict[str, str], list[Element], list[Element]]:
    """The body's `_SECTIONS` (`Plan` fields), its `_OTHER_SECTIONS`, tasks and features."""
    sections: dict[str, str] = {}
    other: dict[str, str] = {}
    tasks: list[Element] = []
    features: list[Element] = []
    wanted = (*_SECTIONS, *_OTHER_SECTIONS, "tasks", "task")
    for element in elements(doc, body_start, len(doc.text), wanted, "in the plan body"):
        if element.name == "tasks":
            inside = "inside <tasks>"
            for child in elements(doc, element.inner_start, element.inner_end, ("task",), inside):
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
            text = clean(doc.text[element.inner_start : element.inner_end])
            if element.name in into:
                doc.note(element.start, f"a second <{element.name}> section: appended")
                text = f"{into[element.name]}\n\n{text}"
            into[element.name] = text
    if "context" in sections and "interfaces" not in other:
        # The reference's planner puts <interfaces> inside <context>.
        match = re.search(r"<interfaces>(.*?)</interfaces>", sections["context"], re.S)
        if match:
            other["interfaces"] = clean(match.group(1))
    return sections, other, tasks, features


# --- tasks ----------------------------------------------------------------------------------


def _make_task(doc: Doc, plan_id: str, index: int, element: Element) -> Task:
    attrs = parse_attributes(doc, element)
    task_type, gate, tdd = _task_kind(doc, element, attrs)
    fields: dict[str, Any] = {}
    extra: dict[str, str] = {}
    inside = f"inside the <task> at line {doc.line(element.start)}"
    for child in elements(doc, element.inner_start, element.inner_end, _TASK_CHILDREN, inside):
        value = clean(doc.text[child.inner_start : child.inner_end])
        if child.name in fields or child.name in extra:
            doc.note(child.start, f"<task> has a second <{child.name}>: the first is used")
        elif child.name == "files":
            fields[child.name] = split_paths(value)
        elif child.name == "verify":
            fields["verify"], fields["automated"] = value, automated_commands(doc, child)
        elif child.name == "read_first":
            entries = read_first_entries(value)
            fields["read_first"] = [e.path for e in entries if e.path]
            fields["read_first_notes"] = {e.path: e.note for e in entries if e.note}
        elif child.name in _TASK_CHILDREN:
            fields[child.name] = value
        else:
            extra[child.name] = value
    return Task(
        id=f"{plan_id}/T{index}",
        index=index,
        line=doc.line(element.start),
        type=task_type,
        gate=gate,
        tdd=tdd,
        tracker_id=attrs.get("tracker-id"),  # (an `id=` is kept in `attributes`)
        attributes=attrs,
        extra=extra,
        **fields,
    )


def automated_commands(doc: Doc, verify: Element) -> list[str]:
    """The text of each non-empty `<automated>` directly inside a `<verify>`, in order."""
    inside = f"inside the <verify> at line {doc.line(verify.start)}"
    return [
        text
        for child in elements(doc, verify.inner_start, verify.inner_end, (), inside)
        if child.name == "automated"
        and (text := clean(doc.text[child.inner_start : child.inner_end]))
    ]


def _task_kind(
    doc: Doc, element: Element, attrs: dict[str, str]
) -> tuple[TaskType, TaskGate | None, bool]:
    """The task's `type`, `gate` and `tdd` attributes; an unknown value is read (with a note),
    never refused: an unknown checkpoint still stops for a person (the safe side)."""
    task_type = attrs.get("type", "auto")
    if task_type not in TASK_TYPES:
        read_as = "checkpoint:human-verify" if task_type.startswith("checkpoint") else "auto"
        known = ", ".join(TASK_TYPES)
        doc.note(
            element.start,
            f"<task> has unknown type {task_type!r}; run as {read_as} (known: {known})",
        )
        task_type = read_as
    gate = attrs.get("gate")
    if gate is not None and gate not in TASK_GATES:
        known = ", ".join(TASK_GATES)
        doc.note(
            element.start, f"<task> has unknown gate {gate!r}; read as blocking (known: {known})"
        )
        gate = "blocking"
    tdd = attrs.get("tdd")
    if tdd is not None and tdd.lower() not in ("true", "false", ""):
        doc.note(element.start, f"<task> attribute tdd must be true or false, got {tdd!r}")
        tdd = "false"
    # type and gate are checked against TASK_TYPES and TASK_GATES above
    read_tdd = tdd is not None and tdd.lower() in ("true", "")
    return cast(TaskType, task_type), cast("TaskGate | None", gate), read_tdd


def split_paths(text: str) -> list[str]:
    """A `<files>` list: one path per line or comma-separated, bullets removed; a backticked
    span is the path (`- \\`src/a.py\\` (the handler)` → `src/a.py`)."""
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


def _frontmatter_fields(
    doc: Doc, data: object, key_lines: dict[str, int], first_line: int, kept: dict[str, str]
) -> PlanFields:
    """The typed fields, read as leniently as the reference reads them; a value that cannot mean
    anything is dropped with a warning. Only a frontmatter that is no mapping, or an unreadable
    `depends_on`, refuses the plan. `kept`: keys `lenient_yaml` kept as written."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        # Not a plan's frontmatter at all (the reference would read defaults): refused.
        kind = type(data).__name__
        raise doc.fail_line(max(first_line, 1), f"frontmatter must be a YAML mapping, got a {kind}")
    keys = KeyReader(doc, data, key_lines, first_line)
    return {
        "phase": keys.text("phase"),
        "plan": keys.text("plan"),
        "type": keys.plan_type(),
        "wave": keys.wave(),
        "depends_on": keys.strings("depends_on", '"01-01"'),
        "files_modified": keys.strings("files_modified", '"src/app.py"', "files-modified"),
        "requirements": keys.strings("requirements", '"AUTH-01"'),
        "autonomous": keys.autonomous(),
        "must_haves": kept.get("must_haves", keys.must_haves()),
        "user_setup": kept.get("user_setup", data.get("user_setup")),
        "extra": {
            **{str(k): v for k, v in data.items() if k not in KNOWN_KEYS},
            **{k: v for k, v in kept.items() if k not in ("must_haves", "user_setup")},
        },
    }
