"""PLAN.md text for tests: `plan_markdown` writes a GSD plan (frontmatter + `<tasks>`) as
looprail's parser reads it, from `task` dicts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

PHASE_FOLDER = "01-test"


class PlanTask(TypedDict):
    """One task of a test plan, as `task` fills it in."""

    name: str
    action: str
    tracker_id: str | None
    read_first: list[str]
    files: list[str]
    type: str
    gate: str | None
    verify: str
    done: str


def task(
    name: str,
    *,
    action: str | None = None,
    tracker_id: str | None = None,
    read_first: Sequence[str] = (),
    files: Sequence[str] = (),
    type: str = "auto",
    gate: str | None = None,
    verify: str = "it works",
    done: str | None = None,
) -> PlanTask:
    """One task for `plan_markdown` / `LoopHarness.plan`."""
    return {
        "name": name,
        "action": action or f"Do {name}.",
        "tracker_id": tracker_id,
        "read_first": list(read_first),
        "files": list(files),
        "type": type,
        "gate": gate,
        "verify": verify,
        "done": done or f"{name} done",
    }


def plan_markdown(
    plan: str = "01",
    *,
    phase: str = PHASE_FOLDER,
    tasks: Sequence[Mapping[str, Any] | str] = ("Task one",),
    depends_on: Sequence[str] = (),
    files_modified: Sequence[str] = (),
    wave: int | None = None,
    autonomous: bool | None = None,
    objective: str = "Test plan.",
) -> str:
    """A GSD `PLAN.md` (frontmatter + `<tasks>`), as looprail's parser reads it."""
    items = [task(t) if isinstance(t, str) else task(**t) for t in tasks]
    if autonomous is None:
        autonomous = not any(t["type"].startswith("checkpoint:") for t in items)
    front = [
        "---",
        f"phase: {phase}",
        f'plan: "{plan}"',
        "type: execute",
        *([f"wave: {wave}"] if wave is not None else []),
        f"depends_on: {json.dumps(list(depends_on))}",
        f"files_modified: {json.dumps(list(files_modified))}",
        f"autonomous: {'true' if autonomous else 'false'}",
        "requirements: [TEST-1]",
        "---",
        "",
        "<objective>",
        objective,
        "</objective>",
        "",
        "<tasks>",
    ]
    for t in items:
        front += _task_xml(t)
    front += ["</tasks>", ""]
    return "\n".join(front)


def _task_xml(t: PlanTask) -> list[str]:
    attrs = f'type="{t["type"]}"'
    if t["gate"]:
        attrs += f' gate="{t["gate"]}"'
    if t["tracker_id"]:
        attrs += f' tracker-id="{t["tracker_id"]}"'
    return [
        f"<task {attrs}>",
        f"<name>{t['name']}</name>",
        f"<files>{', '.join(t['files'])}</files>",
        f"<read_first>{', '.join(t['read_first'])}</read_first>",
        f"<action>{t['action']}</action>",
        f"<verify>{t['verify']}</verify>",
        f"<done>{t['done']}</done>",
        "</task>",
    ]
