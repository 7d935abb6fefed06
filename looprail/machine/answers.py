"""Answers to checkpoints, the one seam of `looprail answer`, a run waiting on a terminal and
the dashboard: `pending_checkpoints(project)` and `submit_answer(...)`, on the project's latest
unfinished run. A checkpoint is pending while the last `checkpoint` or `answer` event of its
task is the `checkpoint` one. A secret is never journaled ("answer withheld"): it waits in a
0600 file outside the project (`secret_path`) until the run hands it over and removes it."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from looprail.errors import AnswerRefused, NoJournalError, PlanError
from looprail.journal import Journal
from looprail.journal.models import EventRecord
from looprail.layout import looprail_home, normalize_phase_number
from looprail.plans import list_phases, load_phase
from looprail.plans.checkpoint import Checkpoint, Interpreted, checkpoint_of, interpret

# The environment variable that carries a secret answer into the next executor call of its
# plan (and only that call); the prompt names the variable, never the value.
SECRET_ENV = "LOOPRAIL_CHECKPOINT_ANSWER"
WITHHELD = "answer withheld"
_TASK_ID = re.compile(r"^[\w.-]+/T\d+$")


def is_task_id(text: str) -> bool:
    return bool(_TASK_ID.match(text.strip()))


class AnswerRecorded(BaseModel):
    """What `submit_answer` journaled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    task_id: str
    kind: str  # approved, chosen, issues, value, secret
    option: str | None = None
    withheld: bool = False  # a secret: not in the journal; kept for the run outside the project
    seq: int


def asked_record(cp: Checkpoint, wave: int | None) -> EventRecord:
    return EventRecord(
        kind="checkpoint",
        task_id=cp.task_id,
        plan_id=cp.plan_id,
        wave=wave,
        outcome="asked",
        message=f"{cp.kind}: {cp.name}".rstrip(": "),
        data={"checkpoint": cp.model_dump(mode="json")},
    )


def answer_record(
    cp: Checkpoint, text: str, meaning: Interpreted, source: str, **data: Any
) -> EventRecord:
    """The `answer` event: the user's words verbatim, except a secret's."""
    secret = meaning.kind == "secret"
    return EventRecord(
        kind="answer",
        task_id=cp.task_id,
        plan_id=cp.plan_id,
        outcome="withheld" if secret else meaning.kind,
        message=WITHHELD if secret else text,
        data={
            "source": source,
            "type": cp.kind,
            **({"option": meaning.option} if meaning.option else {}),
            **data,
        },
    )


def latest(events: Iterable[EventRecord], task_id: str) -> EventRecord | None:
    """The last `checkpoint` or `answer` event of `task_id` (None: none yet)."""
    last = None
    for e in events:
        if e.task_id == task_id and e.kind in ("checkpoint", "answer"):
            last = e
    return last


def pending_checkpoints(project: Path) -> list[Checkpoint]:
    """The checkpoints the project's latest unfinished run waits on, in the order it asked."""
    try:
        jr = Journal.open_readonly(project)
    except NoJournalError:
        return []
    with jr:
        run = jr.unfinished_run()
        if run is None:
            return []
        events = jr.events(run.id, kinds=["checkpoint", "answer", "task_finished"])
    return pending_in(events)


def pending_in(events: Sequence[EventRecord]) -> list[Checkpoint]:
    """The checkpoints still unanswered in a run's `checkpoint`, `answer` and `task_finished`
    events (the dashboard applies it to the events it has already read)."""
    last: dict[str, EventRecord] = {}
    passed: set[str] = set()
    for e in events:
        if e.kind == "task_finished":
            if e.outcome == "approved" and e.task_id:
                passed.add(e.task_id)
            continue
        if e.task_id:
            last.pop(e.task_id, None)  # reinserted: the order it was last asked in
            last[e.task_id] = e
    return [
        Checkpoint.model_validate(e.data["checkpoint"])
        for tid, e in last.items()
        if e.kind == "checkpoint" and tid not in passed
    ]


