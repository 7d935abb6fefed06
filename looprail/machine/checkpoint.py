"""The checkpoint step of a plan: where the run meets a person (docs/loop.md, "Checkpoints":
where an answer comes from, in order, and what it does). Every answer reaches every later
executor request of the plan (`with_answers`) and its SUMMARY (`summary_lines`); a secret only
the plan's next executor call, in `$LOOPRAIL_CHECKPOINT_ANSWER` (`secret_env`)."""

from __future__ import annotations

import os
import select
import shlex
import sys
import termios
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from looprail.errors import CheckpointPause, HaltError
from looprail.journal.models import EventRecord
from looprail.machine.answers import (
    SECRET_ENV,
    WITHHELD,
    answer_record,
    asked_record,
    drop_secret,
    latest,
    take_secret,
)
from looprail.machine.commands import answer_hint, pause_hint
from looprail.plans.checkpoint import (
    Checkpoint,
    Interpreted,
    checkpoint_of,
    interpret,
    render,
    takes_issues,
)
from looprail.runtime.base import DispatchContext, TaskWork
from looprail.runtime.process import stopping
from looprail.runtime.settings import CHECKPOINT_ROUNDS, looprail_settings

if TYPE_CHECKING:
    from looprail.machine.context import CheckpointRun, ExecuteTask
    from looprail.plans import Plan, Task

# One checkpoint at a time asks on the terminal (plans of a wave run on several threads).
_TERMINAL = threading.Lock()
POLL_S = 0.2  # how often a waiting run looks for an answer journaled by another process
ANSWERS_KEY = "checkpoint_answers"  # TaskWork.plan_sections key (runtime/prompts.py shows it)


@dataclass(frozen=True)
class _Got:
    text: str
    source: str
    meaning: Interpreted
    journaled: bool  # already an `answer` event (from another process, or before a kill)


def pass_checkpoint(
    runner: CheckpointRun, plan: Plan, task: Task, wave: int, execute: ExecuteTask
) -> None:
    """Get checkpoint `task` of `plan` answered, or raise `CheckpointPause` or `HaltError`."""
    cp = checkpoint_of(plan, task)
    st = runner.checkpoints
    if task.id in runner.options.approved_earlier and _approved_earlier(runner, plan, task):
        _passed(runner, cp, wave, "approved earlier in this run", None)
        return
    while True:
        shown = render(cp, _done_before(plan, task), len(plan.tasks))
        got = _answer(runner, plan, task, cp, wave, shown)
        if got.meaning.kind == "issues":
            rounds = _within_rounds(runner, plan, cp)
            _fixup(runner, plan, task, cp, got.text, rounds, wave, execute)
            _ask(runner, cp, wave, again=True)
            continue
        if got.meaning.kind == "secret":
            value: str | None = got.text
            if got.journaled:  # from `looprail answer`: it waits in its file
                value = take_secret(runner.project, runner.recorder.run_id, task.id)
            if value is None:  # its file is gone (removed by hand): ask again
                _ask(runner, cp, wave, again=True)
                continue
            with st.lock:
                st.secrets[plan.id] = (task.id, value)
        _passed(runner, cp, wave, got.source, got.meaning)
        return


def blocked_checkpoint(plan: Plan, task: Task, reason: str, words: str) -> Checkpoint:
    """The checkpoint an executor's `BLOCKED: <reason>` raises on `task`: a human-action
    whose answer (any text, or "approved" once it is done) goes to the task's next call."""
    return Checkpoint(
        task_id=task.id,
        plan_id=plan.id,
        kind="human-action",
        gate="blocking-human",  # never passed by --autonomous: a person decides
        name=f"{task.name or task.id}: the executor is blocked",
        action=f"The executor stopped: {reason}\n\nIts closing words:\n\n{words}",
        instructions="Do or decide what it needs; your answer goes to its next call of this task.",
        resume_signal="Write what the executor should do, or approved once it is done",
    )


def blocked_pending(runner: CheckpointRun, task: Task) -> Checkpoint | None:
    """The BLOCKED checkpoint `task` still waits on (a run resumed before it was answered)."""
    last = latest(runner.recorder.kinds("checkpoint", "answer"), task.id)
    if last is None or last.kind != "checkpoint" or task.is_checkpoint:
        return None
    return Checkpoint.model_validate(last.data["checkpoint"])


def pass_blocked(runner: CheckpointRun, plan: Plan, task: Task, cp: Checkpoint, wave: int) -> None:
    """Get the BLOCKED checkpoint `cp` of `task` answered, as a human-action is."""
    got = _answer(runner, plan, task, cp, wave, render(cp))
    runner.progress.line(f"  ✓ {task.id} unblocked ({got.source}): called again with the answer")


