"""`looprail check predicate`: evaluate one gate predicate and print its verdict.
`looprail check artifacts PLAN` / `check key-links PLAN`: a plan's must_haves against the
project's files (the reference's `verify artifacts` / `verify key-links`).

Exit 0 whenever a verdict was delivered, `block: true` and `invalid` included ("blocked" is
never an exit code); 69 when the check could not look (no shell, unreadable artifact); 1 for a
malformed predicate or a plan without must_haves to check; 2 for a bad command line. The
failure reason is one line on stderr.
"""

from __future__ import annotations

from pathlib import Path

from looprail.cli._common import command, group, print_json, project_folder, warn
from looprail.config import load_project_config_strict
from looprail.errors import PlanError, UsageError
from looprail.hooks.gates.checks import (
    CheckContext,
    CheckError,
    CheckFailedError,
    evaluate_predicate_json,
)
from looprail.plans.musthaves import check_artifacts, check_key_links, plan_must_haves, report_json
from looprail.plans.phase import find_phase, list_phases, normalize_phase_number


def register(sub) -> None:
    _, cmds = group(sub, "check", "evaluate gate checks")
    p = command(
        cmds,
        "predicate",
        _predicate,
        "evaluate a check.predicate and print {block, message}",
        "Evaluate a gate's check.predicate (JSON, passed as one argument) and print "
        "{block, message}. Exit 0 for any delivered verdict, non-zero when the check itself "
        "failed (the gate's onError decides what that means).",
    )
    p.add_argument("--predicate", required=True, metavar="JSON", help="the predicate object")
    p.add_argument(
        "--phase",
        "--phase-number",
        dest="phase",
        default="",
        metavar="N",
        help="phase number: exported as PHASE_NUMBER and used to find the phase folder",
    )
    p.add_argument(
        "--phase-dir",
        metavar="DIR",
        help="the phase folder (relative to --project); default: .planning/phases/<NN>-*",
    )
    p.add_argument("--phase-req-ids", default="", metavar="IDS", help="exported as PHASE_REQ_IDS")
    p.add_argument("--raw", action="store_true", help="print JSON only (the default output)")
    for name, handler, what in (
        (
            "artifacts",
            _artifacts,
            "each must_haves.artifacts entry exists, is long enough and "
            "holds its contains and exports",
        ),
        (
            "key-links",
            _key_links,
            "each must_haves.key_links pattern is found in its from (or to) file",
        ),
    ):
        p = command(
            cmds,
            name,
            handler,
            f"check a plan's must_haves.{name.replace('-', '_')} against the project's files",
            f"Check that {what}, as the reference's `verify {name}` does. Prints the "
            "reference's JSON fields; exit 0 for any verdict.",
        )
        p.add_argument("plan", metavar="PLAN", help="the PLAN.md (relative to --project)")
        p.add_argument("--raw", action="store_true", help="print only valid or invalid")


def _artifacts(args) -> int:
    project, must, _ = _must_haves(args, "artifacts")
    report = check_artifacts(must, project)
    return _verdict(args, report_json(report), report.all_passed)


def _key_links(args) -> int:
    project, must, promised = _must_haves(args, "key_links")
    report = check_key_links(must, project, promised)
    return _verdict(args, report_json(report), report.all_verified)


def _must_haves(args, block: str):
    project = project_folder(args.project, resolve=True)
    # an absolute PLAN stays itself: `project / "/abs"` is "/abs"
    must, promised = plan_must_haves(project / args.plan, display=args.plan)
    for note in must.notes:
        warn(f"{args.plan}: {note}")
    if not getattr(must, block):
        raise PlanError(f"{args.plan}: must_haves.{block}: none to check")
    return project, must, promised


def _verdict(args, report: dict, valid: bool) -> int:
    if args.raw:
        print("valid" if valid else "invalid")
    else:
        print_json(report)
    return 0


def _predicate(args) -> int:
    project = project_folder(args.project, resolve=True)
    phase_dir: Path | None
    if args.phase_dir:
        phase_dir = Path(args.phase_dir)
        resolved = project / phase_dir  # an absolute --phase-dir stays itself
        try:
            is_dir = resolved.is_dir()
        except OSError as exc:  # e.g. a name too long for the file system
            raise UsageError(f"--phase-dir: {exc.strerror or exc}") from None
        if not is_dir:
            raise UsageError(f"--phase-dir: {resolved} is not a directory")
    else:
        phase_dir = find_phase_dir(project, args.phase) if args.phase else None
    config = load_project_config_strict(project)  # malformed: one line with file:line:col, exit 1
    ctx = CheckContext(
        project=project,
        phase_number=args.phase,
        phase_dir=phase_dir,
        config=config,
        phase_req_ids=args.phase_req_ids,
    )
    result = evaluate_predicate_json(args.predicate, ctx)
    if isinstance(result, CheckError):
        raise CheckFailedError(result)
    print_json(result.to_json())
    return 0


def find_phase_dir(project, phase: str):
    """The folder of phase `phase` (`1`, `01`, `2.1`), None when the project has none; several
    folders for one phase are an error."""
    wanted = normalize_phase_number(phase)
    if wanted is None:
        raise UsageError(f"--phase: {phase!r} is not a phase number")
    if not any(p.number == wanted for p in list_phases(project)):
        return None
    return find_phase(project, phase).dir
