"""`looprail run` and `looprail resume`: the loop, end to end."""

from __future__ import annotations

import argparse
import contextlib
import math
import shlex
import sys
from pathlib import Path

from looprail.cli._common import (
    add_flavor_option,
    add_project_options,
    phase_number,
    print_json,
    project_of,
    warn,
)
from looprail.cli.journal import add_project_and_run, project_and_run
from looprail.cli.outcome import phase_summary, project_summary
from looprail.cli.sources import gsd_sources, no_capabilities
from looprail.errors import LooprailError, RefusedToStart, UsageError
from looprail.hooks.startup import blockers
from looprail.journal import Journal
from looprail.layout import LOGS_DIR, LOOPRAIL_DIR, normalize_phase_number
from looprail.machine.answers import check_answer, is_task_id
from looprail.machine.dask.cluster import parse_executor
from looprail.machine.dask.executor import DaskExecutor
from looprail.machine.dryrun import (
    dry_run,
    dry_run_plan,
    loop_dry_run,
    loop_dry_run_plan,
    unfinished_reason,
)
from looprail.machine.progress import Progress
from looprail.machine.project import journal_runs, no_phase_reason, pending, project_phases
from looprail.machine.project_loop import run_project, run_spent
from looprail.machine.runner import RunOptions
from looprail.machine.session.interactive import interactive_options
from looprail.machine.session.load import default_jobs, load_project, run_settings
from looprail.machine.session.phase import run_phase
from looprail.machine.started_with import remembered, resumed_run
from looprail.points import POINTS
from looprail.runtime.local import resolve_host_tool
from looprail.textsafe import plural


def _run_options(p: argparse.ArgumentParser) -> None:
    """The options `run` and `resume` share."""
    _checkpoint_options(p)
    _work_options(p)
    _agent_options(p)
    p.add_argument("--quiet", "-q", action="store_true", help="only the final summary")
    p.add_argument(
        "--json",
        action="store_true",
        help="end with one line of JSON on stdout: runId, phase, status, state, reason, "
        "refusedBy, exitCode, durationS, tasksRun, wavesRun, hooksDispatched, resumed, log (of "
        "the work that failed), warnings; without --phase (and for a resumed run of `run "
        "--all`/`--through`): loop, through, status, exitCode, shipped, finishedBefore, "
        "notRun, reason, spentUsd, phases (each phase's own summary)",
    )
    add_project_options(p)
    add_flavor_option(p, configured=True)


def _checkpoint_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--autonomous",
        action="store_true",
        help="pass checkpoints as the reference's auto-mode does: human-verify and tdd-review "
        'approve, a decision takes its first option; a human-action and gate="blocking-human" '
        "still stop",
    )
    p.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="TASK",
        help="approve one checkpoint task (e.g. 01-02/T3); repeatable",
    )
    p.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="TASK=TEXT",
        help="answer a checkpoint task: \"approved\" (or the plan's own word), a decision's "
        "option id, or a human-verify's issues to fix (e.g. 01-02/T3=clerk); repeatable",
    )
    p.add_argument(
        "--checkpoint-rounds",
        type=int,
        metavar="N",
        help="fix-up rounds a checkpoint's issues get before the run halts (default: "
        "looprail.checkpoint_rounds in .planning/config.json, else 3)",
    )


def _work_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="plans of one wave run N at a time (default: min(4, CPUs))",
    )
    p.add_argument(
        "--host-tool",
        metavar="TOOL",
        help="send step commands and query checks to this host tool (e.g. gsd_run; default: "
        "looprail.host_tool in .planning/config.json, else the gsd-tools of the GSD install "
        "whose capabilities are used)",
    )
    p.add_argument(
        "--accept-changes",
        action="append",
        nargs="?",
        const="",
        default=[],
        metavar="HOOK",
        help="resume even if manifests, plans or config changed since the crash; with HOOK "
        "(`CAPABILITY KIND at POINT`, as a refused resume names it): resume without that hook, "
        "which was active when the run started; repeatable",
    )


