"""Running a phase end to end: load everything a run needs, take the project's run lock, open
(or resume) the journal run, drive the `LoopRunner`, and close the run with its final status.

This is the function the CLI's `looprail run` / `looprail resume` and the pytest plugin call.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprail.config import load_project_config_strict
from looprail.errors import ConfigError, LooprailError, PlanError, RefusedToStart, UsageError
from looprail.fsutil import check_looprail_folders, project_folder, require_inside
from looprail.hooks.registry import load_registry, search_roots
from looprail.hooks.startup import blockers
from looprail.hooks.task_content import unloadable_resolvers
from looprail.layout import PLANNING_DIR, PROJECT_CONFIG_FILE
from looprail.machine.native import load_bridge, read_native_inputs
from looprail.machine.progress import Progress
from looprail.machine.record import JournalRecorder, MemoryRecorder
from looprail.machine.resume import Recovery, recover_role, recover_summaries, replay_role_context
from looprail.machine.run import LoopRunner, RunOptions, RunResult
from looprail.machine.workspace import GitWorkspace, NullWorkspace
from looprail.plans import find_phase
from looprail.plans.phase import PhaseCache
from looprail.runtime.agents import ADAPTERS
from looprail.runtime.base import RunStart
from looprail.runtime.meter import Meter
from looprail.runtime.process import Spawned, reap_spawned, set_spawn_listener
from looprail.runtime.registry import RuntimeSettings, agent_name, agent_section, create_runtime
from looprail.settings import LooprailSettings, looprail_settings
from looprail.store import Journal, RunLock, diff_inputs, digest_inputs
from looprail.store.journal import journal_path
from looprail.store.models import EventRecord
from looprail.trust import load_compiled
from looprail.trust.agents import effective_agent

if TYPE_CHECKING:
    from looprail.hooks.registry import CompiledRegistry, Registry
    from looprail.runtime.base import Runtime
    from looprail.store.journal import RunRow


@dataclass
class Loaded:
    """Everything loaded from a project and its capability search path."""

    project: Path
    compiled: CompiledRegistry
    registry: Registry
    config: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)

    @property
    def resolvers(self) -> list[tuple[str, Any]]:
        """Every loaded capability's resolver, as the reference does (installed, not gated by
        `activationKey`: execute:task has no `when`) — except one without the user's consent."""
        caps = self.compiled["caps"]
        return [
            (cid, r)
            for cid, r in self.registry.task_content_resolvers()
            if cid in caps and caps[cid].get("consent") is not False
        ]

    @property
    def unloadable(self) -> list[Any]:
        """Resolvers that exist but must not run: their capability failed to load, or is a
        project capability without consent. A task with their prefix halts (never a silent
        fallback to the inline plan)."""
        caps = self.compiled["caps"]
        unconsented = [
            (cid, r.trackerPrefix, "no consent for this project capability (run `looprail trust`)")
            for cid, r in self.registry.task_content_resolvers()
            if cid in caps and caps[cid].get("consent") is False
        ]
        served = {
            r.trackerPrefix: self.registry.capabilities[cid].origin for cid, r in self.resolvers
        }
        if not self.registry.failed:  # the usual case: no need to import the resolver module
            return unconsented

        return unloadable_resolvers(self.registry.failed, served) + unconsented

    @property
    def blockers(self) -> list[Any]:
        """Why `looprail run` must not start (`looprail.hooks.startup`): a missing first-party
        folder, a capability that failed to load, an unconsented project capability's gates."""
        return blockers(self.registry, self.compiled)

    def input_paths(self, phase_dir: Path | None) -> list[Path]:
        """What a run depends on: capability folders, the config, the phase's plans."""
        paths = [lc.source for lc in self.registry.capabilities.values()]
        paths.append(self.project / PROJECT_CONFIG_FILE)
        if phase_dir is not None:
            paths += sorted(phase_dir.glob("*-PLAN.md"))
        return paths


