"""Opening the journal run a `looprail run` drives: the phase's unfinished run resumed (verified,
its orphans reaped, its role state recovered, its inputs compared) or a new one started."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprail.errors import LooprailError
from looprail.journal import diff_inputs, digest_inputs
from looprail.journal.inputs import changes_text
from looprail.machine.answers import drop_run_secrets
from looprail.machine.context import RunContext, RunOptions
from looprail.machine.native import NativeBridge
from looprail.machine.progress import Progress
from looprail.machine.session.load import Loaded, attach_run, read_plans
from looprail.machine.session.resume import Recovery, recover_role, recover_summaries
from looprail.machine.started_with import active_hooks, check_keeps_hooks, start_record
from looprail.runtime.process import Spawned, reap_spawned

if TYPE_CHECKING:
    from looprail.journal.recorder import Recorder
    from looprail.journal.writer import Journal, RunRow
    from looprail.machine.native import NativeInputs
    from looprail.plans import PhaseCache
    from looprail.runtime.base import Runtime


@dataclass(frozen=True)
class Session:
    """What `run_phase` was asked, resolved once, for the parts of a session to share."""

    loaded: Loaded
    phase: str  # the phase number as its folder names it
    phase_dir: Path
    runtime: Runtime
    options: RunOptions
    progress: Progress
    budget_usd: float | None
    budget_spent: float  # what the invocation spent before this run

    @property
    def where(self) -> tuple[Path, str]:
        return self.loaded.project, self.phase

    def context(
        self, recorder: Recorder, run_id: str | None, native: NativeInputs, usd: float, **more: Any
    ) -> RunContext:
        """The run's context: the runtime told about the run (`usd`: spent so far), its
        workspace attached, its native hooks bridged (`more`: the rest of `RunContext`)."""
        workspace = attach_run(
            self.loaded, self.runtime, self.progress, recorder, run_id, self.budget_usd, usd
        )
        bridge = None
        if native.hooks is not None:
            bridge = NativeBridge(
                native.hooks,
                native.queued,
                runtime=self.runtime,
                project=self.loaded.project,
                phase=self.phase,
                progress=self.progress,
                recorder=recorder,
                run_id=run_id,
            )
        more.setdefault("options", self.options)
        return RunContext(
            project=self.loaded.project,
            phase=self.phase,
            runtime=self.runtime,
            compiled=self.loaded.compiled,
            config=self.loaded.config,
            resolvers=self.loaded.resolvers,
            unloadable=self.loaded.unloadable,
            recorder=recorder,
            progress=self.progress,
            native=bridge,
            workspace=workspace,
            **more,
        )


@dataclass
class OpenedRun:
    """The journal run `run_phase` drives: resumed (`previous` is the run as it was) or new."""

    run_id: str
    previous: RunRow | None  # the journal's run record when resuming
    recovery: Recovery
    state: list[str] | None
    wave: int | None
    changes: list[str]
    phases: PhaseCache | None = None  # a new run's plans, read before it started


def open_run(
    jr: Journal,
    session: Session,
    *,
    resume: str | None,
    accept_changes: bool,
    new_run: bool,
    phases: PhaseCache | None = None,
    loop: Mapping[str, object] | None = None,
) -> OpenedRun:
    """Resume the run to resume, or start a new one; either way journal its inputs' digest."""
    loaded, phase, phase_dir = session.loaded, session.phase, session.phase_dir
    runtime, progress = session.runtime, session.progress
    previous = None
    if resume == "auto" and not new_run:
        previous = jr.unfinished_run(phase)
    elif resume not in (None, "auto"):
        previous = jr.find_run(resume)
        if not previous.resumable:
            raise LooprailError(f"run {previous.id} is {previous.status}; nothing to resume")
    if previous is not None and new_run:
        previous = None
    if previous is not None:  # before anything is touched: no gate is dropped by a resume
        hooks = active_hooks(loaded.compiled, loaded.config)
        check_keeps_hooks(previous, hooks, session.options.accepted_changes)
    recovery = Recovery()
    if previous is not None:
        # Before anything of this run is trusted or touched: was it written by this user?
        jr.verify_run(previous.id)
        reap_journaled_processes(jr, previous.id, progress)
        recovery = recover_role(loaded.project, phase_dir, previous.id, jr)
        if previous.status == "running":  # it crashed (a pause or halt finished its tasks)
            recover_summaries(loaded.project, phase_dir, previous.id, jr, recovery)
        for note in recovery.notes:
            progress.line(note)
    digest = digest_inputs(loaded.input_paths(phase_dir), loaded.project)
    if previous is not None:
        return _resume(jr, previous, recovery, digest, runtime, progress, accept_changes)
    return _start(jr, session, recovery, digest, new_run, phases, loop)