def _agent_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        metavar="SPEC",
        help="run each wave's plans on a Dask cluster: dask://HOST:PORT or dask://tls://HOST:PORT "
        "(a running scheduler you control; TLS settings from Dask's config) or dask-local:N (a "
        "LocalCluster of N worker processes over TLS with per-run credentials; add "
        ",dashboard=HOST:PORT for Dask's dashboard); needs looprail[dask]",
    )
    p.add_argument(
        "--agent",
        metavar="NAME",
        help=f"the runtime that does the work: local (default: executables under {LOOPRAIL_DIR}/), "
        "claude, codex, opencode, gemini, scripted, or an installed plugin; default: "
        "looprail.agent in .planning/config.json, else local",
    )
    p.add_argument(
        "--budget-usd",
        type=_positive_float,
        metavar="X",
        help="halt (resumable) before starting more agent work once the run has spent X USD "
        "(--through/--all: once all its phases together have)",
    )
    p.add_argument(
        "--interactive",
        action=argparse.BooleanOptionalAction,
        help="the discuss step is a conversation: the agent CLI's interactive mode (the local "
        "runtime's orchestrator) gets this terminal, and the loop goes on once the session ends "
        "with CONTEXT.md written (exit 1 without a terminal); default: looprail.interactive in "
        ".planning/config.json, else off",
    )


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def register(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a phase of the loop end to end (resumes an unfinished run); without --phase, "
        "the next unfinished phase of the ROADMAP (--through N, --all: phase after phase)",
        description="Run phase N of PROJECT through discuss → plan → execute (waves → plans → "
        f"tasks) → verify → ship, dispatching every active hook at each of the {len(POINTS)} "
        "points. An unfinished run of the same phase is resumed. Without --phase: the next "
        "unfinished phase of the ROADMAP; --through N and --all run phase after phase, in "
        "ROADMAP order, until one halts or pauses or the budget is spent (docs/loop.md, 'The "
        "project loop'). Exit 0 when the phase shipped, 1 when it halted (the reason is "
        "printed), 3 when a checkpoint needs a human.",
    )
    p.add_argument("project_pos", nargs="?", metavar="PROJECT", help="project folder (default: .)")
    _which_phases(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="walk the machine and print what would be dispatched; run and create nothing "
        "(with --json: one JSON document of the transitions, points, hooks, waves and tasks); "
        "a phase with no folder yet too; with --all/--through N: the phases that would run, in "
        "order, why each is unfinished, then the first in full",
    )
    p.add_argument(
        "--new",
        action="store_true",
        help="start a new run even if an unfinished one exists (it is marked failed)",
    )
    p.add_argument(
        "--no-journal",
        action="store_true",
        help="no journal, no resume, no lock (for experiments); the logs still go to "
        f"{LOOPRAIL_DIR}/{LOGS_DIR}/no-journal-<time>/",
    )
    _run_options(p)
    p.set_defaults(handler=run, flavor=None)  # None: the resumed run's, else the config's
    p = sub.add_parser(
        "resume",
        help="resume an unfinished run (default: the latest one)",
        description="Resume RUN (an id or unique prefix; default: the latest unfinished run). "
        "Finished tasks never run again; tasks that were in flight run again.",
    )
    add_project_and_run(p)
    _run_options(p)
    p.set_defaults(handler=resume, flavor=None, no_journal=False)  # a resume reads the journal


def _which_phases(p: argparse.ArgumentParser) -> None:
    """--phase N, --through N or --all (one of them)."""
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--phase",
        metavar="N",
        type=phase_number,
        help="phase number (e.g. 1, 02, 2.1); default: the next unfinished phase",
    )
    which.add_argument(
        "--through",
        metavar="N",
        type=phase_number,
        help="run the unfinished phases up to and including phase N, one after another",
    )
    which.add_argument(
        "--all",
        dest="all_phases",
        action="store_true",
        help="run every unfinished phase of the ROADMAP, one after another",
    )


def _options(args, executor=None):
    jobs = args.jobs if args.jobs is not None else default_jobs()
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.host_tool is not None:
        # the same rule as lint, said before anything runs rather than at the first gate
        found = resolve_host_tool(args.host_tool)
        if isinstance(found, str):
            raise UsageError(f"--host-tool: {found}")
    rounds = args.checkpoint_rounds
    if rounds is not None and rounds < 1:
        raise UsageError("--checkpoint-rounds must be at least 1")
    return RunOptions(
        flavor=args.flavor,
        jobs=jobs,
        autonomous=args.autonomous,
        approvals=frozenset(args.approve),
        answers=_answers(args),
        checkpoint_rounds=rounds,
        host_tool=args.host_tool,
        interactive=args.interactive,
        executor=executor,
        accepted_changes=frozenset(a for a in args.accept_changes if a),
    )


def _answers(args) -> tuple[tuple[str, str], ...]:
    """`--answer TASK=TEXT`, each checked now against the plan when it is already written (an
    option the decision does not offer, a task that is not a checkpoint: exit 1)."""
    out = []
    project = Path(project_of(args))
    for given in args.answer:
        task, eq, text = given.partition("=")
        if not eq or not is_task_id(task):
            raise UsageError(f"--answer {given!r}: give TASK=TEXT (e.g. 01-02/T3=approved)")
        check_answer(project, task.strip(), text)
        out.append((task.strip(), text))
    return tuple(out)