def load_project(project: str | Path, capability_dirs: Sequence[str | Path] = ()) -> Loaded:
    """Load a project (a folder with `.planning/`) and its capabilities for `run_phase`.

    `capability_dirs` are first-party capability folders (or folders of them), searched before
    the global and project overlays. A malformed `.planning/config.json`, or a `.looprail/` or
    `.planning/` that leads out of the project, raises a `LooprailError`; a capability that
    fails to load is left out and named in `Loaded.warnings`."""
    root = project_folder(project)
    if not (root / PLANNING_DIR).is_dir():
        raise UsageError(f"{project}: not a project (no .planning/ folder)")
    root = root.resolve()

    # The journal, lock, logs, worktrees, agents and queued messages live under .looprail/: a
    # symlink out of the project (of it or of a folder in it) would make a run write (and read
    # its state) elsewhere.
    check_looprail_folders(root)
    require_inside(root, root / PLANNING_DIR, "the folder")
    config = load_project_config_strict(root)  # a malformed config stops the run
    warnings: list[str] = []
    # The capabilities are read once: the compiled form is the cache's, or (on a miss) compiled
    # from this registry, whose roots are the absolute folders the cache is keyed by.
    roots = search_roots(root, capability_dirs, absolute=True)
    registry = load_registry(root, roots=roots, config=config)
    compiled = load_compiled(root, capability_dirs, registry=registry)
    warnings += list(registry.warnings)
    for failed in registry.failed:
        warnings.append(
            f"capability {failed.id!r} ({failed.origin}) not loaded: {failed.issues[0]}"
        )
    return Loaded(root, compiled, registry, config, warnings)


@dataclass
class SessionResult:
    result: RunResult
    run_id: str | None
    resumed: bool = False
    changes: list[str] = field(default_factory=list)


def run_phase(
    loaded: Loaded,
    phase: str,
    *,
    runtime: Runtime | None = None,
    options: RunOptions | None = None,
    progress: Progress | None = None,
    journal: bool = True,
    resume: str | None = "auto",
    accept_changes: bool = False,
    new_run: bool = False,
    agent: str | None = None,
    budget_usd: float | None = None,
    loop: dict[str, Any] | None = None,
    budget_spent: float = 0.0,
) -> SessionResult:
    """Run (or resume) `phase`. `resume`: "auto" resumes an unfinished run of this phase, a run
    id resumes that run, None never resumes. With `journal=False` nothing is written. `loop`:
    the project loop this run is part of (`{"through": N}` or `{"all": True}`), journaled with
    a new run's machine config so `looprail resume` can go on with the phases after it.
    `budget_spent`: what the invocation spent before this run, counted against `budget_usd`
    (the budget of `run --all` spans its phases)."""
    options = options or RunOptions()
    progress = progress or Progress()
    found = find_phase(loaded.project, phase)
    phase, phase_dir = found.number, found.dir  # "01" and "1" are one phase in the journal
    if runtime is None:
        runtime = make_runtime(loaded, options, progress, agent=agent)
    for w in loaded.warnings:
        progress.warn(w)
    if not journal:
        return _run_unjournaled(loaded, phase, runtime, options, progress, budget_usd, budget_spent)

    with RunLock(loaded.project) as lock:
        # Everything the run reads up front is read and checked before the journal is opened:
        # bad input stops here (exit 2) with nothing journaled, not as a failed run.
        native = read_run_inputs(loaded, progress, runtime)
        # No journal yet: this is a new run, whose plans are checked before the journal exists.
        phases = (
            None if journal_path(loaded.project).exists() else read_plans(loaded.project, phase)
        )
        with Journal.open(loaded.project) as jr:
            opened = _open_run(
                jr,
                loaded,
                phase,
                phase_dir,
                runtime,
                options,
                progress,
                resume=resume,
                accept_changes=accept_changes,
                new_run=new_run,
                phases=phases,
                loop=loop,
            )
            lock.set_run_id(opened.run_id)
            runner, recorder = _build_runner(
                jr,
                loaded,
                phase,
                phase_dir,
                runtime,
                options,
                progress,
                opened,
                budget_usd,
                native,
                budget_spent,
            )
            try:
                result = _run_with_signals(runner, recorder, jr, opened.run_id)
                return _close_run(jr, recorder, opened, result)
            finally:
                # The recorder's flusher thread never outlives the journal. After the flush
                # of a normal end there is nothing left; after an unexpected error what is
                # still held (task starts, hook events) is lost as in a crash.
                recorder.close()
                runtime.end_run()


