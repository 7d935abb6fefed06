"""Plans: the `.planning/` reader (`load_phase`), the PLAN.md parser and waves from
`depends_on` (`compute_waves`), and the `phase plan-index` JSON (`plan_index`)."""

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
