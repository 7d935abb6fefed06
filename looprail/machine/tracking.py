"""Keep GSD's own tracking files up to date during a run (docs/loop.md, "GSD's tracking files"):
by the host tool, else here with `looprail/tracking.py`'s edits (pure text → text), each file
read bounded, inside the project, and replaced atomically. Tracking never stops a run: a file
that cannot be read or written is one warning."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from looprail.fsutil import atomic_write, contained_file, read_bounded
from looprail.layout import REQUIREMENTS_FILE, ROADMAP_FILE, STATE_FILE, normalize_phase_number
from looprail.machine.project import (
    folder_progress,
    phase_order,
    project_phases,
    verification_status,
)
from looprail.plans.roadmap import roadmap_section
from looprail.plans.tracking import (
    Counts,
    NextPhase,
    phase_complete,
    plan_progress,
    requirement_ids,
    requirements_complete,
    state_complete,
)
from looprail.runtime.base import host_tool_for, run_host
from looprail.textsafe import one_line

if TYPE_CHECKING:
    from collections.abc import Callable

    from looprail.machine.context import RunContext
    from looprail.plans import Phase
    from looprail.runtime.base import DispatchContext

TRACKED_LIMIT = 4 * 1024 * 1024  # a tracking file larger than this is left as it is
_LOCK = threading.Lock()  # plans of one wave finish on parallel threads


def track_plan(run: RunContext, phase: Phase, host: DispatchContext) -> None:
    """After a plan's SUMMARY is written: ROADMAP.md's progress for `phase`."""
    with _LOCK:
        if _host(run, host, ["roadmap", "update-plan-progress", phase.number]):
            return
        counts, verified = _counts(run.project, phase.dir, phase.number)
        today = _today()
        _edit(
            run,
            ROADMAP_FILE,
            lambda text: plan_progress(text, phase.number, counts, verified=verified, today=today),
        )


def track_phase(run: RunContext, phase: Phase, host: DispatchContext) -> None:
    """When `phase` ships: ROADMAP.md, REQUIREMENTS.md and STATE.md as `phase complete` does."""
    with _LOCK:
        number = phase.number
        if _host(run, host, ["phase", "complete", number]):
            return
        counts, verified = _counts(run.project, phase.dir, number)
        if not verified:
            run.progress.warn(
                f"phase {number} not marked complete in ROADMAP.md/STATE.md: "
                "VERIFICATION.md does not say passed"
            )
            return
        today = _today()
        text = _edit(run, ROADMAP_FILE, lambda t: phase_complete(t, number, counts, today=today))
        section = roadmap_section(_active(text), number) if text is not None else None
        ids = requirement_ids(section)
        if ids:
            _edit(run, REQUIREMENTS_FILE, lambda req: requirements_complete(req, ids))
        after = next_phase(run.project, number)
        _edit(run, STATE_FILE, lambda state: state_complete(state, number, after, today=today))


def next_phase(project: Path, number: str) -> NextPhase:
    """Where STATE.md points once phase `number` is complete: the first unfinished phase after
    it, else the lowest unfinished one before it (a gap left behind), else none (the last)."""
    number = normalize_phase_number(number) or number
    here = phase_order(number)
    todo = [p for p in project_phases(project) if not p.finished and p.number != number]
    later = [p for p in todo if phase_order(p.number) > here]
    pick = later or todo
    return NextPhase(pick[0].number, pick[0].name) if pick else NextPhase(None, None)


def _host(run: RunContext, ctx: DispatchContext, args: list[str]) -> bool:
    """Whether the run's host tool did the update (`<host> <args>`; it writes all or nothing)."""
    if not host_tool_for(run.runtime, ctx):
        return False
    outcome = run_host(run.runtime, args, ctx)
    if not outcome.ok:
        run.progress.warn(
            f"GSD tracking: {' '.join(args)}: {one_line(outcome.detail)}; looprail writes it"
        )
    return outcome.ok


def _counts(project: Path, folder: Path | None, number: str) -> tuple[Counts, bool]:
    """The phase's plans and SUMMARYs, and whether its VERIFICATION.md says passed."""
    if folder is None:
        return Counts(0, 0), False
    plans, summaries, names = folder_progress(folder, number)
    verified = verification_status(project, folder, names) == "passed"
    summary_names = [n for n in names if n.endswith("SUMMARY.md")]
    return Counts(plans, summaries, summary_names), verified


def _edit(run: RunContext, name: str, change: Callable[[str], str]) -> str | None:
    """`change` applied to the project's `name` (when there); the new text, or None."""
    path = contained_file(run.project, run.project / name)
    if path is None:
        return None
    try:
        data = read_bounded(path, TRACKED_LIMIT)
        if data is None:
            return None
        text = data.decode("utf-8")
        new = change(text)
        if new != text:
            atomic_write(path, new, mode=path.stat().st_mode & 0o777)
        return new
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        run.progress.warn(f"GSD tracking: {name} left as it was ({one_line(why)})")
        return None


def _active(text: str) -> str:
    cut = text.rfind("</details>")
    return text if cut < 0 else text[cut + len("</details>") :]


def _today() -> str:
    return datetime.date.today().isoformat()  # the reference's local date