def _remember(args, project: str, run_id: str | None = None) -> None:
    """A resume keeps what its run started with (issue 40): without --capabilities,
    --host-tool or --flavor, the ones its journal record holds (`run`: the unfinished run of
    --phase, or of any phase; `resume`: RUN or the latest). Set here as if given as flags, they
    come before what `_load` reads where none is given: a flag, then the resumed run's record,
    then LOOPRAIL_CAPABILITIES, the config and a GSD install (`gsd_sources`)."""
    fresh = args.no_journal or getattr(args, "new", False) or getattr(args, "dry_run", False)
    phase = getattr(args, "phase", None)
    previous = None if fresh else resumed_run(project, phase, run_id)
    dirs, tool, flavor = remembered(previous)
    if previous is not None and not args.capabilities and dirs:
        args.capabilities = dirs
        if not args.quiet:
            given = " ".join(f"--capabilities {shlex.quote(d)}" for d in dirs)
            print(
                f"looprail: run {previous.id} started with {given}: resuming with them",
                file=sys.stderr,
            )
    if args.host_tool is None:
        args.host_tool = tool
    if args.flavor is None:
        args.flavor = flavor  # None: the config's looprail.flavor, else gsd (`_load`)


def run(args) -> int:
    loaded = _load(args, args.project_pos or args.project)
    if args.dry_run:
        return _dry_run(args, loaded)
    _interactive(args, loaded)
    if args.phase is None:
        loop: dict | None = None
        if args.through is not None:  # "02" and "2": one phase
            loop = {"through": normalize_phase_number(args.through)}
        elif args.all_phases:
            loop = {"all": True}
        return _run_project(args, loaded, _Announcing(args), loop=loop)
    with _executor(args, loaded) as executor:
        outcome = _run_phase(
            args,
            loaded,
            args.phase,
            _options(args, executor),
            _Announcing(args),
            journal=not args.no_journal,
            new_run=args.new,
        )
    return phase_summary(outcome, args.phase, as_json=args.json)


def _run_phase(args, loaded, phase: str, options: RunOptions, progress: Progress, **more):
    """`run_phase` with what every command line gives it."""
    return run_phase(
        loaded,
        phase,
        options=options,
        progress=progress,
        accept_changes=bool(args.accept_changes),
        agent=args.agent,
        budget_usd=args.budget_usd,
        **more,
    )


def _dry_run(args, loaded) -> int:
    """`--dry-run`: one phase (`--phase N`, else the next unfinished one), or with `--all` /
    `--through N` the phases the loop would run, in order, and the first in full."""
    runs = journal_runs(loaded.project) if not args.no_journal else None
    options = {"flavor": args.flavor, "host_tool": args.host_tool}
    if args.through is not None or args.all_phases:
        doc = loop_dry_run_plan(loaded, through=args.through, runs=runs, **options)
        if args.json:
            print_json({**doc, "warnings": list(loaded.warnings)})
            return 0
        warn(*loaded.warnings)
        sys.stdout.write(loop_dry_run(doc))
        return 0
    phase = args.phase if args.phase is not None else _next_phase(loaded, runs, args.json)
    if phase is None:
        return 0
    _announce(args)
    plan = dry_run_plan(loaded, phase, **options)
    if args.json:
        print_json({**plan, "warnings": [*loaded.warnings, *plan["warnings"]]})
        return 0
    warn(*loaded.warnings)
    sys.stdout.write(dry_run(plan))
    return 0


def _next_phase(loaded, runs, quiet: bool) -> str | None:
    """The next unfinished phase (for `run --dry-run` without `--phase`; a phase with no folder
    yet too), or None after saying that every phase is finished."""
    phases = project_phases(loaded.project, runs)
    todo = pending(phases)
    if not todo:
        if phases:
            print("every phase is finished; nothing to run", file=sys.stderr)
        else:
            why = no_phase_reason(loaded.project)
            said = f"no phase to run: {why}; nothing to run (use --phase N for one)"
            print(said, file=sys.stderr)
        return None
    if not quiet:
        print(f"next unfinished phase: {todo[0].number} ({unfinished_reason(todo[0])})")
    return todo[0].number


