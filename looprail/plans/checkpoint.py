"""A checkpoint task as a person sees it (built from the plan's parse, shown as the reference's
execution protocol shows its four types), and `interpret`, the one rule for what an answer
means (the terminal, `looprail answer`, `--answer` and the dashboard all go through it).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from looprail.plans.planfile import Plan, Task
from looprail.plans.scan import child_elements

CheckpointKind = Literal["human-verify", "decision", "human-action", "tdd-review"]
AnswerKind = Literal["approved", "chosen", "issues", "value", "secret"]

# The word that passes every checkpoint (`--approve` says it).
APPROVED = "approved"
# A resume signal that asks for one of these (and quotes no word to type instead) asks for a
# secret: the answer is read without echo and never written down.
_SECRET = re.compile(
    r"\b(api[ _-]?keys?|keys?|tokens?|passwords?|passphrases?|secrets?|credentials?)\b", re.I
)
# The plan's own words in its resume signal: `Type "done" when …`, `"approved" or describe …`.
_WORD = re.compile(r"[\"“']([A-Za-z][\w-]*)[\"”']")
# A decision without `<options>`: `- fix-all: Fix all …` after `Options:` in its action.
_OPTION_LINE = re.compile(r"^\s*[-*]\s*`?([A-Za-z0-9][\w.-]*)`?\s*[:—–-]\s+(.+)$")


class CheckpointOption(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str = ""
    pros: str = ""
    cons: str = ""


class Checkpoint(BaseModel):
    """One checkpoint task as shown (journaled as the `checkpoint` event's `data`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str  # "01-02/T3"
    plan_id: str
    kind: CheckpointKind
    gate: str | None = None
    name: str = ""
    what_built: str = ""
    how_to_verify: str = ""
    decision: str = ""
    context: str = ""
    options: tuple[CheckpointOption, ...] = ()
    action: str = ""
    instructions: str = ""
    verification: str = ""
    what_checked: str = ""
    gate_results: str = ""
    violations: str = ""
    resume_signal: str = ""
    words: tuple[str, ...] = (APPROVED,)  # what passes it ("approved" and the plan's own)
    secret: bool = False  # the resume signal asks for a key, a token or a password

    @property
    def title(self) -> str:
        return {
            "human-verify": "Verification Required",
            "decision": "Decision Required",
            "human-action": "Action Required",
            "tdd-review": "TDD Review",
        }[self.kind]

    @property
    def option_ids(self) -> tuple[str, ...]:
        return tuple(o.id for o in self.options)


class Interpreted(BaseModel):
    """What an answer means (`interpret`), or why it cannot be right (`problem`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: AnswerKind | None = None
    option: str | None = None  # a decision's chosen option id
    problem: str | None = None  # one line: the answer is refused (asked again on a terminal)


def checkpoint_of(plan: Plan, task: Task) -> Checkpoint:
    """The presentation model of a checkpoint task of `plan`."""
    extra = task.extra
    signal = extra.get("resume-signal", "").strip()
    kind: CheckpointKind = task.type.removeprefix("checkpoint:")  # type: ignore[assignment]
    options = _options(extra.get("options", ""), f"{plan.path.name}: task {task.id} <options>")
    if kind == "decision" and not options:
        options = _option_lines(task.action or "")
    words = dict.fromkeys([APPROVED, *(w.lower() for w in _WORD.findall(signal))])
    return Checkpoint(
        task_id=task.id,
        plan_id=plan.id,
        kind=kind,
        gate=task.gate,
        name=task.name or "",
        what_built=extra.get("what-built", ""),
        how_to_verify=extra.get("how-to-verify", ""),
        decision=extra.get("decision", ""),
        context=extra.get("context", ""),
        options=tuple(options),
        action=task.action or "",
        instructions=extra.get("instructions", ""),
        verification=extra.get("verification", "") or (task.verify or ""),
        what_checked=extra.get("what-checked", ""),
        gate_results=extra.get("gate-results", ""),
        violations=extra.get("violations", ""),
        resume_signal=signal,
        words=tuple(words),
        # `Type "done" when you've set the credentials` asks for a word, not for the secret
        secret=kind != "decision" and len(words) == 1 and bool(_SECRET.search(signal)),
    )


def _options(text: str, where: str) -> list[CheckpointOption]:
    out = []
    for el in child_elements(text, where):
        if el.name != "option":
            continue
        parts = {f.name: f.text for f in child_elements(el.text, where)}
        named = parts.get("name", "").split()
        oid = el.attributes.get("id") or (named[0] if named else "")
        if not oid:
            continue
        out.append(
            CheckpointOption(
                id=oid,
                name=parts.get("name", ""),
                pros=parts.get("pros", ""),
                cons=parts.get("cons", ""),
            )
        )
    return out


def _option_lines(action: str) -> list[CheckpointOption]:
    """`Options:` followed by `- id: what it means` lines (a decision without `<options>`)."""
    lines = action.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip().lower() == "options:")
    except StopIteration:
        return []
    out: list[CheckpointOption] = []
    for line in lines[start + 1 :]:
        match = _OPTION_LINE.match(line)
        if match is None:
            if out and line.strip():
                break
            continue
        out.append(CheckpointOption(id=match.group(1), name=match.group(2).strip()))
    return out


def takes_issues(cp: Checkpoint) -> bool:
    """Whether an answer to `cp` other than its words is issues to fix (a human-verify, not
    asking for a secret; a fix-up executor call follows)."""
    return cp.kind == "human-verify" and not cp.secret


def interpret(cp: Checkpoint, text: str) -> Interpreted:
    """What `text` means as an answer to `cp`. A decision takes an option id (or number); a
    human-verify passes on its words, other text is issues; a human-action passes on its word
    (any text when its signal names none: a value, or a secret); a tdd-review passes on any."""
    answer = text.strip()
    if not answer:
        return Interpreted(problem="an empty answer")
    word = answer.lower().rstrip(".!")
    if cp.kind == "decision":
        if word == APPROVED and cp.options:
            return Interpreted(
                problem=f"a decision takes an option id: one of {', '.join(cp.option_ids)}"
            )
        if not cp.options:  # nothing to choose from: the answer is the decision, verbatim
            return Interpreted(kind="approved" if word == APPROVED else "chosen", option=None)
        for i, option in enumerate(cp.options, 1):
            if answer == option.id or answer.lower() == option.id.lower() or answer == str(i):
                return Interpreted(kind="chosen", option=option.id)
        return Interpreted(
            problem=f"{answer!r} is not an option of {cp.task_id}; "
            f"choose one of: {', '.join(cp.option_ids)}"
        )
    if cp.secret:
        return Interpreted(kind="secret")
    if word in cp.words:
        return Interpreted(kind="approved")
    if takes_issues(cp):
        return Interpreted(kind="issues")
    if cp.kind == "human-action" and len(cp.words) > 1:  # its signal names the word to type
        said = " or ".join(f'"{w}"' for w in cp.words[1:])
        return Interpreted(problem=f"type {said} once it is done")
    return Interpreted(kind="value")  # a value to hand on, or tdd-review notes


def render(cp: Checkpoint, done: int | None = None, total: int | None = None) -> str:
    """The checkpoint as the reference's execution protocol displays it."""
    bar = "─" * 56
    head = f"CHECKPOINT: {cp.title}"
    lines = ["╔" + "═" * 55 + "╗", f"║  {head:<53}║", "╚" + "═" * 55 + "╝", ""]
    if done is not None and total is not None:
        lines.append(f"Progress: {done}/{total} tasks complete")
    lines += [f"Task: {cp.task_id} {cp.name}".rstrip(), ""]
    for title, body in _blocks(cp):
        if title == "Options:":
            lines += _option_block(cp)
        elif not body.strip():
            continue
        elif "\n" in body.strip():
            lines.append(f"{title}:")
            lines.extend("  " + line if line.strip() else "" for line in body.strip().splitlines())
            lines.append("")
        else:
            lines += [f"{title}: {body.strip()}", ""]
    signal = cp.resume_signal or _default_signal(cp)
    lines += [bar, f"→ YOUR ACTION: {_one(signal)}", bar]
    return "\n".join(lines)


def _blocks(cp: Checkpoint) -> list[tuple[str, str]]:
    """(title, text) of what a checkpoint of its kind shows, in order."""
    if cp.kind == "human-verify":
        return [("Built", cp.what_built), ("How to verify", cp.how_to_verify)]
    if cp.kind == "decision":
        shown = ("Options:", "") if cp.options else ("Action", cp.action)
        return [("Decision", cp.decision or cp.name), ("Context", cp.context), shown]
    if cp.kind == "human-action":
        return [
            ("Action", cp.action),
            ("What you need to do", cp.instructions),
            ("I'll verify", cp.verification),
        ]
    return [
        ("Checked", cp.what_checked),
        ("Gate results", cp.gate_results),
        ("Violations", cp.violations),
    ]


def _option_block(cp: Checkpoint) -> list[str]:
    lines = ["Options:"]
    for i, o in enumerate(cp.options, 1):
        lines.append(f"  {i}. {o.id}" + (f" - {o.name}" if o.name else ""))
        if o.pros:
            lines.append(f"     Pros: {_one(o.pros)}")
        if o.cons:
            lines.append(f"     Cons: {_one(o.cons)}")
        lines.append("")
    return lines


def _default_signal(cp: Checkpoint) -> str:
    if cp.kind == "decision" and cp.options:
        return "Select: " + ", ".join(cp.option_ids)
    if cp.kind == "human-verify":
        return 'Type "approved" or describe issues'
    return 'Type "approved" to continue'


def _one(text: str) -> str:
    return " ".join(text.split())
