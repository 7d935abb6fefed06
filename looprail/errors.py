"""Every exception looprail raises, in one tree.

A `LooprailError`'s `str()` is one line (file, field, reason); the CLI prints it without a
traceback and exits with its `exit_code`. `path`, `field` and `point` carry the same context.

    LooprailError (exit 1)                 base of every error raised on purpose
    ├── UsageError (exit 2)                the command line itself is wrong
    ├── RefusedToStart                     `run` found bad input before it journaled anything
    ├── AnswerRefused                      an answer to a checkpoint that cannot be right
    ├── InvalidFileError                   problems in a supplied file, all kept (`issues`)
    │   └── ManifestError                  a capability manifest or the merged set
    ├── ConfigError                        .planning/config.json cannot be used
    ├── PlanError                          a PLAN.md, the phase layout or the plan DAG
    │   └── OutsideProjectError            a path in the project leads out of it (a symlink)
    ├── InvalidPointError                  not one of the loop points
    ├── LedgerError                        a ledger artifact is malformed
    ├── TrustError                         cannot be consented to; the store cannot be written
    ├── TaskContentError                   `execute:task` content could not be resolved
    ├── CheckFailedError (exit 1 or 69)    a check produced no verdict (69: could not look)
    ├── LockedError                        another live run holds the project
    ├── JournalError                       the journal cannot be used as it is
    │   └── NoJournalError                 the project has no journal yet
    ├── SealError                          the user's journal key cannot be used
    ├── GraphvizMissingError               SVG/PNG asked for without Graphviz's `dot`
    └── HaltError                          the loop stopped on purpose
        ├── TransitionRefused              a hook result refused a transition (`result`)
        ├── GuardRefused                   a plan-fact guard refused a transition (`guard`)
        ├── MergeConflict                  a plan's worktree branch did not merge back
        └── BudgetReached                  the run spent its `--budget-usd` (resumable)

    LoopSignal                             control flow inside the runner, never a user error
    ├── CheckpointPause (exit 3)           a checkpoint task needs a human
    └── StopRequested                      a native `interrupt`/`shutdown`, at a safe point

`ConfigError`, `InvalidPointError` and `LedgerError` are also `ValueError`s.
"""

# No `from __future__ import annotations`: `Issue` is a typed named tuple, whose field types
# are read at run time (a string annotation would be compiled into a `typing.ForwardRef`).
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple

from looprail.points import invalid_point_message
from looprail.textsafe import one_line as escape_untrusted


class LooprailError(Exception):
    """Base of every error looprail raises on purpose (bad input, refused work)."""

    exit_code = 1
    path: str | None = None  # the file the error is about
    field: str | None = None  # a JSON path or dotted config key inside it
    point: str | None = None  # the loop point

    def __init__(
        self,
        message: str = "",
        *,
        path: str | None = None,
        field: str | None = None,
        point: str | None = None,
    ):
        super().__init__(message)
        if path is not None:
            self.path = path
        if field is not None:
            self.field = field
        if point is not None:
            self.point = point


class UsageError(LooprailError):
    """The command line itself is wrong (missing option, bad value)."""

    exit_code = 2


class RefusedToStart(LooprailError):
    """An input a run reads up front is unusable; nothing was journaled. A refusal, not a
    usage error: exit 1 (2 is kept for a command line that is itself wrong)."""


class Issue(NamedTuple):
    """One validation problem: where (file + JSON path) and why."""

    file: str
    path: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        return f"{where}: {self.reason}"


def json_path(loc: Iterable[str | int], root: str = "$") -> str:
    """The JSON path an `Issue` names: `$.steps[0].fragment`, `$.local["my-hook"].event`.
    `loc` is a pydantic error's `loc` or any keys and indexes (pydantic's `[key]` marker for a
    dict key is left out; `$schema` is spelled as people write it)."""
    path = root
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "$schema" or (part.isascii() and part.isidentifier()):
            path += f".{part}"
        elif part != "[key]":
            path += f"[{json.dumps(part)}]"
    return path


class AnswerRefused(LooprailError):
    """An answer to a checkpoint that cannot be right; refused before anything is recorded
    (exit 1, as every refusal)."""


class InvalidFileError(LooprailError):
    """Problems in a supplied file, all kept in `issues`; `str()` is the first plus a count.
    (Not named `ValidationError`: that is pydantic's.)"""

    def __init__(self, issues: Sequence[Issue]):
        if not issues:
            raise ValueError(f"{type(self).__name__} needs at least one issue")
        self.issues = list(issues)
        more = len(self.issues) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        first = self.issues[0]
        super().__init__(f"{first}{suffix}", path=first.file, field=first.path or None)


class ManifestError(InvalidFileError):
    """A capability manifest (or the merged set) is invalid."""


class PlanError(LooprailError):
    """A PLAN.md, the phase layout or the plan DAG is invalid."""


class OutsideProjectError(PlanError):
    """A project path leads out of the project through a symlink, or is not the regular file
    it must be: refused before a byte is read or written there."""


class ConfigError(LooprailError, ValueError):
    """`.planning/config.json` exists but cannot be used (line and column, or `field`)."""

    def __init__(
        self,
        path: str,
        reason: str,
        line: int | None = None,
        col: int | None = None,
        *,
        field: str | None = None,
    ):
        self.reason, self.line, self.col = reason, line, col
        where = f"{path}:{line}:{col}" if line is not None else path
        super().__init__(f"{where}: {reason}", path=path, field=field)