def read_run_inputs(loaded: Loaded, progress: Progress, runtime: Runtime | None = None) -> Any:
    """Read and check what a run reads before it does anything: the native hooks and their
    `nextTurn` queue (`.looprail/next-turn.json`), the `looprail` section of the config, and
    whether the runtime can run at all (an agent CLI on PATH: `unready()`). Raises
    `RefusedToStart` (exit 2), one line naming the file or program, the field and the reason.
    Returns the native inputs, for the run to use as read here."""
    run_settings(loaded)  # the `looprail` section, checked before anything runs
    # The config first (a file to fix), then whether the runtime can run at all.
    why = runtime.unready() if runtime is not None else None
    if why:
        raise RefusedToStart(f"{why}; the run did not start")
    return read_native_inputs(loaded.project, progress)


def _run_unjournaled(
    loaded: Loaded,
    phase: str,
    runtime: Runtime,
    options: RunOptions,
    progress: Progress,
    budget_usd: float | None,
    budget_spent: float = 0.0,
) -> SessionResult:
    """`journal=False`: the run records in memory and writes nothing."""
    native = read_run_inputs(loaded, progress, runtime)
    phases = read_plans(loaded.project, phase)
    recorder = MemoryRecorder()
    bridge = load_bridge(
        loaded.project,
        runtime=runtime,
        phase=phase,
        progress=progress,
        recorder=recorder,
        run_id=None,
        inputs=native,
    )
    try:
        workspace = _attach(loaded, runtime, progress, recorder, None, budget_usd, budget_spent)
        runner = _runner(
            loaded, phase, runtime, options, progress, recorder, None, None, bridge, phases
        )
        runner.workspace = workspace
        return SessionResult(runner.run(), None)
    finally:
        runtime.end_run()


@dataclass
class _OpenedRun:
    """The journal run `run_phase` drives: resumed (`previous` is the run as it was) or new."""

    run_id: str
    previous: RunRow | None  # the journal's run record when resuming
    recovery: Recovery
    state: list[str] | None
    wave: int | None
    changes: list[str]
    phases: Any = None  # the PhaseCache a new run read its plans into before it started


