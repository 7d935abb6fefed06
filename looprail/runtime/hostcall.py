"""The host-tool call contract: which positional values a gate's check receives at each point.

A query check runs as `<host tool> check <words> <values…> --raw` (or
`.looprail/checks/<word> <words…> <values…>` without a host tool), a host predicate as
`<host tool> check predicate --predicate JSON <flags…> --raw`. Which values follow the words
depends on the point (docs/checks.md has the table). In the base layer: the runtime builds the
argv from it and the hooks layer evaluates checks with it, and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from looprail.plans.roadmap import UNKNOWN_REQ_IDS

# point → the values a query check receives, in order. Points whose workflow dispatches no
# generic gate get the phase number for a query and both the phase number and folder for a
# predicate.
QUERY_ARGS: dict[str, tuple[str, ...]] = {
    "plan:pre": ("phase_number",),  # plan-phase workflow §5.6: check ui-plan-gate "${PHASE}"
    "plan:post": ("phase_dir", "phase_req_ids"),  # plan-phase workflow §13
    "execute:wave:post": ("phase_number",),  # execute-phase workflow, after each wave
    "execute:post": ("phase_number",),  # execute-phase workflow, execute:post gate dispatch
    "verify:pre": ("phase_dir",),  # verify-work workflow, verify_pre_hooks
}
PREDICATE_ARGS: dict[str, tuple[str, ...]] = {
    "plan:post": ("phase_dir", "phase_req_ids"),
    "execute:wave:post": ("phase_number",),
    "execute:post": ("phase_number",),
    "verify:pre": ("phase_dir",),
    "ship:pre": ("phase_dir",),  # the ship workflow reads ${PHASE_DIR}/*-SECURITY.md
}
DEFAULT_QUERY_ARGS = ("phase_number",)
DEFAULT_PREDICATE_ARGS = ("phase_number", "phase_dir")


def query_args(point: str | None) -> tuple[str, ...]:
    """The names of the values a query check receives at `point`."""
    return QUERY_ARGS.get(point or "", DEFAULT_QUERY_ARGS)


def predicate_args(point: str | None) -> tuple[str, ...]:
    """The names of the flags a host predicate receives at `point`."""
    return PREDICATE_ARGS.get(point or "", DEFAULT_PREDICATE_ARGS)


def shown_phase_dir(project: Path, phase_dir: Path | None) -> str:
    """The phase folder as the host's workflows pass it: relative to the project
    (`.planning/phases/01-demo`) when it is inside, else absolute."""
    if phase_dir is None:
        return ""
    absolute = phase_dir if phase_dir.is_absolute() else project / phase_dir
    try:
        return str(absolute.relative_to(project))
    except ValueError:
        return str(absolute)


def argument_values(
    names: Sequence[str],
    project: Path,
    phase_number: str,
    phase_dir: Path | None,
    phase_req_ids: str,
) -> list[str]:
    """The positional values of a query call, in order (`TBD` for unknown requirement ids,
    as plan-phase falls back)."""
    values = {
        "phase_number": phase_number,
        "phase_dir": shown_phase_dir(project, phase_dir),
        "phase_req_ids": phase_req_ids or UNKNOWN_REQ_IDS,
    }
    return [values[n] for n in names]


def predicate_flags(
    names: Sequence[str],
    project: Path,
    phase_number: str,
    phase_dir: Path | None,
    phase_req_ids: str,
) -> list[str]:
    """`--phase-number N` / `--phase-dir D` / `--phase-req-ids R` for `check predicate`."""
    flags: list[str] = []
    for name in names:
        if name == "phase_number" and phase_number:
            flags += ["--phase-number", phase_number]
        elif name == "phase_dir" and phase_dir is not None:
            flags += ["--phase-dir", shown_phase_dir(project, phase_dir)]
        elif name == "phase_req_ids":
            flags += ["--phase-req-ids", phase_req_ids or UNKNOWN_REQ_IDS]
    return flags
