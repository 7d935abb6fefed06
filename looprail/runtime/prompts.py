"""What an agent is asked: one prompt per unit of work, assembled as docs/agents.md ("What an
agent is asked") lists it. It reads plans/briefing.py: the runtime layer's second known upward
import (test_architecture)."""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

from looprail.fsutil import read_contained
from looprail.layout import LOOPRAIL_DIR, ROLES_DIR
from looprail.plans.briefing import phase_sections
from looprail.runtime.base import Request, TaskWork
from looprail.runtime.hostcall import shown_phase_dir

READ_CAP = 64 * 1024  # bytes of one read_first file / context file put into a prompt
_ROLES_PACKAGE = "looprail.runtime.roles"


def phase_vars(request: Request, project: Path) -> dict[str, str]:
    phase_dir = Path(request.phase.dir) if request.phase.dir else None
    slug = phase_dir.name if phase_dir else f"{request.phase.number}"
    match = re.match(r"\d+[A-Za-z]?(?:\.\d+)*", slug)
    rel = shown_phase_dir(project.resolve(), phase_dir.resolve() if phase_dir else None)
    rel = rel or f".planning/phases/{slug}"
    return {
        "{phase}": request.phase.number,
        "{phase_dir}": rel,
        "{phase_prefix}": match.group(0) if match else slug,
        "{phase_slug}": slug,
    }


def role_brief(project: Path, role: str) -> tuple[str, str]:
    """`(text, where)`: the project's `.looprail/roles/<role>.md` (a regular file inside the
    project, symlinks followed), else looprail's own, else a generic line."""
    own = _read_inside(project, project / LOOPRAIL_DIR / ROLES_DIR / f"{role}.md")
    if own is not None:
        return own, f"{LOOPRAIL_DIR}/{ROLES_DIR}/{role}.md"
    shipped = files(_ROLES_PACKAGE) / f"{role}.md"
    if shipped.is_file():
        return shipped.read_text(encoding="utf-8"), f"looprail/runtime/roles/{role}.md"
    return (
        f"You are the {role} agent of a spec-driven project loop. You work non-interactively: "
        "do the work described below and finish with a short summary.",
        "(generic)",
    )


# The file each phase step owes, after the phase prefix.
_OWED = {"discuss": "CONTEXT.md", "plan": "NN-PLAN.md", "verify": "VERIFICATION.md"}


def owed_file(request: Request, project: Path) -> str:
    """The file a phase step owes (`.planning/phases/01-x/01-CONTEXT.md`), or its pattern."""
    v = phase_vars(request, project)
    return f"{v['{phase_dir}']}/{v['{phase_prefix}']}-{_OWED.get(request.step or '', 'CONTEXT.md')}"


def owed(request: Request, project: Path) -> str | None:
    """One sentence naming the artifact this unit of work owes, or None."""
    if request.kind == "phase" and request.step in _OWED:
        path = owed_file(request, project)
        return {
            "discuss": f"Write {path}.",
            "plan": f"Write at least one {path} in the format above.",
            "verify": (
                f"Write {path} with a `status:` of passed, gaps_found or human_needed in its "
                "frontmatter."
            ),
        }[request.step]
    if request.kind == "verdict":
        return (
            'Finish with exactly one JSON object on the last line: {"block": true or false, '
            '"message": "one line saying why"}. block=true stops the loop at this gate.'
        )
    return None


