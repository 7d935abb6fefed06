"""`looprail run` and `looprail resume`: the loop, end to end."""

from __future__ import annotations

import argparse
import sys

from looprail.cli._common import add_flavor_option, add_project_options
from looprail.points import POINTS


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--autonomous",
        action="store_true",
        help='approve checkpoint tasks automatically (except gate="blocking-human")',
    )
    p.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="TASK",
        help="approve one checkpoint task (e.g. 01-02/T3); repeatable",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="plans of one wave run N at a time (default: min(4, CPUs))",
    )
    p.add_argument(
        "--host-tool",
        metavar="TOOL",
        help="send step commands and query checks to this host tool (e.g. gsd_run)",
    )
    p.add_argument(
        "--accept-changes",
        action="store_true",
        help="resume even if manifests, plans or config changed since the crash",
    )
    p.add_argument(
        "--no-journal",
        action="store_true",
        help="keep nothing: no journal, no resume, no lock (for experiments)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="only the final summary")
    add_project_options(p)
    add_flavor_option(p)


def register(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a phase of the loop end to end (resumes an unfinished run)",
        description="Run phase N of PROJECT through discuss → plan → execute (waves → plans → "
        f"tasks) → verify → ship, dispatching every active hook at each of the {len(POINTS)} "
        "points. An "
        "unfinished run of the same phase is resumed. Exit 0 when the phase shipped, 1 when it "
        "halted (the reason is printed), 3 when a checkpoint needs a human.",
    )
    p.add_argument("project_pos", nargs="?", metavar="PROJECT", help="project folder (default: .)")
    p.add_argument("--phase", required=True, metavar="N", help="phase number (e.g. 1, 02, 2.1)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="walk the machine and print what would be dispatched; run nothing",
    )
    p.add_argument(
        "--new",
        action="store_true",
        help="start a new run even if an unfinished one exists (it is marked failed)",
    )
    _common(p)
    p.set_defaults(handler=run)

    p = sub.add_parser(
        "resume",
        help="resume an unfinished run (default: the latest one)",
        description="Resume RUN (an id or unique prefix; default: the latest unfinished run). "
        "Finished tasks never run again; tasks that were in flight run again.",
    )
    p.add_argument("run_id", nargs="?", metavar="RUN")
    _common(p)
    p.set_defaults(handler=resume)


def _options(args):
    from looprail.machine.run import RunOptions
    from looprail.machine.session import default_jobs

    jobs = args.jobs if args.jobs is not None else default_jobs()
    if jobs < 1:
        from looprail.errors import UsageError

        raise UsageError("--jobs must be at least 1")
    if args.host_tool is not None:
        from looprail.errors import UsageError
        from looprail.runtime.local import resolve_host_tool

        # the same rule as lint, said before anything runs rather than at the first gate
        found = resolve_host_tool(args.host_tool)
        if isinstance(found, str):
            raise UsageError(f"--host-tool: {found}")
    return RunOptions(
        flavor=args.flavor,
        jobs=jobs,
        autonomous=args.autonomous,
        approvals=frozenset(args.approve),
        host_tool=args.host_tool,
    )


def run(args) -> int:
    from looprail.machine.session import load_project, run_phase

    project = args.project_pos or args.project
    loaded = load_project(project, args.capabilities)
    if refused := _refuse(loaded):
        return refused
    if args.dry_run:
        from looprail.machine.dryrun import dry_run

        sys.stdout.write(dry_run(loaded, args.phase, flavor=args.flavor, host_tool=args.host_tool))
        return 0
    from looprail.machine.progress import Progress

    progress = Progress(quiet=args.quiet)
    outcome = run_phase(
        loaded,
        args.phase,
        options=_options(args),
        progress=progress,
        journal=not args.no_journal,
        accept_changes=args.accept_changes,
        new_run=args.new,
    )
    return _summary(outcome)


def resume(args) -> int:
    from looprail.errors import LooprailError
    from looprail.machine.progress import Progress
    from looprail.machine.session import load_project, run_phase
    from looprail.store import Journal

    loaded = load_project(args.project, args.capabilities)
    if refused := _refuse(loaded):
        return refused
    with Journal.open(loaded.project, create=False) as jr:
        target = jr.find_run(args.run_id) if args.run_id else None
        if target is None:
            target = next((r for r in reversed(jr.runs()) if r.resumable), None)
            if target is None:
                raise LooprailError("no unfinished run to resume")
    outcome = run_phase(
        loaded,
        target.phase,
        options=_options(args),
        progress=Progress(quiet=args.quiet),
        resume=target.id,
        accept_changes=args.accept_changes,
    )
    return _summary(outcome)


def _refuse(loaded) -> int:
    """Nothing is dropped silently: a hook or gate that could not be loaded stops the run before
    it starts (exit 2), one line per problem with its fix."""
    found = loaded.blockers
    for b in found:
        print(f"looprail: error: {b.line()}", file=sys.stderr)
    if found:
        n = len(found)
        print(
            f"looprail: error: refusing to start: {n} problem{'s' * (n > 1)} would drop hooks "
            "or gates silently (see above)",
            file=sys.stderr,
        )
        return 2
    return 0


def _summary(outcome) -> int:
    from looprail.machine.progress import fmt_duration, plural
    from looprail.textsafe import one_line

    r = outcome.result
    run = f"run {outcome.run_id}: " if outcome.run_id else ""
    took = fmt_duration(r.duration_s)
    if r.status == "shipped":
        waves = plural(r.waves_run, "wave")
        hooks = f"{plural(r.hooks_dispatched, 'hook')} dispatched"
        print(f"{run}shipped in {took} ({plural(r.tasks_run, 'task')} run, {waves}, {hooks})")
    elif r.status == "paused":
        print(f"{run}paused: {one_line(r.reason)}", file=sys.stderr)
    else:
        # The state is where the run stayed; a refusal also names the point that refused (a
        # block at execute:pre stays in plan).
        refused = r.refused_by
        where = f", refused at {refused.point}" if refused is not None else ""
        print(f"{run}halted in {'/'.join(r.state)}{where}: {one_line(r.reason)}", file=sys.stderr)
    return r.exit_code
