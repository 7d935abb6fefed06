"""What the Dask executor's two sides share (neither `distributed` nor the runner needed): a
plan's job, the names its messages travel under, how a worker's change is merged."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from looprail.errors import HaltError
from looprail.fsutil import atomic_write
from looprail.layout import LOOPRAIL_DIR

if TYPE_CHECKING:
    from looprail.runtime.base import Flavor, Runtime

# Never copied into a worker's copy, never part of a change: looprail's own state.
SKIP = {LOOPRAIL_DIR, ".git"}


def plan_topic(channel: str, plan_id: str) -> str:
    """The event topic a plan's reports go to (one per plan: the scheduler keeps a bounded
    number of events per topic, and a rerun reads its plan's)."""
    return f"{channel}-{plan_id}"


def step_name(channel: str, plan_id: str, step: int) -> str:
    """The Dask `Variable` that hands a plan's worker its step `step` (1, 2, ...; step 0 travels
    in the job). Not a queue: a rerun elsewhere reads its lost attempt's step again."""
    return f"{plan_topic(channel, plan_id)}-step-{step}"


class Step(TypedDict, total=False):
    """One step for a plan's worker: a call to run (`task` its id, e.g. "T3" or "T2-fix1";
    `more`: another call may follow; `env`: a secret checkpoint answer for this call only), or
    `end`: the plan has no more calls."""

    task: str
    work: Mapping[str, object]
    more: bool
    env: dict[str, str]
    context: list[str]
    end: bool


class Report(TypedDict, total=False):
    """What a worker reports on its plan's topic: `event` "attempt" (`n`), "started" (`task`,
    `retry`) or "finished" (the rest)."""

    plan: str
    event: str
    n: int
    task: str
    retry: bool
    ok: bool
    outcome: dict[str, object]
    logs: list[str]
    changes: dict[str, bytes | None]
    worker: str


class PlanDone(TypedDict):
    """What a plan's worker returns: whether its tasks ran, and which finished."""

    plan: str
    ok: bool
    done: list[str]


@dataclass(frozen=True)
class PlanJob:
    """One plan for a worker (pickled to it); `first` its first step (`step_name`: the rest)."""

    channel: str
    source: str
    phase_number: str
    phase_dir: str
    flavor: Flavor
    plan_id: str
    wave: int
    # Its `env` may hold a secret: kept out of the repr a worker logs of a failed task.
    first: Step = field(repr=False)
    host_tool: str | None = None
    timeouts: dict[str, float] | None = None
    runtime_factory: Callable[[Path], Runtime] | None = None
    pool: str = ""  # the worker plugin keeping project copies ("" or absent: a copy per plan)


_apply_lock = threading.Lock()


def apply_changes(project: Path, changes: Mapping[str, bytes | None]) -> None:
    """Write a task's change into `project` (the orchestrator's merge), inside it only."""
    root = Path(project).resolve()
    with _apply_lock:
        for rel, data in changes.items():
            target = (root / rel).resolve()
            if not target.is_relative_to(root) or rel.split("/")[0] in SKIP:
                raise HaltError(f"{rel}: a worker's change points outside the project")
            if data is None:
                target.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, data)