def _answer(
    runner: CheckpointRun, plan: Plan, task: Task, cp: Checkpoint, wave: int, shown: str
) -> _Got:
    """The answer to `cp`, journaled; without one and without a terminal, `shown` and a pause."""
    got = _given(runner, cp)
    if got is None:
        _ask(runner, cp, wave)
        if not _terminal():
            for line in shown.splitlines():
                runner.progress.line(f"  {line}" if line else "")
            raise CheckpointPause(task, plan, hint=pause_hint(_project_arg(runner), cp))
        got = _wait(runner, plan, task, cp)
    if not got.journaled:
        record = answer_record(cp, got.text, got.meaning, got.source)
        runner.recorder.event(record.model_copy(update={"wave": wave}))
    return got


def _approved_earlier(runner: CheckpointRun, plan: Plan, task: Task) -> bool:
    """Whether an approval earlier in the run still holds: a secret answer only while its
    file waits (`looprail answer`) or nothing after it needs it."""
    if not checkpoint_of(plan, task).secret or _rest_done(runner, plan, task):
        return True
    value = take_secret(runner.project, runner.recorder.run_id, task.id)
    if value is not None:
        with runner.checkpoints.lock:
            runner.checkpoints.secrets[plan.id] = (task.id, value)
        return True
    runner.progress.line(
        f"  ! checkpoint {task.id}: a secret answer is never kept across runs; asked again"
    )
    return False


def _within_rounds(runner: CheckpointRun, plan: Plan, cp: Checkpoint) -> int:
    """The round of fixes this answer starts; halts once `checkpoint_rounds` are used up."""
    limit = (
        runner.options.checkpoint_rounds
        or looprail_settings(runner.config).checkpoint_rounds
        or CHECKPOINT_ROUNDS
    )
    answers = runner.recorder.kinds("answer")
    rounds = sum(1 for e in answers if e.task_id == cp.task_id and e.outcome == "issues")
    if rounds > limit:
        raise HaltError(
            f"{plan.path.name}: checkpoint {cp.task_id}: {limit} "
            f"{'round' if limit == 1 else 'rounds'} of fixes and it still has issues "
            f"(looprail.checkpoint_rounds = {limit}); fix them and answer approved, or raise "
            "the limit (--checkpoint-rounds N), and resume; answer with: "
            + shlex.join(["looprail", "answer", ".", cp.task_id, "approved"])
        )
    return rounds


def _given(runner: CheckpointRun, cp: Checkpoint) -> _Got | None:
    opts, used = runner.options, runner.checkpoints.used_flags
    flagged = dict(opts.answers).get(cp.task_id)
    if flagged is not None and cp.task_id not in used:
        used.add(cp.task_id)
        meaning = interpret(cp, flagged)
        if meaning.problem:
            raise HaltError(f"--answer {cp.task_id}: {meaning.problem}")
        return _Got(flagged, "--answer", meaning, False)
    journaled = _journaled_answer(runner, cp)
    if journaled is not None:
        return journaled
    if cp.task_id in opts.approvals:
        return _approve(cp, "--approve")
    if (
        opts.autonomous
        and cp.gate != "blocking-human"
        and cp.kind in ("human-verify", "decision", "tdd-review")
    ):
        return _approve(cp, "--autonomous")
    return None


def _approve(cp: Checkpoint, source: str) -> _Got:
    """`--approve`/`--autonomous`: "approved", or a decision's first option (auto-mode)."""
    if cp.kind == "decision" and cp.options:
        first = cp.options[0].id
        return _Got(
            first, f"{source}: the first option", Interpreted(kind="chosen", option=first), False
        )
    return _Got("approved", source, Interpreted(kind="approved"), False)


def _journaled_answer(runner: CheckpointRun, cp: Checkpoint) -> _Got | None:
    e = latest(runner.recorder.kinds("checkpoint", "answer"), cp.task_id)
    if e is None or e.kind != "answer":
        return None
    kind = e.outcome if e.outcome != "withheld" else "secret"
    meaning = Interpreted.model_validate({"kind": kind, "option": e.data.get("option")})
    return _Got(e.message or "", str(e.data.get("source") or "journal"), meaning, True)


def _ask(runner: CheckpointRun, cp: Checkpoint, wave: int, *, again: bool = False) -> None:
    """Journal that the run waits on `cp` (not again while its last event says so)."""
    last = latest(runner.recorder.kinds("checkpoint", "answer"), cp.task_id)
    if last is not None and last.kind == "checkpoint" and not again:
        return
    runner.recorder.event(asked_record(cp, wave))


