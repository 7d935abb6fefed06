"""The commands looprail prints for a person to run: each part taken from data is quoted with
`shlex.quote` (`'01-01;touch${IFS}X;#/T2'`), so a pasted line runs nothing else, and the command
is the last thing on its line."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from looprail.plans.checkpoint import Checkpoint


def answer_command(where: str, cp: Checkpoint) -> str:
    """`looprail answer WHERE TASK ANSWER`, answering `cp` the first way it passes (a secret:
    asked for without echo)."""
    if cp.secret:
        example: list[str] = []
    elif cp.kind == "decision" and cp.options:
        example = [cp.option_ids[0]]
    elif cp.kind == "human-verify":
        example = [cp.words[-1] if len(cp.words) > 1 else "approved"]
    else:
        example = [cp.words[-1]]
    return shlex.join(["looprail", "answer", where, cp.task_id, *example])


def answer_note(cp: Checkpoint) -> str | None:
    """What else the answer may be, in words (the options quoted as they are typed)."""
    if cp.secret:
        return "it is asked for without echo"
    if cp.kind == "decision" and cp.options:
        return "one of the option ids " + ", ".join(shlex.quote(o) for o in cp.option_ids)
    if cp.kind == "human-verify":
        return "or the issues to fix, in quotes"
    return None


def answer_hint(where: str, cp: Checkpoint) -> str:
    """`answer with (NOTE): COMMAND`, the command last."""
    note = answer_note(cp)
    return f"answer with{f' ({note})' if note else ''}: {answer_command(where, cp)}"


def approve_option(task_id: str) -> str:
    return f"--approve {shlex.quote(task_id)}"


def pause_hint(where: str, cp: Checkpoint) -> str:
    """How a paused run goes on (its halt reason ends with it)."""
    return f"run again with {approve_option(cp.task_id)}, or {answer_hint(where, cp)}"
