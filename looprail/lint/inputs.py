"""What the checks read: the loaded project, and the probe answering questions about the machine."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from looprail.config import load_project_config_strict
from looprail.errors import LooprailError, PlanError, RefusedToStart
from looprail.fsutil import project_folder
from looprail.layout import PLANNING_DIR
from looprail.machine.session.load import start_refusals
from looprail.plans import compute_waves, find_phase, list_phases, load_phase
from looprail.runtime.local import missing_executable
from looprail.runtime.process import find_program
from looprail.runtime.registry import agent_name, available
from looprail.trust import load_compiled

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet
    from looprail.plans.phase import Phase
    from looprail.plans.waves import WavePlan


# Words `sh -c` understands without a program on PATH.
# fmt: off
SHELL_BUILTINS = frozenset((
    "!", ".", ":", "[", "[[", "alias", "bg", "break", "builtin", "case", "cd", "command",
    "continue", "declare", "echo", "eval", "exec", "exit", "export", "false", "fc", "fg",
    "for", "getopts", "hash", "if", "jobs", "kill", "let", "local", "printf", "pwd", "read",
    "readonly", "return", "set", "shift", "test", "times", "trap", "true", "type", "ulimit",
    "umask", "unalias", "unset", "until", "wait", "while", "{", "(",
))
# fmt: on


@dataclass
class PhaseInput:
    """One phase: loaded (`phase`, `waves`) or the PlanError that stopped loading it."""

    label: str  # the phase folder, relative to the project
    phase: Phase | None = None
    waves: WavePlan | None = None
    error: PlanError | None = None
    wave_error: PlanError | None = None


@dataclass
class Probe:
    """The questions lint asks the machine. `executable(folder, name)` returns None when
    `.looprail/<folder>/<name>` is a usable executable, else why not; `on_path(word)` says
    whether a command word would be found by the shell; `file(path)` whether a resolver binary
    is runnable."""

    executable: Callable[[str, str], str | None]
    on_path: Callable[[str], bool]
    runnable: Callable[[str], bool]


@dataclass
class LintInput:
    """What the checks read: the loaded project (`load_input`) and the probe."""

    project: Path
    compiled: CapabilitySet  # consent applied
    config: dict[str, object] | None
    probe: Probe
    phases: list[PhaseInput] = field(default_factory=list)
    has_planning: bool = True
    flavor: str = "gsd"
    host_tool: str | None = None
    # why `looprail run` would refuse to start (`machine.loading.start_refusals`)
    refusals: list[RefusedToStart] = field(default_factory=list)


def local_probe(project: Path, runtime_name: str = "local") -> Probe:
    """The probe of a runtime: what it would find. The local runtime runs the executables
    under `.looprail/`; any other resolves names itself and finds everything."""

    def missing(folder: str, name: str) -> str | None:
        return missing_executable(project, folder, name) if runtime_name == "local" else None

    def on_path(word: str) -> bool:
        return word in SHELL_BUILTINS or find_program(word) is not None

    def runnable(binary: str) -> bool:
        if "/" in binary:
            path = Path(binary) if os.path.isabs(binary) else project / binary
            return path.is_file() and os.access(path, os.X_OK)
        return find_program(binary) is not None

    return Probe(missing, on_path, runnable)


def _runtime_name(config: Mapping[str, object] | None) -> str:
    try:
        name = agent_name(config)
    except LooprailError:
        return "local"
    return name if name in available() else "local"


def load_input(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    *,
    phase: str | None = None,
    flavor: str = "gsd",
    host_tool: str | None = None,
    probe: Probe | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> LintInput:
    """Load everything lint looks at. Raises only for a missing project folder or an unknown
    `phase`; everything else that is wrong becomes a finding."""
    root = project_folder(project, resolve=True)
    has_planning = (root / PLANNING_DIR).is_dir()
    config = load_project_config_strict(root)  # a malformed config stops lint: file:line:col
    compiled = load_compiled(root, capability_dirs, env=env, home=home)
    phases = _load_phases(root, phase) if has_planning else []
    if phase is not None and not has_planning:
        raise PlanError(f"{project}: no .planning/ folder, so no phase {phase}")
    return LintInput(
        project=root,
        compiled=compiled,
        config=config,
        probe=probe or local_probe(root, _runtime_name(config)),
        phases=phases,
        has_planning=has_planning,
        flavor=flavor,
        host_tool=host_tool,
        refusals=start_refusals(root, config) if has_planning else [],
    )


def _load_phases(root: Path, only: str | None) -> list[PhaseInput]:
    dirs = [find_phase(root, only)] if only is not None else list_phases(root)
    out = []
    for ph in dirs:
        item = PhaseInput(label=_rel(ph.dir, root))
        out.append(item)
        try:
            item.phase = load_phase(root, ph.number)
        except PlanError as exc:
            item.error = exc
            continue
        try:
            item.waves = compute_waves(item.phase.plans, root=root)
        except PlanError as exc:
            item.wave_error = exc
    return out


def _rel(path: str | Path, project: Path) -> str:
    """A path for people and tools: relative to the project, else to the current folder."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    for base in (project, Path.cwd()):
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            continue
    return p.as_posix()