def _open_run(
    jr: Any,
    loaded: Loaded,
    phase: str,
    phase_dir: Path,
    runtime: Runtime,
    options: RunOptions,
    progress: Progress,
    *,
    resume: str | None,
    accept_changes: bool,
    new_run: bool,
    phases: Any = None,
    loop: dict[str, Any] | None = None,
) -> _OpenedRun:
    """Find the run to resume (verified, its orphans reaped, its role state recovered) and
    resume it, or start a new one; either way journal the digest of the phase's inputs."""
    previous = None
    if resume == "auto" and not new_run:
        previous = jr.unfinished_run(phase)
    elif resume not in (None, "auto"):
        previous = jr.find_run(resume)
        if not previous.resumable:
            raise LooprailError(f"run {previous.id} is {previous.status}; nothing to resume")
    if previous is not None and new_run:
        previous = None
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
    changes: list[str] = []
    if previous is not None:
        changes = [
            c for c in diff_inputs(previous.inputs_digest, digest) if not recovery.excuses(c)
        ]
        crashed = previous.status == "running"
        if changes and crashed and not accept_changes:
            raise LooprailError(
                f"run {previous.id} was interrupted and its inputs changed since "
                f"({'; '.join(changes)}); resume with --accept-changes, "
                "or start over with --new"
            )
        was = previous.machine_config.get("agent")
        now = runtime.describe().name
        if was and was != now:
            progress.warn(f"run {previous.id} was started with agent {was}; resuming with {now}")
        run = jr.resume_run(previous.id, inputs_digest=digest)
        run_id = run.id
        state, wave = run.state, _last_wave(jr, run_id)
        progress.line(
            f"resuming run {run_id} (was {previous.status}) at {'/'.join(state) or 'idle'}"
            + (f"; inputs changed: {', '.join(changes)}" if changes else "")
        )
    else:
        if phases is None:  # before anything is journaled
            phases = read_plans(loaded.project, phase)
        if new_run:
            old = jr.unfinished_run(phase)
            if old is not None:
                jr.finish_run(old.id, "failed", "abandoned: a new run was started with --new")
        run_id = jr.start_run(
            phase,
            state=["idle"],
            machine_config={
                "flavor": options.flavor,
                "jobs": options.jobs,
                "autonomous": options.autonomous,
                "agent": runtime.describe().name,
                **({"loop": loop} if loop else {}),
            },
            inputs_digest=digest,
        )
        progress.line(f"run {run_id}: phase {phase} of {loaded.project}")
        return _OpenedRun(run_id, None, recovery, None, None, [], phases)
    return _OpenedRun(run_id, previous, recovery, state, wave, changes)


def read_plans(project: Path, phase: str) -> Any:
    """The phase's plans as a new run will read them, parsed before it starts: a malformed
    PLAN.md already there stops it (`RefusedToStart`, exit 2) with nothing journaled. (A
    resumed run reads them after its recovery, which moves a killed planner's partial output
    away first; a bad plan there halts the run, resumable once fixed.)"""
    phases = PhaseCache(project, phase)
    try:
        phases.load()
    except PlanError as exc:
        raise RefusedToStart(f"{exc}; the run did not start") from None
    return phases


def _build_runner(
    jr: Any,
    loaded: Loaded,
    phase: str,
    phase_dir: Path,
    runtime: Runtime,
    options: RunOptions,
    progress: Progress,
    opened: _OpenedRun,
    budget_usd: float | None,
    native: Any = None,
    budget_spent: float = 0.0,
) -> tuple[LoopRunner, JournalRecorder]:
    """The runner of `opened` and its journal recorder: native hooks bridged, the workspace
    attached, earlier approvals and role context carried over, and the journaled input digest
    kept current at every transition. Bad input found here halts the run (resumable)."""
    run_id, previous = opened.run_id, opened.previous
    fixed = loaded.input_paths(None)  # capability folders and the config
    seen: dict[str, Any] = {"sig": None}

    def signature() -> Any:
        # The plans' stats are the runner's last look at the phase (its PhaseCache): no
        # second pass over a folder of hundreds of plans at every transition.
        phases = getattr(seen.get("runner"), "_phases", None)
        if phases is None or phases.signature is None or phases.racy:
            return object()  # unknown: hash again
        folder, _, plans, _ = phases.signature  # not the file names: SUMMARYs come and go
        return (_stat_signature(fixed), folder, plans)

    def on_transition(_state: list[str]) -> None:
        # The run writes plans itself; keep the journaled digest current so a later resume
        # compares against the last committed state. Hash again only when a stat changed.
        sig = signature()
        if sig != seen["sig"]:
            seen["sig"] = sig
            paths = loaded.input_paths(phase_dir)
            jr.update_inputs(run_id, digest_inputs(paths, loaded.project))

    recorder = JournalRecorder(jr, run_id)
    bridge = load_bridge(
        loaded.project,
        runtime=runtime,
        phase=phase,
        progress=progress,
        recorder=recorder,
        run_id=run_id,
        inputs=native,
    )
    if previous is not None:
        # Approvals given earlier in this run still hold: a resumed run never asks again.
        approved = _approved_checkpoints(jr, run_id)
        options = replace(options, approved_earlier=options.approved_earlier | approved)
    spent = (_spent(jr, run_id) if previous is not None else 0.0) + budget_spent
    try:
        workspace = _attach(loaded, runtime, progress, recorder, run_id, budget_usd, spent)
        runner = _runner(
            loaded,
            phase,
            runtime,
            options,
            progress,
            recorder,
            opened.state,
            opened.wave,
            bridge,
            opened.phases,
        )
        runner.workspace = workspace
    except LooprailError as exc:
        # Bad input found while setting up (a malformed plan): the run did nothing, so it
        # is halted (resumable once fixed), never left `running` as if it had crashed.
        recorder.flush()
        jr.finish_run(run_id, "halted", str(exc))
        runtime.end_run()
        raise
    runner.on_transition = on_transition
    if previous is not None:
        replay_role_context(jr.events(run_id, kinds=["contribution"]), runtime, runner.dispatcher)
        runner.redo_steps = frozenset(opened.recovery.redo_steps)
    seen["runner"] = runner
    seen["sig"] = signature()  # the digest above is of this state
    return runner, recorder


