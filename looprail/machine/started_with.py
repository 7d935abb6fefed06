"""What a run started with, kept in its journal record, and what its resume must keep (issue
40, point 7). A run halted by a blocking gate of `--capabilities X` must not walk past that
gate because `resume` (or `run` again) was typed without the flag: the run remembers its
capability folders, host tool and flavor (`machine_config`), a resume without those flags
uses them, and a resume that would lose a hook that was active when the run started is
refused, one line naming each hook, unless `--accept-changes` names it."""

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
    """What a new run journals of its inputs beside its flavor: the first-party capability
    folders (absolute), the host tool, and the hooks active when it started."""
    return {
        CAPABILITIES: [str(Path(d).resolve()) for d in capability_dirs],
        HOST_TOOL: host_tool,
        HOOKS: list(hooks),
    }


def remembered(run: RunRow | None) -> tuple[list[str] | None, str | None, str | None]:
    """The capability folders, host tool and flavor `run` started with (None: not recorded,
    a run older than the record)."""
    if run is None:
        return None, None, None
    cfg = run.machine_config
    caps = cfg.get(CAPABILITIES)
    dirs = [str(d) for d in caps] if isinstance(caps, list) else None
    tool, flavor = cfg.get(HOST_TOOL), cfg.get(FLAVOR)
    return (
        dirs,
        tool if isinstance(tool, str) else None,
        flavor if isinstance(flavor, str) else None,
    )


def resumed_run(project: str | Path, phase: str | None, run_id: str | None) -> RunRow | None:
    """The run a `resume` (`run_id`, else the latest resumable) or a `run` (the unfinished run
    of `phase`, of any phase without one) would resume; None without a journal or such a run.
    Its seal is checked first (`Journal.verify_run`): a planted run is refused, one line."""
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
    """Refuse (exit 2, one line) a resume of `previous` that would lose a hook active when it
    started, unless `accepted` (the `--accept-changes` values) names it."""
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
