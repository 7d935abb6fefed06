"""What a run started with, kept in its journal record, and what its resume must keep: a resume
without the run's flags uses the capability folders, host tool and flavor it remembers, and one
that would lose a hook active when the run started is refused unless `--accept-changes` names it
(a gate of `--capabilities X` is never walked past by a resume typed without the flag)."""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprail.errors import NoJournalError, RefusedToStart
from looprail.hooks.resolve import resolve
from looprail.journal import Journal
from looprail.points import POINTS
from looprail.textsafe import plural

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet
    from looprail.journal.models import RunRow

# `machine_config` keys (the flavor is journaled as `flavor` since the first runs).
CAPABILITIES, HOST_TOOL, FLAVOR, HOOKS = "capabilities", "hostTool", "flavor", "hooks"


def active_hooks(caps: CapabilitySet, config: Mapping[str, Any] | None) -> list[str]:
    """Every hook active at any point, as `CAPABILITY KIND at POINT` (sorted, once each)."""
    found = {
        f"{hook['capId']} {hook['kind']} at {point}"
        for point in POINTS
        for hook in resolve(caps, config, point)["activeHooks"]
    }
    return sorted(found)


def start_record(
    capability_dirs: Sequence[str], host_tool: str | None, hooks: Sequence[str]
) -> dict[str, object]:
    """What a new run journals of its inputs beside its flavor."""
    return {
        CAPABILITIES: [str(Path(d).resolve()) for d in capability_dirs],
        HOST_TOOL: host_tool,
        HOOKS: list(hooks),
    }


def remembered(run: RunRow | None) -> tuple[list[str] | None, str | None, str | None]:
    """The capability folders, host tool and flavor `run` started with (None: not recorded)."""
    if run is None:
        return None, None, None
    cfg = run.machine_config
    caps, tool, flavor = cfg.get(CAPABILITIES), cfg.get(HOST_TOOL), cfg.get(FLAVOR)
    return (
        [str(d) for d in caps] if isinstance(caps, list) else None,
        tool if isinstance(tool, str) else None,
        flavor if isinstance(flavor, str) else None,
    )


def resumed_run(project: str | Path, phase: str | None, run_id: str | None) -> RunRow | None:
    """The run a `resume` (`run_id`, else the latest resumable) or a `run` (the unfinished run
    of `phase`) would resume, its seal checked; None without a journal or such a run."""
    try:
        jr = Journal.open(project, create=False)
    except (NoJournalError, OSError):
        return None
    with jr:
        run = jr.find_run(run_id) if run_id else jr.unfinished_run(phase)
        if run is not None:  # its record names folders whose code runs: only one this user wrote
            jr.verify_run(run.id)
        return run


def check_keeps_hooks(previous: RunRow, now: Collection[str], accepted: Collection[str]) -> None:
    """Refuse a resume of `previous` that would lose a hook active when it started, unless
    `accepted` (the `--accept-changes` values) names it."""
    before = previous.machine_config.get(HOOKS)
    if not isinstance(before, list):
        return  # a run older than the record: nothing to compare with
    lost = [h for h in before if isinstance(h, str) and h not in now and h not in accepted]
    if not lost:
        return
    dirs = remembered(previous)[0]
    caps = " ".join(f"--capabilities {shlex.quote(d)}" for d in dirs or []) or "no --capabilities"
    raise RefusedToStart(
        f"run {previous.id}: resuming would drop {plural(len(lost), 'hook')} active when it "
        f"started: {'; '.join(lost)}; it started with {caps}: resume with those (and the same "
        f"LOOPRAIL_CAPABILITIES and consent), or name "
        f"each dropped hook with --accept-changes (e.g. --accept-changes {shlex.quote(lost[0])})"
    )
