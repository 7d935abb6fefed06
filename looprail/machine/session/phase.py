"""Running a phase end to end (`looprail run` / `resume`, the pytest plugin): take the project's
run lock, open (or resume) the journal run, drive the `LoopRunner`, close the run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from looprail.errors import LooprailError, RefusedToStart
from looprail.journal import Journal, RunLock, digest_inputs
from looprail.journal.recorder import JournalRecorder, MemoryRecorder
from looprail.journal.writer import journal_path
from looprail.machine.answers import drop_run_secrets
from looprail.machine.commits import exclude_state
from looprail.machine.native import read_native_inputs
from looprail.machine.progress import Progress
from looprail.machine.runner import LoopRunner, RunOptions, RunResult
from looprail.machine.session.interactive import interactive_options
from looprail.machine.session.load import (
    Loaded,
    load_project,
    make_runtime,
    read_plans,
    run_settings,
    start_refusals,
)
from looprail.machine.session.open import (
    OpenedRun,
    Session,
    approved_checkpoints,
    open_run,
    spent_usd,
)
from looprail.machine.session.resume import replay_role_context
from looprail.machine.signals import journal_children, signal_label, stop_signals
from looprail.plans import PhaseCache, find_phase

__all__ = ["SessionResult", "load_project", "run_phase", "stop_signals"]

if TYPE_CHECKING:
    from looprail.machine.native import NativeInputs
    from looprail.runtime.base import Runtime


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
    loop: Mapping[str, object] | None = None,
    budget_spent: float = 0.0,
) -> SessionResult:
    """Run (or resume) `phase`. `resume`: "auto" resumes an unfinished run of this phase, a run
    id resumes that run, None never resumes. With `journal=False` nothing is written. `loop`:
    the project loop this run is part of (`{"through": N}` or `{"all": True}`), journaled with
    a new run's machine config so `looprail resume` can go on with the phases after it.
    `budget_spent`: what the invocation spent before this run, counted against `budget_usd`
    (the budget of `run --all` spans its phases)."""
    options = options or RunOptions()
    if options.interactive is not False:  # decided once: a terminal to talk on, or exit 1
        options = interactive_options(options, run_settings(loaded).interactive)
    progress = progress or Progress()
    found = find_phase(loaded.project, phase)
    # what doctor and lint report, refused here before anything is journaled or run
    for why in start_refusals(loaded.project, loaded.config, agent=agent, runtime=runtime):
        raise RefusedToStart(f"{why}; the run did not start", path=why.path, field=why.field)
    if runtime is None:
        runtime = make_runtime(loaded, options, progress, agent=agent)
    for w in loaded.warnings:
        progress.warn(w)
    # "01" and "1" are one phase in the journal: its number, as the phase folder says.
    session = Session(
        loaded, found.number, found.dir, runtime, options, progress, budget_usd, budget_spent
    )
    # what the run writes under .looprail/ (journal, lock, logs) is never an untracked file
    exclude_state(loaded.project)
    if not journal:
        return _run_unjournaled(session)
    return _run_journaled(session, resume, accept_changes, new_run, loop)


def _run_journaled(
    session: Session,
    resume: str | None,
    accept_changes: bool,
    new_run: bool,
    loop: Mapping[str, object] | None,
) -> SessionResult:
    """Under the project's run lock: the up-front checks, then the journal run opened (or
    resumed), driven and closed."""
    with RunLock(session.loaded.project) as lock:
        # Read and checked before the journal is opened: bad input stops here with nothing
        # journaled (a new run's plans too, when there is no journal yet).
        native = read_native_inputs(session.loaded.project, session.progress)
        phases = (
            None if journal_path(session.loaded.project).exists() else read_plans(*session.where)
        )
        with Journal.open(session.loaded.project) as jr:
            opened = open_run(
                jr,
                session,
                resume=resume,
                accept_changes=accept_changes,
                new_run=new_run,
                phases=phases,
                loop=loop,
            )
            lock.set_run_id(opened.run_id)
            runner, recorder = _build_runner(jr, session, opened, native)
            try:
                result = _run_with_signals(runner, recorder, jr, opened.run_id)
                if result.status == "shipped":  # ended: no secret of it is needed any more
                    drop_run_secrets(session.loaded.project, opened.run_id)
                recorder.flush()
                jr.finish_run(opened.run_id, result.status, result.reason)
                resumed = opened.previous is not None
                return SessionResult(result, opened.run_id, resumed, opened.changes)
            finally:
                # The recorder's writer never outlives the journal (after an unexpected error
                # what it still holds is lost, as in a crash).
                recorder.close()
                session.runtime.end_run()


def _run_unjournaled(session: Session) -> SessionResult:
    """`journal=False`: the run records in memory and writes nothing."""
    loaded, runtime, progress = session.loaded, session.runtime, session.progress
    native = read_native_inputs(loaded.project, progress)
    phases = read_plans(*session.where)
    recorder = MemoryRecorder()
    try:
        ctx = session.context(recorder, None, native, session.budget_spent, phases=phases)
        return SessionResult(LoopRunner(ctx).run(), None)
    finally:
        runtime.end_run()


def _build_runner(
    jr: Journal, session: Session, opened: OpenedRun, native: NativeInputs
) -> tuple[LoopRunner, JournalRecorder]:
    """The runner of `opened` and its journal recorder, earlier approvals and role context
    carried over. Bad input found here halts the run (resumable)."""
    loaded, runtime, options = session.loaded, session.runtime, session.options
    run_id, previous = opened.run_id, opened.previous
    # The runner's phase cache: its last look at the plans is what the digest keeper reads.
    phases = opened.phases if opened.phases is not None else PhaseCache(*session.where)
    on_transition = _InputsDigest(jr, loaded, run_id, session.phase_dir, phases)
    recorder = JournalRecorder(jr, run_id)
    spent = session.budget_spent
    if previous is not None:
        # Approvals given earlier in this run still hold: a resumed run never asks again.
        approved = approved_checkpoints(jr, run_id)
        options = replace(options, approved_earlier=options.approved_earlier | approved)
        spent += spent_usd(jr, run_id)
    try:
        ctx = session.context(
            recorder,
            run_id,
            native,
            spent,
            options=options,
            phases=phases,
            on_transition=on_transition,
            state=opened.state,
            wave=opened.wave,
            redo_steps=frozenset(opened.recovery.redo_steps),
        )
        runner = LoopRunner(ctx)
    except LooprailError as exc:
        # A malformed plan: the run did nothing, halted (resumable), never left `running`.
        recorder.flush()
        jr.finish_run(run_id, "halted", str(exc))
        runtime.end_run()
        raise
    if previous is not None:
        replay_role_context(jr.events(run_id, kinds=["contribution"]), runner.dispatcher)
    on_transition.seen = on_transition.signature()  # the digest journaled is of this state
    return runner, recorder


@dataclass
class _InputsDigest:
    """Keeps the journaled digest of the run's inputs current (the run's `on_transition`: the
    run writes plans itself), hashed again only when a stat changed (the plans' from the
    runner's `PhaseCache`)."""

    jr: Journal
    loaded: Loaded
    run_id: str
    phase_dir: Path
    phases: PhaseCache
    seen: object = None

    def __post_init__(self) -> None:
        self.fixed = self.loaded.input_paths(None)  # capability folders and the config

    def signature(self) -> object:
        if self.phases.signature is None or self.phases.racy:
            return object()  # unknown: hash again
        folder, _, plans, _ = self.phases.signature  # not the file names: SUMMARYs come and go
        return (_stat_signature(self.fixed), folder, plans)

    def __call__(self, _state: list[str]) -> None:
        sig = self.signature()
        if sig != self.seen:
            self.seen = sig
            paths = self.loaded.input_paths(self.phase_dir)
            self.jr.update_inputs(self.run_id, digest_inputs(paths, self.loaded.project))


def _run_with_signals(
    runner: LoopRunner, recorder: JournalRecorder, jr: Journal, run_id: str
) -> RunResult:
    """Drive the runner with its children journaled and stop signals turned into a halt."""
    try:
        with journal_children(recorder), stop_signals():
            return runner.run()
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: halted where it is, resumable
        recorder.flush()
        jr.finish_run(run_id, "halted", f"interrupted ({signal_label(exc)})")
        raise


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