def _passed(
    runner: CheckpointRun, cp: Checkpoint, wave: int, source: str, meaning: Interpreted | None
) -> None:
    kind, option = (meaning.kind, meaning.option) if meaning is not None else (None, None)
    what = {"secret": "answered (answer withheld)", "value": "answered"}.get(kind or "", "approved")
    if kind == "chosen" and option:
        what = f"decided: {option}"
    runner.progress.line(f"  ✓ checkpoint {cp.task_id} {what} ({source})")
    runner.recorder.event(
        EventRecord(
            kind="task_finished",
            task_id=cp.task_id,
            plan_id=cp.plan_id,
            wave=wave,
            outcome="approved",
            message=source,
            data={"option": option} if option else {},
        )
    )


def _fixup(
    runner: CheckpointRun,
    plan: Plan,
    task: Task,
    cp: Checkpoint,
    issues: str,
    round_: int,
    wave: int,
    execute: ExecuteTask,
) -> None:
    """One executor call of the plan that fixes the issues the user described, verbatim,
    journaled as task `<plan>/<checkpoint>-fix<round>`. Deliberately not a `run_task`: no task
    of the plan, so no resolver, `read_first` check or `task_call`/`task_result` hooks."""
    short = task.id.rsplit("/", 1)[-1]
    action = (
        f"At checkpoint {task.id} ({cp.kind}) the user checked what was built and described "
        "these issues to fix, in their own words:\n\n"
        f"{issues}\n\n"
        "Fix them. The checkpoint is asked again once this call ends."
    )
    work = TaskWork(
        plan_id=plan.id,
        task_id=f"{short}-fix{round_}",
        index=task.index,  # its checkpoint's: asked again, it may make another call
        name=f"fix the issues found at checkpoint {task.id} (round {round_})",
        type="auto",
        files=tuple(plan.files_modified),
        action=action,
        verify=cp.how_to_verify or cp.verification,
        done="every issue the user described is fixed",
        plan_sections={"objective": (plan.objective or "").strip()} if plan.objective else {},
    )
    work = with_answers(runner, plan, work)
    runner.progress.line(f"  ↻ {task.id}: fix-up round {round_} for the issues described")
    outcome = runner.executor_call(plan, work, work.key, wave, execute, f"{work.key} {work.name}")
    if not outcome.ok:
        raise HaltError(
            f"{plan.path.name}: the fix-up for checkpoint {task.id} failed: {outcome.detail}"
        )


def may_call(plan: Plan, task: Task) -> bool:
    """Whether reaching `task` may make an executor call: any task but a checkpoint that cannot
    be answered with issues (a fix-up)."""
    return not task.is_checkpoint or takes_issues(checkpoint_of(plan, task))


def plan_answers(runner: CheckpointRun, plan_id: str) -> list[EventRecord]:
    """The plan's journaled answers, in order (a secret's message is "answer withheld")."""
    return [e for e in runner.recorder.kinds("answer") if e.plan_id == plan_id]


def _answers_text(answers: list[EventRecord]) -> str:
    parts = []
    for e in answers:
        kind = e.data.get("type", "checkpoint")
        if e.outcome == "withheld":
            head = f"{e.task_id} ({kind}): {WITHHELD} (a secret)"
        elif e.outcome == "issues":
            head = f"{e.task_id} ({kind}): issues to fix"
        elif e.outcome == "chosen" and e.data.get("option"):
            head = f"{e.task_id} ({kind}): chose option {e.data['option']}"
        else:
            head = f"{e.task_id} ({kind}): {e.outcome}"
        body = "" if e.outcome == "withheld" else f"\n\n{e.message or ''}"
        parts.append(f"#### {head}{body}")
    return "\n\n".join(parts)


def with_answers(runner: CheckpointRun, plan: Plan, work: TaskWork) -> TaskWork:
    """`work` with the plan's checkpoint answers so far in its plan sections."""
    answers = plan_answers(runner, plan.id)
    if not answers:
        return work
    text = _answers_text(answers)
    st = runner.checkpoints
    with st.lock:
        waiting = st.secrets.get(plan.id)
    if waiting is not None:
        text += (
            f"\n\nThe answer to {waiting[0]} is in the environment variable ${SECRET_ENV} of "
            "this call (and of no other): use it from there, never write it into a file."
        )
    return work.model_copy(update={"plan_sections": {**work.plan_sections, ANSWERS_KEY: text}})


