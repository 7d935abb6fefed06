"""Which values a gate's check receives at each point (docs/checks.md): a query check as
`<host tool> check <words> <values…> --raw`, a host predicate as `<host tool> check predicate
--predicate JSON <flags…> --raw`. Shared by the runtime and the hooks layer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from looprail.plans.roadmap import UNKNOWN_REQ_IDS

# point → the values a check receives, in order (other points: the `DEFAULT_*`)
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
    return QUERY_ARGS.get(point or "", DEFAULT_QUERY_ARGS)


def predicate_args(point: str | None) -> tuple[str, ...]:
    return PREDICATE_ARGS.get(point or "", DEFAULT_PREDICATE_ARGS)


def shown_phase_dir(project: Path, phase_dir: Path | None) -> str:
    """The phase folder as the host's workflows pass it: relative to the project when inside."""
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
    """The positional values of a query call (`TBD`: unknown requirement ids, as plan-phase)."""
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
    """`--phase-number N` / `--phase-dir D` / `--phase-req-ids R`, each when it has a value."""
    values = argument_values(names, project, phase_number, phase_dir, phase_req_ids)
    flags: list[str] = []
    for name, value in zip(names, values, strict=True):
        if value:
            flags += ["--" + name.replace("_", "-"), value]
    return flags
