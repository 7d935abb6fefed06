"""`looprail status`, `looprail history`, `looprail report`: what the run journal says.

Read-only: none of them creates a journal. A project without one has "no runs yet" (status and
history, exit 0); `report` has nothing to report and says so (exit 1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from looprail.cli._common import add_project_options, print_json, project_folder
from looprail.textsafe import one_line


def register(sub) -> None:
    """Add this group's commands to the top-level subparsers."""
    status = sub.add_parser(
        "status",
        help="the current (or last) run: state, wave, task counts, halt reason",
        description="Show the current or last run of the project from its journal.",
    )
    add_project_options(status)
    status.add_argument("--json", action="store_true", help="one line of JSON")
    status.set_defaults(handler=_status)

    history = sub.add_parser(
        "history",
        help="every recorded run, oldest first",
        description="List the project's runs from its journal, oldest first.",
    )
    add_project_options(history)
    history.add_argument("--json", action="store_true", help="one line of JSON")
    history.set_defaults(handler=_history)

    report = sub.add_parser(
        "report",
        help="the execution report of a run (default: the latest)",
        description="Show what a run did: transitions, points and their hooks, waves, tasks, "
        "native hooks, warnings. The --json form is stable (reportVersion 1, docs/journal.md).",
    )
    report.add_argument("run", nargs="?", metavar="RUN", help="run id or a unique prefix of it")
    add_project_options(report)
    report.add_argument("--json", action="store_true", help="the stable JSON form, one line")
    report.set_defaults(handler=_report)


def _open(project: str, *, required: bool):
    """The project's journal, or None when it has none (and `required` is false)."""
    from looprail.store import Journal, NoJournalError

    project_folder(project)
    try:
        return Journal.open(Path(project), create=False)
    except NoJournalError:
        if required:
            raise
        return None


def _status(args: argparse.Namespace) -> int:
    from looprail.store import lock_holder
    from looprail.store.report import format_duration, format_refusal, refused_at, run_header

    journal = _open(args.project, required=False)
    holder = lock_holder(Path(args.project))
    run = wave = header = refusal = None
    if journal is not None:
        with journal:
            run = journal.latest_run()
            if run is not None:
                header = run_header(run, journal.tasks(run.id))
                waves = journal.events(run.id, kinds=["wave_started"])
                wave = waves[-1].wave if waves else None
                refusal = refused_at(
                    run.status, journal.events(run.id, kinds=["halted", "run_resumed"])
                )
    live = bool(run and run.status == "running" and holder and holder.run_id == run.id)
    crashed = bool(run and run.status == "running" and holder is None)
    # Stopped from outside: its process died (crashed), or Ctrl-C/a signal halted it.
    interrupted = crashed or bool(
        run and run.status == "halted" and (run.halt_reason or "").startswith("interrupted")
    )

    if args.json:
        print_json(
            {
                "run": header.model_dump(mode="json") if header else None,
                "wave": wave,
                "live": live,
                "interrupted": interrupted,
                "refusedAt": None
                if refusal is None
                else {"point": refusal[0], "capId": refusal[1]},
                "lockHolder": None
                if holder is None
                else {
                    "pid": holder.pid,
                    "runId": holder.run_id,
                    "startedAt": holder.started_at,
                    "host": holder.host,
                },
            }
        )
        return 0
    if header is None or run is None:
        print("no runs yet")
        if holder is not None:
            print(f"lock: held by {holder.describe()}")
        return 0
    status = run.status
    if live:
        status += f" (live: pid {run.pid} on {run.host})"
    elif crashed:
        status += (
            f" (interrupted: pid {run.pid} on {run.host} is gone; `looprail resume` continues it)"
        )
    counts = header.tasks
    lines = [
        f"run {run.id} · phase {one_line(run.phase)} · {status}",
        f"state: {'/'.join(run.state) or '-'}{format_refusal(refusal)}",
        f"wave: {'-' if wave is None else wave}",
        f"tasks: {counts.done} done, {counts.running} running, {counts.pending} pending, "
        f"{counts.failed} failed",
        f"started: {run.started_at}"
        + (
            f" · ended {run.ended_at} ({format_duration(header.durationMs)})"
            if run.ended_at
            else ""
        ),
    ]
    if run.halt_reason:
        lines.append(f"halt reason: {one_line(run.halt_reason)}")
    if holder is not None and not live:
        lines.append(f"lock: held by {holder.describe()}")
    print("\n".join(lines))
    return 0


def _history(args: argparse.Namespace) -> int:
    from looprail.store.report import format_duration, run_header

    journal = _open(args.project, required=False)
    headers = []
    if journal is not None:
        with journal:
            headers = [run_header(run, journal.tasks(run.id)) for run in journal.runs()]
    if args.json:
        print_json({"runs": [header.model_dump(mode="json") for header in headers]})
        return 0
    if not headers:
        print("no runs yet")
        return 0
    rows = [("RUN", "PHASE", "STATUS", "STARTED", "TOOK", "TASKS", "REASON")]
    for h in headers:
        total = h.tasks.pending + h.tasks.running + h.tasks.done + h.tasks.failed
        rows.append(
            (
                h.id,
                h.phase,
                h.status,
                h.startedAt,
                format_duration(h.durationMs),
                f"{h.tasks.done}/{total} done",
                one_line(h.haltReason or ""),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())
    return 0


def _report(args: argparse.Namespace) -> int:
    from looprail.store import JournalError, build_report, render_report_text

    journal = _open(args.project, required=True)
    with journal:
        if args.run:
            run = journal.find_run(args.run)
        else:
            run = journal.latest_run()
            if run is None:
                raise JournalError(f"{journal.path}: no runs yet; nothing to report")
        report = build_report(journal, run.id)
    if args.json:
        print_json(report.model_dump(mode="json"))
    else:
        print(render_report_text(report), end="")
    return 0