def submit_answer(project: Path, task_id: str, text: str, *, source: str) -> AnswerRecorded:
    """Check `text` as the answer to checkpoint `task_id` of the project's latest unfinished run
    and journal it. `AnswerRefused` (one line) for an answer that cannot be right (no run, no
    such checkpoint, an option the decision does not offer, an empty answer)."""
    task_id = task_id.strip()
    if not is_task_id(task_id):
        raise AnswerRefused(f"{task_id!r} is not a task id (like 01-02/T3)")
    try:
        jr = Journal.open(project, create=False)
    except NoJournalError:
        raise AnswerRefused(
            f"{project}: no run to answer (no journal yet); give the answer to the run: "
            f"looprail run --answer {shlex.quote(task_id)}=TEXT"
        ) from None
    with jr:
        run = jr.unfinished_run()
        if run is None:
            raise AnswerRefused(
                f"{project}: no paused or running run to answer; give the answer to the next "
                f"run: looprail run --answer {shlex.quote(task_id)}=TEXT"
            )
        events = jr.events(run.id, kinds=["checkpoint", "answer", "task_finished"])
        done = {e.task_id for e in events if e.kind == "task_finished" and e.outcome == "approved"}
        if task_id in done:
            raise AnswerRefused(f"checkpoint {task_id} of run {run.id} has already passed")
        asked = [c for c in pending_in(events) if c.task_id == task_id]
        cp = asked[0] if asked else checkpoint_in_phase(project, run.phase, task_id)
        meaning = interpret(cp, text)
        if meaning.problem:
            raise AnswerRefused(f"{task_id}: {meaning.problem}")
        jr.verify_run(run.id)  # never add to a run this user's looprail did not write
        if meaning.kind == "secret":
            put_secret(project, run.id, task_id, text)
        seq = jr.record(run.id, answer_record(cp, text, meaning, source))
    return AnswerRecorded(
        run_id=run.id,
        task_id=task_id,
        kind=meaning.kind or "",
        option=meaning.option,
        withheld=meaning.kind == "secret",
        seq=seq,
    )


def checkpoint_in_phase(project: Path, phase: str, task_id: str) -> Checkpoint:
    """The checkpoint `task_id` of `phase`'s plans; `AnswerRefused` when the phase has no such
    task or it is not a checkpoint."""
    try:
        loaded = load_phase(project, phase)
    except PlanError as exc:
        raise AnswerRefused(f"cannot read phase {phase} to check the answer: {exc}") from None
    plan_id = task_id.rsplit("/", 1)[0]
    for plan in loaded.plans:
        if plan.id != plan_id:
            continue
        for task in plan.tasks:
            if task.id == task_id:
                if not task.is_checkpoint:
                    raise AnswerRefused(f"{task_id} is not a checkpoint (type {task.type})")
                return checkpoint_of(plan, task)
        raise AnswerRefused(f"plan {plan_id} has no task {task_id}")
    raise AnswerRefused(f"phase {phase} has no plan {plan_id} (task {task_id})")


def check_answer(project: Path, task_id: str, text: str) -> None:
    """`--answer TASK=TEXT` before the run starts: `AnswerRefused` when the task's plan is
    written and the answer cannot be right for it."""
    plan_id = task_id.rsplit("/", 1)[0]
    phase_token = plan_id.split("-", 1)[0]
    try:
        phases = [p for p in list_phases(project) if _same_phase(p.number, phase_token)]
    except (PlanError, OSError):
        return
    for ph in phases:
        try:
            cp = checkpoint_in_phase(project, ph.number, task_id)
        except AnswerRefused as exc:
            if "has no plan" in str(exc):
                continue
            raise
        meaning = interpret(cp, text)
        if meaning.problem:
            raise AnswerRefused(f"--answer {task_id}: {meaning.problem}")
        return


def _same_phase(number: str, token: str) -> bool:
    wanted = normalize_phase_number(token)
    return wanted is not None and normalize_phase_number(number) == wanted


def secret_path(project: Path, run_id: str, task_id: str) -> Path:
    """Where a secret answer waits for its run: under `looprail_home()/answers/`."""
    key = hashlib.sha256(str(Path(project).resolve()).encode()).hexdigest()[:16]
    name = f"{run_id}-{task_id.replace('/', '_')}.secret"
    return Path(looprail_home()) / "answers" / key / name


def put_secret(project: Path, run_id: str, task_id: str, text: str) -> None:
    path = secret_path(project, run_id, task_id)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def take_secret(project: Path, run_id: str, task_id: str) -> str | None:
    """The secret waiting for the run (read, not yet removed: `drop_secret` once it is used)."""
    path = secret_path(project, run_id, task_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return os.read(fd, 1 << 16).decode(errors="replace")
    finally:
        os.close(fd)


def drop_secret(project: Path, run_id: str, task_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(secret_path(project, run_id, task_id))


def drop_run_secrets(project: Path, run_id: str) -> None:
    """Remove every secret still waiting for `run_id`, whose run has ended."""
    folder = secret_path(project, run_id, "x/T0").parent
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(f"{run_id}-") and entry.name.endswith(".secret"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
