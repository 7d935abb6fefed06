"""The journal's data shapes (what callers append and read back), run ids and times."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field

EventKind = Literal[
    "run_started",
    "run_resumed",
    "transition",
    "point",
    "hook",
    "gate_verdict",
    "resolver",
    "read_first",
    "task_started",
    "task_finished",
    "wave_started",
    "wave_finished",
    "warning",
    "halted",
    "run_finished",
    "native_hook",
    "native_selection",
    "agent_call",
    "contribution",
    "role_started",
    "role_finished",
    "process",
    "checkpoint",
    "answer",
    "check",
]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)

HookKind = Literal["step", "contribution", "gate", "native"]
# How the journal records a run (`machine.runner.RunStatus` is only how a finished run ended).
JournalRunStatus = Literal["running", "halted", "shipped", "failed", "paused"]
TaskStatus = Literal["pending", "running", "done", "failed"]

# A run in one of these can be resumed; `shipped` and `failed` are final.
RESUMABLE_STATUSES: tuple[str, ...] = ("running", "paused", "halted")
FINAL_STATUSES: tuple[str, ...] = ("shipped", "failed")


class EventRecord(BaseModel):
    """One journal entry as a caller writes it. The columns are the facts a report filters on;
    everything else goes in `data` (JSON). Which fields each kind uses is in docs/journal.md."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    kind: EventKind
    point: str | None = None
    wave: int | None = None
    plan_id: str | None = None
    task_id: str | None = None
    cap_id: str | None = None
    hook_kind: HookKind | None = None
    outcome: str | None = None
    duration_ms: int | None = Field(default=None, ge=0)
    message: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class EventRow(EventRecord):
    """An event as stored: the record plus its position (`seq`), run and UTC timestamp."""

    seq: int
    run_id: str
    ts: str


class TaskUpdate(BaseModel):
    """A change to one task row, in the same transaction as its event. `running` starts an
    attempt (+ 1, even from `running`: an in-flight task re-run after a crash); `done`/`failed`
    end it; `pending` (re)queues it. `plan_id`/`wave` of None keep the row's."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    task_key: str = Field(min_length=1)
    status: TaskStatus
    plan_id: str | None = None
    wave: int | None = None
    attempt: int | None = Field(default=None, ge=1)


class PlannedTask(NamedTuple):
    """A task known at wave start, registered as `pending` by `wave_started`."""

    task_key: str
    plan_id: str | None = None


class RunRow(BaseModel):
    """One row of the journal's `runs` table."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    id: str
    phase: str
    status: JournalRunStatus
    started_at: str
    ended_at: str | None
    state: list[str]
    machine_config: dict[str, object]
    inputs_digest: dict[str, str]
    pid: int | None
    host: str | None
    halt_reason: str | None

    @property
    def resumable(self) -> bool:
        return self.status in RESUMABLE_STATUSES


class TaskRow(BaseModel):
    """One row of the journal's `tasks` table."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    run_id: str
    task_key: str
    plan_id: str | None
    wave: int | None
    status: TaskStatus
    attempt: int
    started_at: str | None
    ended_at: str | None


_RUN_ID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32


def new_run_id(now: datetime | None = None) -> str:
    """A ULID: 48-bit millisecond time + 80 random bits, Crockford base32, so ids sort by start."""
    moment = now or datetime.now(UTC)
    value = (int(moment.timestamp() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_RUN_ID_ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5))


def is_run_id(value: object) -> bool:
    """Is `value` a run id as `new_run_id` makes them? An id read from a journal may be
    planted: one that is not looprail's never reaches a path or a printed command."""
    return (
        isinstance(value, str)
        and len(value) == 26
        and value[0] <= "7"
        and all(c in _RUN_ID_ALPHABET for c in value)
    )


def iso_utc(moment: datetime) -> str:
    """`2026-05-09T07:35:25.123Z`: fixed width, so text order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
