"""Plans: the `.planning/` reader, the PLAN.md parser and waves from `depends_on`.

    phase = load_phase(project, "1")          # Phase: plans parsed, summaries matched
    waves = compute_waves(phase.plans)        # WavePlan: waves in order, parallel-safe or not
    index = plan_index(project, phase)        # the `looprail phase plan-index --raw` JSON

Importing this package does not import networkx (only `compute_waves` does, when called).
"""

from looprail.plans.phase import (
    Phase,
    PhaseCache,
    PhaseDir,
    find_phase,
    list_phases,
    load_phase,
    normalize_phase_number,
    plan_index,
)
from looprail.plans.planfile import Plan, Task, parse_plan, read_plan, split_paths
from looprail.plans.waves import Wave, WavePlan, compute_waves, resolve_dependencies

__all__ = [
    "Phase",
    "PhaseCache",
    "PhaseDir",
    "Plan",
    "Task",
    "Wave",
    "WavePlan",
    "compute_waves",
    "find_phase",
    "list_phases",
    "load_phase",
    "normalize_phase_number",
    "parse_plan",
    "plan_index",
    "read_plan",
    "resolve_dependencies",
    "split_paths",
]
