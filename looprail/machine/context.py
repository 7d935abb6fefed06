"""What one run of the loop is given (`RunContext`, built once and frozen: the runner never
patches it), what it gives back (`RunResult`), and what its helpers may ask of the runner."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from looprail.errors import CheckpointPause, StopRequested, TaskContentError, TransitionRefused
from looprail.journal.recorder import MemoryRecorder, Recorder
from looprail.machine import guards as G
from looprail.machine.progress import Progress
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec
from looprail.machine.workspace import NullWorkspace
from looprail.runtime.base import Flavor

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet
    from looprail.machine.chart import TaskChart
    from looprail.machine.dispatch import Dispatcher
    from looprail.machine.native import NativeBridge
    from looprail.plans import Phase, PhaseCache, Plan
    from looprail.runtime.base import DispatchContext, Outcome, Runtime, TaskWork
    from looprail.runtime.executors import Settled

RunStatus = Literal["shipped", "halted", "paused"]

# Where a task's body runs: the run's runtime here, or an executor's worker elsewhere.
ExecuteTask = Callable[["TaskWork", "DispatchContext"], "Outcome"]


@dataclass
class CheckpointState:
    """What a runner keeps in memory about checkpoints (never journaled)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    used_flags: set[str] = field(default_factory=set)  # --answer values already taken
    # plan id → (checkpoint task id, secret): for the plan's next executor call only
    secrets: dict[str, tuple[str, str]] = field(default_factory=dict)


class CheckpointRun(Protocol):
    """What a checkpoint needs of the run (`LoopRunner` is one; `machine/checkpoint.py`): a
    fix-up is one `executor_call`, as a task's body is."""

    @property
    def project(self) -> Path: ...
    @property
    def config(self) -> Mapping[str, object] | None: ...
    @property
    def options(self) -> RunOptions: ...
    @property
    def recorder(self) -> Recorder: ...
    @property
    def progress(self) -> Progress: ...

    phase: Phase
    checkpoints: CheckpointState

    def executor_call(
        self, plan: Plan, work: TaskWork, key: str, wave: int, execute: ExecuteTask, label: str
    ) -> Outcome: ...


class PlanRunner(CheckpointRun, Protocol):
    """What an executor is handed to run a wave's plans: the run's one task protocol
    (`LoopRunner.run_plan`, over a chart from `plan_chart`)."""

    dispatcher: Dispatcher

    def plan_chart(self, plan: Plan, wave: int) -> TaskChart: ...

    def run_plan(
        self,
        plan: Plan,
        wave: int,
        done: set[str],
        chart: TaskChart | None = None,
        execute: ExecuteTask | None = None,
    ) -> None: ...


class WaveExecutor(Protocol):
    """Runs a wave's plans elsewhere (e.g. `DaskExecutor`), each through `PlanRunner.run_plan`."""

    def run_wave(
        self, runner: PlanRunner, wave: int, plans: Sequence[Plan], done: set[str]
    ) -> list[Settled[None]]: ...

    def secret_refusal(self) -> str | None:
        """Why a secret checkpoint answer must not go where a task's body runs (None: it may)."""
        ...


@dataclass(frozen=True)
class RunOptions:
    flavor: Flavor = "gsd"
    jobs: int = 1
    autonomous: bool = False
    approvals: frozenset[str] = frozenset()
    host_tool: str | None = None
    approved_earlier: frozenset[str] = frozenset()  # checkpoints approved before a resume
    answers: tuple[tuple[str, str], ...] = ()  # `--answer TASK=TEXT` (machine/checkpoint.py)
    checkpoint_rounds: int | None = None  # fix-up rounds; None: looprail.checkpoint_rounds
    interactive: bool | None = None  # `run --interactive`; None: looprail.interactive decides
    executor: WaveExecutor | None = None  # None: threads here, `jobs` at a time
    accepted_changes: frozenset[str] = frozenset()  # `--accept-changes`: hooks a resume may drop


@dataclass
class RunResult:
    status: RunStatus
    state: list[str]
    reason: str | None = None
    refused_by: G.HookResult | None = None
    tasks_run: int = 0
    duration_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    waves_run: int = 0
    hooks_dispatched: int = 0
    unverified: list[str] = field(default_factory=list)  # tasks no check checked, in run order

    @property
    def exit_code(self) -> int:
        return {"shipped": 0, "halted": 1, "paused": 3}[self.status]


@dataclass(frozen=True)
class RunContext:
    """Everything one run of one phase is given. `resolvers`: every loaded capability's
    `taskContentResolver` (`unloadable`: those that must not run); `on_transition` is told the
    state after each transition and after a role wrote artifacts. A resumed run starts in
    `state`, inside `wave`, and does the steps in `redo_steps` again (their role was killed)."""

    project: Path
    phase: str
    runtime: Runtime
    compiled: CapabilitySet
    config: Mapping[str, object] | None = None
    resolvers: Sequence[tuple[str, Any]] = ()
    unloadable: Sequence[Any] = ()
    options: RunOptions = field(default_factory=RunOptions)
    recorder: Recorder = field(default_factory=MemoryRecorder)
    progress: Progress = field(default_factory=lambda: Progress(quiet=True))
    spec: LoopSpec = DEFAULT_LOOP
    native: NativeBridge | None = None
    workspace: NullWorkspace = field(default_factory=NullWorkspace)  # machine/workspace.py
    phases: PhaseCache | None = None
    on_transition: Callable[[list[str]], None] | None = None
    state: Sequence[str] | None = None
    wave: int | None = None
    redo_steps: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "project", Path(self.project).resolve())


def run_ending(exc: BaseException) -> tuple[RunStatus, str, G.HookResult | None]:
    """How a run that stopped on `exc` ends: its status, the reason, the refusing hook."""
    if isinstance(exc, TransitionRefused):
        return "halted", str(exc), exc.result
    if isinstance(exc, CheckpointPause):
        return "paused", str(exc), None
    if isinstance(exc, StopRequested):
        return exc.status, str(exc), None
    if isinstance(exc, TaskContentError):
        return "halted", f"execute:task resolver failed: {exc}", None
    if isinstance(exc, OSError):  # a file of the project vanished or became unreadable mid-run
        where = f"{exc.filename}: " if exc.filename else ""
        return "halted", f"{where}{exc.strerror or exc}", None
    return "halted", str(exc), None