def _run_with_signals(
    runner: LoopRunner, recorder: JournalRecorder, jr: Any, run_id: str
) -> RunResult:
    """Drive the runner with its children journaled and stop signals turned into a halt."""
    try:
        with journal_children(recorder), stop_signals():
            return runner.run()
    except KeyboardInterrupt as exc:
        # Ctrl-C, SIGTERM or SIGHUP: the run stops where it is, resumable, with what it
        # did journaled (its children were killed on the way out).
        recorder.flush()
        jr.finish_run(run_id, "halted", f"interrupted ({signal_label(exc)})")
        raise


def _close_run(
    jr: Any, recorder: JournalRecorder, opened: _OpenedRun, result: RunResult
) -> SessionResult:
    """Journal the run's final status."""
    recorder.flush()
    jr.finish_run(opened.run_id, result.status, result.reason)
    return SessionResult(
        result, opened.run_id, resumed=opened.previous is not None, changes=opened.changes
    )


def _attach(
    loaded: Loaded,
    runtime: Runtime,
    progress: Progress,
    recorder: Any,
    run_id: str | None,
    budget_usd: float | None,
    spent_usd: float,
) -> Any:
    """Tell the runtime about the run (transcripts, the cost meter and budget) and choose where
    plans work: git worktrees when the runtime wants them (agent CLIs) or the config says
    `looprail.worktrees: true`; `false` keeps every plan in the main tree."""

    def sink(call: dict[str, Any]) -> None:
        recorder.event(
            EventRecord(
                kind="agent_call",
                plan_id=call.get("planId"),
                task_id=call.get("taskId"),
                outcome="ok" if call.get("ok") else "failed",
                duration_ms=call.get("durationMs"),
                message=call.get("transcript"),
                data=call,
            )
        )

    wanted = run_settings(loaded).worktrees
    if wanted is None:
        wanted = runtime.describe().wants_worktrees
    meter = Meter(run_id=run_id, budget_usd=budget_usd, spent_usd=spent_usd, sink=sink)
    runtime.begin_run(RunStart(run_id, meter))  # a metering runtime checks the budget here
    if not wanted:
        return NullWorkspace()
    return GitWorkspace(loaded.project, run_id, warn=progress.warn, say=progress.line)


def _spent(jr: Any, run_id: str) -> float:
    total = 0.0
    for e in jr.events(run_id, kinds=["agent_call"]):
        cost = e.data.get("costUsd")
        if isinstance(cost, (int, float)):
            total += float(cost)
    return total


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP during a run: handled like Ctrl-C (the CLI exits 128 + signal)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal_name(signum))


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def signal_label(exc: BaseException) -> str:
    return signal_name(exc.signum) if isinstance(exc, Terminated) else "Ctrl-C"


