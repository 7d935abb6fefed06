"""What a run is given before it starts: the project and its capabilities, the checks of what
it reads up front, its runtime and where its plans work. Bad input here refuses the run
(`RefusedToStart`, exit 1) with nothing journaled."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprail.config import load_project_config_strict
from looprail.errors import ConfigError, LooprailError, PlanError, RefusedToStart
from looprail.fsutil import check_looprail_folders, project_folder, require_inside
from looprail.hooks.task_content import halting_resolvers, runnable_resolvers
from looprail.journal.models import EventRecord
from looprail.layout import PLANNING_DIR, PROJECT_CONFIG_FILE
from looprail.machine.context import RunOptions
from looprail.machine.progress import Progress
from looprail.machine.workspace import GitWorkspace, NullWorkspace
from looprail.plans.phase import PhaseCache
from looprail.runtime.agents import ADAPTERS
from looprail.runtime.base import RunStart  # loaded with machine.runner (its dispatcher's)
from looprail.runtime.meter import Meter
from looprail.runtime.registry import RuntimeSettings, agent_name, agent_section, create_runtime
from looprail.runtime.settings import LooprailSettings, looprail_settings
from looprail.trust import load_compiled
from looprail.trust.agents import effective_agent

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet
    from looprail.hooks.manifest import TaskContentResolver
    from looprail.journal.recorder import Recorder
    from looprail.runtime.base import Runtime


@dataclass
class Loaded:
    """Everything loaded from a project and its capability search path."""

    project: Path
    compiled: CapabilitySet  # consent applied
    config: Mapping[str, object] | None
    warnings: list[str] = field(default_factory=list)
    # the first-party capability folders given (a run records them, a resume reuses them)
    capability_dirs: tuple[str, ...] = ()

    @property
    def resolvers(self) -> list[tuple[str, TaskContentResolver]]:
        """The resolvers a task may run (`task_content.runnable_resolvers`)."""
        return runnable_resolvers(self.compiled)

    @property
    def unloadable(self) -> list[tuple[str, str, str]]:
        """The resolvers whose prefix halts a task (`task_content.halting_resolvers`)."""
        return halting_resolvers(self.compiled)

    def input_paths(self, phase_dir: Path | None) -> list[Path]:
        """What a run depends on: capability folders, the config, the phase's plans."""
        paths = [Path(lc.source) for lc in self.compiled.capabilities.values()]
        paths.append(self.project / PROJECT_CONFIG_FILE)
        if phase_dir is not None:
            paths += sorted(phase_dir.glob("*-PLAN.md"))
        return paths


def load_project(project: str | Path, capability_dirs: Sequence[str | Path] = ()) -> Loaded:
    """Load a project (a folder with `.planning/`) and its capabilities for `run_phase`
    (`capability_dirs`: first-party folders, searched before the global and project overlays).
    A malformed config, or a `.looprail/` or `.planning/` leading out of the project, raises a
    `LooprailError`; a capability that fails to load is named in `Loaded.warnings`."""
    root = project_folder(project)
    if not (root / PLANNING_DIR).is_dir():
        raise LooprailError(f"{project}: not a project (no .planning/ folder)")
    root = root.resolve()

    # A .looprail/ (or a folder in it) linked out of the project would put the run's state there.
    check_looprail_folders(root)
    require_inside(root, root / PLANNING_DIR, "the folder")
    config = load_project_config_strict(root)  # a malformed config stops the run
    # The capabilities are read once: one set, from the cache or (on a miss) the manifests.
    compiled = load_compiled(root, capability_dirs)
    warnings = list(compiled.warnings)
    warnings += [
        f"capability {f.id!r} ({f.origin}) not loaded: {f.issues[0]}" for f in compiled.failed
    ]
    return Loaded(root, compiled, config, warnings, tuple(str(d) for d in capability_dirs))


def read_plans(project: Path, phase: str) -> PhaseCache:
    """The phase's plans, parsed before a new run starts: a malformed PLAN.md refuses it
    (`RefusedToStart`) with nothing journaled (a resumed run reads them after its recovery)."""
    phases = PhaseCache(project, phase)
    try:
        phases.load()
    except PlanError as exc:
        raise RefusedToStart(f"{exc}; the run did not start") from None
    return phases


def attach_run(
    loaded: Loaded,
    runtime: Runtime,
    progress: Progress,
    recorder: Recorder,
    run_id: str | None,
    budget_usd: float | None,
    spent_usd: float,
) -> NullWorkspace:
    """Tell the runtime about the run (the cost meter and budget) and choose where plans work:
    git worktrees when `looprail.worktrees` says so, or (unset) when the runtime wants them."""

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


def start_refusals(
    project: Path,
    config: Mapping[str, Any] | None,
    *,
    agent: str | None = None,
    runtime: Runtime | None = None,
) -> list[RefusedToStart]:
    """Why `looprail run` would refuse to start here, in the order a run checks: the config's
    `looprail` section unusable, an agent CLI's settings the user has not consented to, the
    runtime unable to run. `run` raises the first, `doctor` and `lint` report each. Without
    `runtime`, the one the registry builds for `agent`, else the config's `looprail.agent`."""
    try:
        looprail_settings(config)
    except ConfigError as exc:
        return [RefusedToStart(str(exc), path=exc.path, field=exc.field)]
    found = []
    if runtime is None:
        name = agent_name(config, agent)
        if name in ADAPTERS:  # the settings a cloned project may not choose alone
            effective = effective_agent(project, config, name)
            refusal = effective.refusal()
            if refusal is not None:
                key = next(iter(effective.pending))
                field = f"looprail.agents.{name}.{key}"
                found.append(RefusedToStart(refusal, path=PROJECT_CONFIG_FILE, field=field))
        section = _agent_settings(project, config, name)
        runtime = create_runtime(name, RuntimeSettings(project=project, agent=section))
    why = runtime.describe().unready
    if why:
        found.append(RefusedToStart(why))
    return found


def _agent_settings(
    project: Path, config: Mapping[str, Any] | None, name: str
) -> dict[str, object]:
    if name in ADAPTERS:
        return effective_agent(project, config, name).section
    return agent_section(config, name)


def make_runtime(
    loaded: Loaded, options: RunOptions, progress: Progress, *, agent: str | None = None
) -> Runtime:
    """The runtime a run uses: `--agent`, else the config's `looprail.agent`, else `local`."""
    name = agent_name(loaded.config, agent)
    settings = RuntimeSettings(
        project=loaded.project,
        host_tool=options.host_tool,
        timeouts=run_settings(loaded).timeouts,
        progress=progress.line,
        output=progress.child_line if progress.verbose else None,
        agent=_agent_settings(loaded.project, loaded.config, name),
        config=loaded.config,
    )
    return create_runtime(name, settings)


def run_settings(loaded: Loaded) -> LooprailSettings:
    """The `looprail` section of the run's config; an unusable value refuses the run."""
    try:
        return looprail_settings(loaded.config)
    except ConfigError as exc:
        raise RefusedToStart(str(exc), path=exc.path, field=exc.field) from None


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))