def _start(
    jr: Journal,
    session: Session,
    recovery: Recovery,
    digest: dict[str, str],
    new_run: bool,
    phases: PhaseCache | None,
    loop: Mapping[str, object] | None,
) -> OpenedRun:
    phase, options = session.phase, session.options
    if phases is None:  # before anything is journaled
        phases = read_plans(*session.where)
    if new_run:
        old = jr.unfinished_run(phase)
        if old is not None:
            jr.finish_run(old.id, "failed", "abandoned: a new run was started with --new")
            drop_run_secrets(session.loaded.project, old.id)
    run_id = jr.start_run(
        phase,
        state=["idle"],
        machine_config={
            "flavor": options.flavor,
            "jobs": options.jobs,
            "autonomous": options.autonomous,
            "agent": session.runtime.describe().name,
            **start_record(
                session.loaded.capability_dirs,
                options.host_tool,
                active_hooks(session.loaded.compiled, session.loaded.config),
            ),
            **({"loop": loop} if loop else {}),
        },
        inputs_digest=digest,
    )
    session.progress.line(f"run {run_id}: phase {phase} of {session.loaded.project}")
    return OpenedRun(run_id, None, recovery, None, None, [], phases)


def _resume(
    jr: Journal,
    previous: RunRow,
    recovery: Recovery,
    digest: dict[str, str],
    runtime: Runtime,
    progress: Progress,
    accept_changes: bool,
) -> OpenedRun:
    """Resume `previous`: a crashed run whose inputs changed (beyond what its recovery excuses)
    needs `--accept-changes`."""
    changes = [c for c in diff_inputs(previous.inputs_digest, digest) if not recovery.excuses(c)]
    crashed = previous.status == "running"
    if changes and crashed and not accept_changes:
        raise LooprailError(
            f"run {previous.id} was interrupted and its inputs changed since "
            f"({changes_text(changes)}); resume with --accept-changes, "
            "or start over with --new"
        )
    was = previous.machine_config.get("agent")
    now = runtime.describe().name
    if was and was != now:
        progress.warn(f"run {previous.id} was started with agent {was}; resuming with {now}")
    run = jr.resume_run(previous.id, inputs_digest=digest)
    starts = jr.events(run.id, kinds=["transition"])
    waves = [e.wave for e in starts if e.data.get("event") == "start_wave" and e.wave is not None]
    state, wave = run.state, (waves[-1] if waves else None)
    progress.line(
        f"resuming run {run.id} (was {previous.status}) at {'/'.join(state) or 'idle'}"
        + (f"; inputs changed: {changes_text(changes)}" if changes else "")
    )
    return OpenedRun(run.id, previous, recovery, state, wave, changes)


def spent_usd(jr: Journal, run_id: str) -> float:
    costs = (e.data.get("costUsd") for e in jr.events(run_id, kinds=["agent_call"]))
    return sum((float(c) for c in costs if isinstance(c, (int, float))), 0.0)


def reap_journaled_processes(jr: Journal, run_id: str, progress: Progress) -> None:
    """Kill each journaled child and guard of the run's killed process still running."""
    killed: list[int] = []
    for event in jr.events(run_id, kinds=["process"]):
        try:
            spawned = Spawned(**event.data)
        except TypeError:
            continue
        killed += reap_spawned(spawned)
    if killed:
        progress.line(
            f"stopped {len(killed)} process(es) left running by the interrupted run: "
            + ", ".join(str(p) for p in killed)
        )


def approved_checkpoints(jr: Journal, run_id: str) -> frozenset[str]:
    return frozenset(
        e.task_id
        for e in jr.events(run_id, kinds=["task_finished"])
        if e.outcome == "approved" and e.task_id
    )