def build_prompt(
    request: Request,
    project: Path,
    *,
    messages: tuple[str, ...] = (),
    skill_form: str = "Run the skill `{name}`.",
    agent_form: str = "Use the `{name}` subagent.",
    conversation: bool = False,
) -> str:
    v = phase_vars(request, project)
    parts: list[str] = []
    if request.kind in ("phase", "task"):
        role = request.role or "executor"
        brief, _ = role_brief(project, role)
        for key, value in v.items():  # `{phase}` and the like; nothing else is substituted
            brief = brief.replace(key, value)
        parts.append(brief.strip())
    elif request.kind == "skill":
        parts.append(skill_form.replace("{name}", request.name))
    elif request.kind == "agent":
        parts.append(agent_form.replace("{name}", request.name))
    elif request.kind == "verdict" and request.verdict is not None:
        parts.append(agent_form.replace("{name}", request.verdict.ref))
        if request.verdict.prompt:
            parts.append(request.verdict.prompt.strip())
    parts += [_phase_section(request, project, v), _phase_facts(request, project)]
    if request.kind in ("phase", "task"):
        texts = (request.role_context or {}).get(request.role or "executor", ())
        if texts:
            parts.append(
                "## Contributions to your role (verbatim, in order)\n\n" + "\n\n---\n\n".join(texts)
            )
    if request.kind == "task" and request.task is not None:
        parts.append(_task_section(request, project))
    if messages:
        parts.append("## Messages for this session\n\n" + "\n\n".join(messages))
    if conversation:
        parts.append(CONVERSATION)
    due = owed(request, project)
    if due:
        parts.append(f"## What you owe\n\n{due}")
    return "\n\n".join(p for p in parts if p).rstrip() + "\n"


# Said to an agent that has the user's terminal (it overrides a brief's "nobody will answer").
CONVERSATION = """## This is a conversation

The user is at the terminal with you: this step is interactive, whatever the brief above says
about working alone. Ask them about what is still open for this phase (its scope, what is in
and what is out, the conventions to follow), a few questions at a time, and write down what you
agree on. Once the file below is written, tell them so, and that ending the session lets the
loop go on to the next step."""


def _phase_section(request: Request, project: Path, v: dict[str, str]) -> str:
    lines = [f"## Phase {request.phase.number}", "", f"- Phase folder: `{v['{phase_dir}']}`"]
    if request.step:
        lines.append(f"- Step: {request.step}")
    if request.point:
        lines.append(
            f"- Asked at: {request.point}" + (f" ({request.cap_id})" if request.cap_id else "")
        )
    if request.plan_id:
        lines.append(f"- Plan: {request.plan_id}")
    phase_dir = Path(request.phase.dir) if request.phase.dir else None
    context = None
    if phase_dir is not None and phase_dir.is_dir():
        names = sorted(p.name for p in phase_dir.iterdir() if p.is_file())
        if names:
            lines.append("- Files: " + ", ".join(f"`{n}`" for n in names))
        context = next((phase_dir / n for n in names if n.endswith("CONTEXT.md")), None)
    if context is not None and request.step != "discuss":
        text = _read_inside(project, context)
        shown = "(not readable from the project)" if text is None else text.strip()
        lines += ["", f"### {context.name}", "", shown]
    return "\n".join(lines)


def _task_section(request: Request, project: Path) -> str:
    t = request.task
    assert t is not None
    lines = [f"## Task {t.key}: {t.name}".rstrip(": ")]
    if t.plan_sections.get("path"):
        lines.append(f"- Plan: `{t.plan_sections['path']}` (read it whole if anything is unclear)")
    if t.files:
        lines.append(f"- Files: {', '.join(t.files)}")
    if t.tracker_id:
        lines.append(f"- Tracker: {t.tracker_id}")
    if t.task_sections.get("tdd"):
        lines.append(
            '- TDD: yes (`tdd="true"`): the failing test first (red), then the code (green)'
        )
    for title, body in (("Action", t.action), ("Verify", t.verify), ("Done when", t.done)):
        if body.strip():
            lines += ["", f"### {title}", "", _bounded(body.strip(), f"the task's {title}")]
    if t.acceptance_criteria:
        lines += ["", "### Acceptance criteria", ""] + [f"- {c}" for c in t.acceptance_criteria]
    for key, title in _TASK_TITLES:
        if t.task_sections.get(key):
            lines += ["", f"### {title}", "", _bounded(t.task_sections[key], f"<{key}>")]
    lines += _plan_vocabulary(t)
    lines += _check_failures(t)
    lines += _read_first(t, project)
    return "\n".join(lines)