def _run_project(args, loaded, progress, *, loop: dict | None, before=(), spent=0.0) -> int:
    """`run` without `--phase`: the next unfinished phase, or (`loop`) phase after phase; each
    phase's own summary as it ends, then which phases shipped."""
    with _executor(args, loaded) as executor:
        options = _options(args, executor)

        def one(number: str, spent_before: float, first: bool):
            outcome = _run_phase(
                args,
                loaded,
                number,
                options,
                progress,
                journal=not args.no_journal,
                new_run=bool(getattr(args, "new", False)) and first,
                budget_spent=spent_before,
                loop=loop,
            )
            if not args.json:
                phase_summary(outcome, number)
            return outcome

        result = run_project(
            loaded,
            through=loop.get("through") if loop else None,
            one=loop is None,
            run=one,
            budget_usd=args.budget_usd,
            journal=not args.no_journal,
            progress=progress,
            spent_usd=spent,
        )
    if before:  # the run `looprail resume` resumed, which the loop went on from
        result.sessions[:0] = list(before)
        ran = {number for number, _ in before}
        result.finished_before = [n for n in result.finished_before if n not in ran]
    return project_summary(result, loop, as_json=args.json)


def _executor(args, loaded):
    """`--executor`: a Dask cluster for the plans of each wave (checked before anything runs:
    without dask installed, exit 1 with how to install it), or nothing."""
    if not getattr(args, "executor", None):
        return contextlib.nullcontext(None)

    parse_executor(args.executor)
    timeouts = run_settings(loaded).timeouts
    return DaskExecutor(
        args.executor,
        host_tool=args.host_tool,
        timeouts=timeouts.model_dump() if timeouts is not None else None,
    )


def resume(args) -> int:
    project, run_id = project_and_run(args)
    loaded = _load(args, project, run_id)
    _interactive(args, loaded)
    with Journal.open(loaded.project, create=False) as jr:
        target = jr.find_run(run_id) if run_id else jr.unfinished_run()
        if target is None:
            raise LooprailError("no unfinished run to resume")
    with _executor(args, loaded) as executor:
        options = _options(args, executor)
        outcome = _run_phase(
            args, loaded, target.phase, options, _Announcing(args), resume=target.id
        )
    loop = target.machine_config.get("loop")
    if not isinstance(loop, dict) or outcome.result.status != "shipped":
        return phase_summary(outcome, target.phase, as_json=args.json)
    # The run was one phase of `run --through N` / `run --all`: go on with the phases after it.
    if not args.json:
        phase_summary(outcome, target.phase)
    args.no_journal = False
    return _run_project(
        args,
        loaded,
        _Announcing(args),
        loop=loop,
        before=[(target.phase, outcome)],
        spent=run_spent(loaded.project, outcome.run_id),
    )


def _interactive(args, loaded) -> None:
    """`--interactive` (or `looprail.interactive`) decided before anything starts (an executor,
    the lock, the journal): without a terminal to talk on, exit 1 at once."""
    options = RunOptions(interactive=args.interactive)
    args.interactive = interactive_options(options, run_settings(loaded).interactive).interactive


def _load(args, project: str, run_id: str | None = None):
    """The project with the capabilities, host tool and flavor its flags, its config or a GSD
    install give (`gsd_sources`; a config value it cannot use refuses, exit 2). Nothing is
    dropped silently: a hook or gate that could not be loaded refuses the run before it starts
    (exit 1), one line per problem with its fix. Where they came from is said on the run's
    first line (`_Announcing`), after any refusal, and a run with no capability at all is
    warned about there."""
    _remember(args, project, run_id)
    found = gsd_sources(args, project)
    loaded = load_project(project, args.capabilities)
    found_blockers = blockers(loaded.compiled)
    for b in found_blockers:
        print(f"looprail: error: {b.line()}", file=sys.stderr)
    if found_blockers:
        problems = plural(len(found_blockers), "problem")
        raise RefusedToStart(
            f"refusing to start: {problems} would drop hooks or gates silently (see above)"
        )
    none = not loaded.compiled.capabilities
    args.announce = (found.line(), no_capabilities(found) if none else None)
    return loaded


def _announce(args) -> None:
    """Say `args.announce` (once per command): the line unless quiet, the warning always."""
    said = getattr(args, "announce", None)
    if said is None:
        return
    args.announce = None
    line, warning = said
    if not (args.quiet or args.json):
        print(line, file=sys.stderr)
    if warning is not None:
        warn(warning)


class _Announcing(Progress):
    """A run's progress: what `_load` found is said just before the run's own first line."""

    def __init__(self, args) -> None:
        super().__init__(quiet=args.quiet, verbose=args.verbose > 0)
        self._args = args

    def line(self, text: str) -> None:
        _announce(self._args)
        super().line(text)