@contextmanager
def stop_signals() -> Iterator[None]:
    """While a run runs: SIGTERM and SIGHUP raise `Terminated` in the main thread, so they
    stop the run like Ctrl-C does. Outside the main thread (an embedding) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: Any) -> None:
        raise Terminated(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def journal_children(recorder: Any) -> Iterator[None]:
    """Journal every child process the run starts (pid and start time, and its guard's), so a
    resume after a crash can reap whatever outlived the killed looprail."""

    def listener(spawned: Any) -> None:
        recorder.event(EventRecord(kind="process", data=spawned.as_data()))

    set_spawn_listener(listener)
    try:
        yield
    finally:
        set_spawn_listener(None)


def reap_journaled_processes(jr: Any, run_id: str, progress: Progress) -> list[int]:
    """Kill what the run's earlier (killed) process left running: each journaled child and
    guard whose pid still names the same process (same start time)."""
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
    return killed


def _stat_signature(paths: Sequence[Path]) -> list[tuple[str, int, int]]:
    sig = []
    for p in paths:
        for f in [p] if not p.is_dir() else sorted(x for x in p.rglob("*") if x.is_file()):
            try:
                st = f.stat()
            except OSError:
                continue
            sig.append((str(f), st.st_mtime_ns, st.st_size))
    return sig


def _last_wave(jr: Any, run_id: str) -> int | None:
    waves = [
        e.wave
        for e in jr.events(run_id, kinds=["transition"])
        if e.data.get("event") == "start_wave" and e.wave is not None
    ]
    return waves[-1] if waves else None


def _approved_checkpoints(jr: Any, run_id: str) -> frozenset[str]:
    return frozenset(
        e.task_id
        for e in jr.events(run_id, kinds=["task_finished"])
        if e.outcome == "approved" and e.task_id
    )


def _runner(
    loaded, phase, runtime, options, progress, recorder, state, wave, native, phases=None
) -> LoopRunner:
    return LoopRunner(
        loaded.project,
        phase,
        runtime=runtime,
        compiled=loaded.compiled,
        config=loaded.config,
        resolvers=loaded.resolvers,
        unloadable_resolvers=loaded.unloadable,
        options=options,
        recorder=recorder,
        progress=progress,
        state=state,
        wave=wave,
        native=native,
        phases=phases,
    )


def make_runtime(
    loaded: Loaded, options: RunOptions, progress: Progress, *, agent: str | None = None
) -> Any:
    """The runtime a run uses, from the registry: `agent` (`--agent`), else `looprail.agent`
    in the config, else `local`; built with the config's timeouts and its agent section."""
    run_settings(loaded)  # a bad `looprail` section refuses the run (exit 2)
    name = agent_name(loaded.config, agent)
    section = agent_section(loaded.config, name)

    if name in ADAPTERS:  # the settings a cloned project may not choose alone
        effective = effective_agent(loaded.project, loaded.config, name)
        refusal = effective.refusal()
        if refusal is not None:  # before anything is journaled or run: exit 2
            key = next(iter(effective.pending))
            raise RefusedToStart(
                refusal, path=".planning/config.json", field=f"looprail.agents.{name}.{key}"
            )
        section = effective.section
    settings = RuntimeSettings(
        project=loaded.project,
        host_tool=options.host_tool,
        timeouts=run_settings(loaded).timeouts,
        progress=progress.line,
        output=progress.child_line if progress.verbose else None,
        agent=section,
    )
    return create_runtime(name, settings)


def run_settings(loaded: Loaded) -> LooprailSettings:
    """The `looprail` section of the run's config (`looprail.settings`); a value that cannot be
    used refuses the run before anything is journaled or run (`RefusedToStart`, exit 2)."""
    try:
        return looprail_settings(loaded.config)
    except ConfigError as exc:
        raise RefusedToStart(str(exc), path=exc.path, field=exc.field) from None


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))
