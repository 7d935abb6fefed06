"""Why the artifact a phase step owed is missing, the check agent calls and interactive sessions
end with. It loads the phase: the runtime layer's known upward import (test_architecture)."""

from __future__ import annotations

from pathlib import Path

from looprail.errors import LooprailError
from looprail.plans import load_phase
from looprail.plans.frontmatter import file_frontmatter
from looprail.runtime.base import Request


def owed_problem(request: Request, project: Path) -> str | None:
    """Why the artifact a phase step owed is missing or unreadable, or None when it is there."""
    if request.kind != "phase" or request.step not in ("discuss", "plan", "verify"):
        return None

    try:
        phase = load_phase(project, request.phase.number)
    except LooprailError as exc:
        return f"the phase does not load: {exc}"
    if request.step == "discuss":
        return None if phase.has_context else "no CONTEXT.md in the phase folder"
    if request.step == "plan":
        return None if phase.plans else "no *-PLAN.md in the phase folder"
    if phase.verification_path is None:
        return "no VERIFICATION.md in the phase folder"
    fm = file_frontmatter(phase.verification_path)
    if isinstance(fm, str):
        return f"{phase.verification_path.name}: {fm}"
    if not fm.get("status"):
        return f"{phase.verification_path.name} has no `status:` in its frontmatter"
    return None