def _read_first(t: TaskWork, project: Path) -> list[str]:
    if not t.read_first and not t.read_first_notes.get(""):
        return []
    lines = ["", "## Read first"]
    if t.read_first_notes.get(""):
        lines += ["", t.read_first_notes[""]]
    for rel in t.read_first:
        note = t.read_first_notes.get(rel)
        lines += ["", f"### {rel}" + (f" — {note}" if note else "")]
        text = _read_inside(project, project / rel)
        lines += ["", "(not readable from the project)" if text is None else _fenced(text.rstrip())]
    return lines


# The task's own parts (TaskWork.task_sections), in this order, under these titles.
_TASK_TITLES = (
    ("behavior", "Behavior (the tests to write first)"),
    ("implementation", "Implementation"),
    ("precondition", "Precondition (true before you start)"),
    ("reversibility", "Reversibility"),
)
# The plan's parts an executor is handed (TaskWork.plan_sections), in order; `fenced`: YAML.
_PLAN_TITLES = (
    ("objective", "Plan objective", False),
    ("must_haves", "must_haves, as written", True),
    ("requirements", "requirements, as written", True),
    ("context", "The plan's context: read these", False),
    ("interfaces", "Interfaces", False),
    ("threat_model", "Threat model", False),
    ("verification", "The plan's verification", False),
    ("success_criteria", "The plan's success criteria", False),
    ("tasks", "The plan's tasks (earlier ones are done in this tree)", False),
    # machine/checkpoint.py: what the user answered at the plan's checkpoints, verbatim
    ("checkpoint_answers", "Checkpoint answers (the user's words, verbatim)", False),
)


def _check_failures(task: TaskWork) -> list[str]:
    if not task.check_failures:
        return []
    lines = [
        "",
        "## Your previous attempt failed its checks",
        "",
        "looprail ran these after your last call; fix the work so they pass (a check passes",
        "only when it exits 0 and actually tests something).",
    ]
    for f in task.check_failures:
        code = "no exit code" if f.exit_code is None else f"exit {f.exit_code}"
        why = "" if f.reason == code else f": {f.reason}"
        lines += [
            "",
            f"### `{f.command}` ({code}{why})",
            "",
            "```",
            f.output_tail.replace("```", "'''"),
            "```",
        ]
    return lines


def _plan_vocabulary(task: TaskWork) -> list[str]:
    lines: list[str] = []
    for key, title, fenced in _PLAN_TITLES:
        text = task.plan_sections.get(key)
        if text:
            shown = _bounded(text, f"the plan's {key}")
            lines += ["", f"### {title} ({task.plan_id})", "", _fenced(shown) if fenced else shown]
    return lines


def _phase_facts(request: Request, project: Path) -> str:
    """What the discuss, plan or verify agent is handed of its phase (plans/briefing.py)."""
    if request.kind != "phase" or request.step not in ("discuss", "plan", "verify"):
        return ""
    phase_dir = Path(request.phase.dir) if request.phase.dir else None
    sections = phase_sections(project, request.phase.number, phase_dir, request.step)
    parts = []
    for title, text in sections:
        shown = _bounded(text, title)
        fenced = title.startswith(("The phase in", "must_haves of"))
        parts.append(f"### {title}\n\n{_fenced(shown) if fenced else shown}")
    return "\n\n".join(["## What the project says about this phase", *parts]) if parts else ""


def _bounded(text: str, what: str, cap: int = READ_CAP) -> str:
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    kept = data[:cap].decode("utf-8", errors="ignore")
    return f"{kept}\n… ({what} cut at {cap // 1024} KiB: {len(data) - cap} bytes more)"


def _fenced(text: str) -> str:
    """`text` in a code fence longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _read_inside(project: Path, path: Path) -> str | None:
    """The text of `path` (a regular file inside the project, symlinks followed), or None."""
    data = read_contained(project, path, READ_CAP)
    if data is None:
        return None
    text = data[:READ_CAP].decode("utf-8", errors="replace")
    return text + ("\n… (cut at 64 KiB: the file is longer)" if len(data) > READ_CAP else "")