def secret_env(runner: CheckpointRun, plan: Plan, dctx: DispatchContext) -> DispatchContext:
    """The next executor call of `plan` after a secret answer gets it in `$LOOPRAIL_CHECKPOINT_
    ANSWER`, once, its file removed; an executor that cannot carry it safely
    (`WaveExecutor.secret_refusal`) halts the run first, the secret kept for the resume."""
    st = runner.checkpoints
    with st.lock:
        waiting = st.secrets.get(plan.id)
    if waiting is None:
        return dctx
    executor = runner.options.executor
    refusal = executor.secret_refusal() if executor is not None else None
    if refusal is not None:
        raise HaltError(
            f"{plan.path.name}: the secret answer to checkpoint {waiting[0]} is not sent to "
            f"{dctx.plan_id}/{dctx.task_id}: {refusal}"
        )
    with st.lock:
        st.secrets.pop(plan.id, None)
    drop_secret(runner.project, runner.recorder.run_id, waiting[0])
    return dctx.model_copy(update={"env": {**dctx.env, SECRET_ENV: waiting[1]}})


def drop_plan_secret(runner: CheckpointRun, plan: Plan) -> None:
    """Forget (and remove the file of) the secret answer waiting for a plan that is done."""
    st = runner.checkpoints
    with st.lock:
        waiting = st.secrets.pop(plan.id, None)
    if waiting is not None:
        drop_secret(runner.project, runner.recorder.run_id, waiting[0])


def summary_lines(runner: CheckpointRun, plan: Plan) -> list[str]:
    """The plan SUMMARY's "Checkpoint answers" section (empty without answers)."""
    answers = plan_answers(runner, plan.id)
    if not answers:
        return []
    return ["", "## Checkpoint answers", "", _answers_text(answers)]


def _project_arg(runner: CheckpointRun) -> str:
    try:
        return (
            "." if runner.project == type(runner.project).cwd().resolve() else str(runner.project)
        )
    except OSError:
        return str(runner.project)


def _terminal() -> bool:
    """A person can answer here: stdin and stderr (where the checkpoint is shown) are a tty."""
    try:
        return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _wait(runner: CheckpointRun, plan: Plan, task: Task, cp: Checkpoint) -> _Got:
    with _TERMINAL:
        runner.progress.close()  # the live status area would draw over the question
        out = sys.stderr
        out.write("\n" + render(cp, _done_before(plan, task), len(plan.tasks)) + "\n")
        out.write(f"  or from elsewhere, {answer_hint(_project_arg(runner), cp)}\n")
        out.flush()
        while True:
            prompt = "secret (not echoed)> " if cp.secret else "answer> "
            got = _read(runner, plan, task, cp, prompt)
            if got.journaled:
                out.write(f"\n  answered from {got.source}\n")
                out.flush()
                return got
            if got.meaning.problem:
                out.write(f"  {got.meaning.problem}; asked again\n")
                out.flush()
                continue
            return got


def _read(runner: CheckpointRun, plan: Plan, task: Task, cp: Checkpoint, prompt: str) -> _Got:
    """One line from the terminal (no echo for a secret), or an answer journaled meanwhile."""
    fd = sys.stdin.fileno()
    saved = None
    if cp.secret:
        saved = termios.tcgetattr(fd)
        quiet = termios.tcgetattr(fd)
        quiet[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSADRAIN, quiet)
    sys.stderr.write(prompt)
    sys.stderr.flush()
    buf = b""
    try:
        while True:
            journaled = _journaled_answer(runner, cp)
            if journaled is not None:
                return journaled
            if stopping():  # Ctrl-C/SIGTERM while another thread waits here
                raise HaltError(f"checkpoint {cp.task_id}: stopped while waiting for an answer")
            ready, _, _ = select.select([fd], [], [], POLL_S)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:  # the terminal closed (Ctrl-D): pause as without one
                raise CheckpointPause(task, plan, hint=pause_hint(_project_arg(runner), cp))
            buf += chunk
            if b"\n" in buf or b"\r" in buf:
                line = buf.replace(b"\r", b"\n").split(b"\n", 1)[0].decode(errors="replace")
                if cp.secret:
                    sys.stderr.write("\n")
                return _Got(line.strip(), "terminal", interpret(cp, line), False)
    finally:
        if saved is not None:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _done_before(plan: Plan, task: Task) -> int:
    return sum(1 for t in plan.tasks if t.index < task.index)


def _rest_done(runner: CheckpointRun, plan: Plan, task: Task) -> bool:
    """Has every task after `task` in its plan finished (a resume needs no secret then)?"""
    done = runner.recorder.done_tasks()
    return all(t.id in done or t.is_checkpoint for t in plan.tasks if t.index > task.index)