class InvalidPointError(LooprailError, ValueError):
    """Not one of the loop points; the message lists the valid ones (the reference's words)."""

    def __init__(self, point: str):
        super().__init__(invalid_point_message(point), point=point)


class LedgerError(LooprailError, ValueError):
    """A ledger artifact is malformed (the reference's messages)."""


class TrustError(LooprailError):
    """Something cannot be consented to, or the consent store cannot be written."""


class TaskContentError(LooprailError):
    """Task content could not be resolved: a hard halt, never a fallback to the inline plan.
    The resolver's stderr tail is escaped (untrusted text)."""

    def __init__(
        self,
        tracker_id: str,
        prefix: str,
        cap_ids: Sequence[str],
        reason: str,
        stderr_tail: str = "",
    ):
        self.tracker_id = tracker_id
        self.prefix = prefix
        self.cap_ids = list(cap_ids)
        self.reason = reason
        self.stderr_tail = stderr_tail
        caps = ", ".join(escape_untrusted(c) for c in self.cap_ids) or "none"
        label = "capability" if len(self.cap_ids) == 1 else "capabilities"
        message = (
            f"task content for tracker-id '{escape_untrusted(tracker_id)}' "
            f"(prefix '{escape_untrusted(prefix)}', {label} {caps}): {reason}"
        )
        if stderr_tail.strip():
            message += f"; stderr: {escape_untrusted(stderr_tail.strip())}"
        super().__init__(message, point="execute:task")


class CheckFailedError(LooprailError):
    """The CLI form of a `hooks.gates.checks.CheckError`, with its exit code."""

    def __init__(self, error: Any):
        super().__init__(error.reason)
        self.error = error
        self.exit_code = error.exit_code


class LockedError(LooprailError):
    """Another live process is running this project's loop."""

    def __init__(self, path: Any, holder: Any):
        self.holder = holder
        who = holder.describe() if holder else "holder details not written yet"
        super().__init__(
            f"{path}: another looprail run holds this project ({who}); "
            "wait for it to finish or stop that process"
        )
        self.path = path  # the lock file, as given (a Path)


class JournalError(LooprailError):
    """The journal cannot be used as it is, or holds no such run or task."""


class NoJournalError(JournalError):
    """The project has no journal yet (opened with `create=False`)."""


class SealError(LooprailError):
    """The user's journal key cannot be used (unsafe permissions, unreadable)."""


class GraphvizMissingError(LooprailError):
    """SVG or PNG was asked for and the `dot` program is not on PATH."""

    INSTALL_HINT = (
        "the Graphviz `dot` program is not installed (needed for svg and png): "
        "install it with `apt-get install graphviz` or `brew install graphviz`, "
        "or use --format dot or --format mermaid"
    )

    def __init__(self) -> None:
        super().__init__(self.INSTALL_HINT)


class HaltError(LooprailError):
    """The loop stopped on purpose: a blocking gate, a failed mandatory action, `onError: halt`."""


class TransitionRefused(HaltError):
    """A transition refused by a hook result (`.result`); the state is unchanged."""

    def __init__(self, result: Any):
        self.result = result
        point, cap, message = result.point, result.cap_id, result.message
        if result.kind == "gate" and result.status == "error":
            text = f"gate check failed at {point} ({cap}): {message}"
        elif result.kind == "gate":
            text = f"blocked at {point} by gate {cap}: {result.shown}"
        elif result.kind == "native":
            text = f"blocked at {point} by native hook {cap} ({message or 'block'})"
        else:
            text = f"halted at {point}: step {result.label} ({cap}) failed: {message}"
        super().__init__(text, point=point)


class GuardRefused(HaltError):
    """A transition refused by a plan-fact guard (`.guard`, None when the chart gave no
    reason); the state is unchanged."""

    def __init__(self, event: str, guard: str | None, reason: str):
        self.event = event
        self.guard = guard
        super().__init__(f"{event}: {reason}")


class MergeConflict(HaltError):
    """Merging a plan's branch back conflicted; the message names plans and files."""


class BudgetReached(HaltError):
    """Spent ≥ budget: no more agent work starts in this run (resumable)."""


class LoopSignal(Exception):
    """Base of the runner's control-flow signals (never a `LooprailError`)."""

    exit_code = 1


class CheckpointPause(LoopSignal):
    """A checkpoint task needs a human: the loop pauses (resume with `--approve TASK`)."""

    exit_code = 3

    def __init__(self, task: Any, plan: Any, *, hint: str):
        """`hint`: how to go on, the commands quoted (`machine.commands.pause_hint`)."""
        self.task = task
        self.plan = plan
        self.path = str(plan.path)
        gate = f", gate={task.gate}" if task.gate else ""
        super().__init__(
            f"{plan.path.name}: task {task.id} ({task.type}{gate}) "
            f"{task.name or ''!s} needs a human; {hint}"
        )


class StopRequested(LoopSignal):
    """A native `interrupt` (paused) or `shutdown` (halted), taken at a safe point."""

    def __init__(self, status: Literal["halted", "paused"], reason: str):
        self.status: Literal["halted", "paused"] = status
        super().__init__(reason)
