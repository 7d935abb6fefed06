"""`looprail answer [PROJECT] TASK [TEXT]`: answer a checkpoint a paused or waiting run asks."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from looprail.cli._common import print_json, project_folder
from looprail.errors import UsageError
from looprail.machine.answers import is_task_id, pending_checkpoints, submit_answer

if TYPE_CHECKING:
    import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "answer",
        help="answer a checkpoint of a paused or waiting run (the next run or resume uses it)",
        description="Answer checkpoint TASK (e.g. 01-02/T3) of the project's paused or waiting "
        'run: "approved" (or the plan\'s own word, such as "done"), a decision\'s option id, '
        "or, for a human-verify, the issues to fix. A run waiting on a terminal takes it at "
        "once; a paused one on its next run or resume. A secret (the resume signal asks for a "
        "key, a token or a password) is read without echo when TEXT is left out or is '-', and "
        "is never written into the project. With no TASK: list what waits for an answer.",
    )
    # Three optional positionals read as [PROJECT] TASK [TEXT] by what they look like.
    p.add_argument("project_pos", nargs="?", metavar="PROJECT", help="the project (default: .)")
    p.add_argument("task", nargs="?", metavar="TASK", help="the checkpoint task (01-02/T3)")
    p.add_argument("text", nargs="?", metavar="TEXT", help="the answer ('-' or none: read it)")
    p.add_argument("--project", default=None, metavar="DIR", help="the project folder")
    p.add_argument("--json", action="store_true", help="print what was recorded as JSON")
    p.set_defaults(handler=answer)


def _split(words: list[str], project: str | None) -> tuple[str, str | None, str | None]:
    if words and not is_task_id(words[0]):
        if project is not None:
            raise UsageError(f"{words[0]!r} is not a task id (like 01-02/T3)")
        project, words = words[0], words[1:]
    if len(words) > 2:
        raise UsageError("answer takes [PROJECT] TASK [TEXT] (quote an answer of several words)")
    task = words[0] if words else None
    text = words[1] if len(words) > 1 else None
    return project or ".", task, text


def answer(args: argparse.Namespace) -> int:
    words = [w for w in (args.project_pos, args.task, args.text) if w is not None]
    # (cli.main has copied the first positional into --project: not a project when it is TASK)
    explicit = args.project if args.project != args.project_pos else None
    where, task, text = _split(words, explicit)
    project = project_folder(where)
    if task is None:
        pending = pending_checkpoints(Path(project))
        if args.json:
            print_json({"pending": [c.model_dump(mode="json") for c in pending]})
            return 0
        if not pending:
            print("no checkpoint waits for an answer")
        for c in pending:
            name = f" {c.name}" if c.name else ""
            print(f"{c.task_id} ({c.kind}){name} — {c.resume_signal or 'approved'}")
        return 0
    if text is None or text == "-":
        text = _read_answer(task)
    recorded = submit_answer(Path(project), task, text, source="looprail answer")
    if args.json:
        print_json(recorded.model_dump(mode="json"))
        return 0
    what = {
        "approved": "approved",
        "chosen": f"option {recorded.option}" if recorded.option else "the decision",
        "issues": "the issues to fix",
        "value": "the answer",
        "secret": "the secret (withheld from the journal)",
    }.get(recorded.kind, recorded.kind)
    print(f"{task}: recorded {what} for run {recorded.run_id}")
    return 0


def _read_answer(task: str) -> str:
    """The answer from the terminal without echo (a secret never sits in argv or the shell's
    history), else from stdin."""
    if sys.stdin.isatty():
        return getpass.getpass(f"answer to {task} (not echoed): ")
    return sys.stdin.read().rstrip("\n")
