"""`looprail status`, `looprail history`, `looprail report`: what the run journal says.

Read-only: none of them creates a journal. A project without one has "no runs yet" (status and
history, exit 0); `report` has nothing to report and says so (exit 1)."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from looprail.cli._common import (
    add_project_options,
    add_project_positional,
    print_json,
    project_folder,
    project_of,
)
from looprail.textsafe import one_line


def register(sub) -> None:
    """Add this group's commands to the top-level subparsers."""
    status = sub.add_parser(
        "status",
        help="the current (or last) run: state, wave, task counts, halt reason",
        description="Show the current or last run of the project from its journal.",
    )
    add_project_positional(status)
    add_project_options(status)
    status.add_argument("--json", action="store_true", help="one line of JSON")
    status.set_defaults(handler=_status)

    history = sub.add_parser(
        "history",
        help="every recorded run, oldest first",
        description="List the project's runs from its journal, oldest first.",
    )
    add_project_positional(history)
    add_project_options(history)
    history.add_argument("--json", action="store_true", help="one line of JSON")
    history.set_defaults(handler=_history)

    report = sub.add_parser(
        "report",
        help="the execution report of a run (default: the latest)",
        description="Show what a run did: transitions, points and their hooks, waves, tasks, "
        "native hooks, warnings. The --json form is stable (reportVersion 1, docs/journal.md).",
    )
    report.add_argument(
        "first",
        nargs="?",
        metavar="PROJECT",
        help="project folder (default: --project, else the current directory); a single "
        "argument that is not a folder is taken as RUN",
    )
    report.add_argument("run", nargs="?", metavar="RUN", help="run id or a unique prefix of it")
    add_project_options(report)
    report.add_argument("--json", action="store_true", help="the stable JSON form, one line")
    report.set_defaults(handler=_report)


def project_and_run(args: argparse.Namespace) -> tuple[str, str | None]:
    """`[PROJECT] [RUN]`: with one argument, a folder is the project and anything else the run
    (`looprail report abc123` keeps working)."""
    first, run = args.first, args.run
    if first is not None and run is None and not Path(first).is_dir():
        return args.project, first
    return first or args.project, run


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
    # SQL aggregates, no task rows, no pydantic: cheap on a journal of any size.
    from looprail.store import summary
    from looprail.store.lock import lock_holder

    project = project_of(args)
    conn = _open_summary(project)
    holder = lock_holder(Path(project))
    header = wave = refusal = None
    if conn is not None:
        with contextlib.closing(conn):
            found = summary.headers(conn, latest=True)
            if found:
                header = found[0]
                wave = summary.last_wave(conn, header["id"])
                refusal = summary.refusal(conn, header["id"], header["status"])
    run_status = header["status"] if header else None
    live = bool(header and run_status == "running" and holder and holder.run_id == header["id"])
    crashed = bool(run_status == "running" and holder is None)
    # Stopped from outside: its process died (crashed), or Ctrl-C/a signal halted it.
    interrupted = crashed or bool(
        header and run_status == "halted" and (header["haltReason"] or "").startswith("interrupted")
    )

    if args.json:
        print_json(
            {
                "run": header,
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
    if header is None:
        print("no runs yet")
        if holder is not None:
            print(f"lock: held by {holder.describe()}")
        return 0
    from looprail.cli._common import paint

    status = paint(header["status"], header["status"])
    if live:
        status += f" (live: pid {header['pid']} on {header['host']})"
    elif crashed:
        status += (
            f" (interrupted: pid {header['pid']} on {header['host']} is gone; "
            "`looprail resume` continues it)"
        )
    counts = header["tasks"]
    lines = [
        f"run {header['id']} · phase {one_line(header['phase'])} · {status}",
        f"state: {'/'.join(header['state']) or '-'}{summary.format_refusal(refusal)}",
        f"wave: {'-' if wave is None else wave}",
        f"tasks: {counts['done']} done, {counts['running']} running, "
        f"{counts['pending']} pending, {counts['failed']} failed",
        f"started: {header['startedAt']}"
        + (
            f" · ended {header['endedAt']} ({summary.format_duration(header['durationMs'])})"
            if header["endedAt"]
            else ""
        ),
    ]
    if header["haltReason"]:
        lines.append(f"halt reason: {one_line(header['haltReason'])}")
    if holder is not None and not live:
        lines.append(f"lock: held by {holder.describe()}")
    print("\n".join(lines))
    return 0


def _open_summary(project: str):
    """The journal as a plain connection, or None when the project has none."""
    from looprail.fsutil import project_folder
    from looprail.store.schema import NoJournalError
    from looprail.store.summary import open_journal

    try:
        return open_journal(project_folder(project))
    except NoJournalError:
        return None


def _history(args: argparse.Namespace) -> int:
    from looprail.store.summary import format_duration, headers

    conn = _open_summary(project_of(args))
    runs = []
    if conn is not None:
        with contextlib.closing(conn):
            runs = headers(conn)
    if args.json:
        print_json({"runs": runs})
        return 0
    if not runs:
        print("no runs yet")
        return 0
    rows = [("RUN", "PHASE", "STATUS", "STARTED", "TOOK", "TASKS", "REASON")]
    for h in runs:
        total = sum(h["tasks"].values())
        rows.append(
            (
                h["id"],
                h["phase"],
                h["status"],
                h["startedAt"],
                format_duration(h["durationMs"]),
                f"{h['tasks']['done']}/{total} done",
                one_line(h["haltReason"] or ""),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())
    return 0


def _report(args: argparse.Namespace) -> int:
    from looprail.store import JournalError, build_report, render_report_text

    project, run_id = project_and_run(args)
    journal = _open(project, required=True)
    with journal:
        if run_id:
            run = journal.find_run(run_id)
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
