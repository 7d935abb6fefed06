"""`looprail status`, `looprail history`, `looprail report`: what the run journal says.

Read-only: none of them creates a journal. A project without one has "no runs yet" (status and
history, exit 0); `report` has nothing to report and says so (exit 1)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from looprail.cli._common import command, paint, print_json, print_table, project_folder, project_of
from looprail.errors import LooprailError
from looprail.journal import (
    Journal,
    JournalError,
    build_report,
    render_report_text,
    report_data,
    summary,
)
from looprail.journal.lock import LockInfo, lock_holder
from looprail.journal.schema import NoJournalError
from looprail.layout import PHASES_DIR, ROADMAP_FILE, log_of
from looprail.machine.project import journal_runs, no_phase_reason, project_phases
from looprail.textsafe import one_line


def register(sub) -> None:
    command(
        sub,
        "status",
        _status,
        "the current (or last) run: state, wave, task counts, halt reason",
        "Show the current or last run of the project from its journal.",
        positional=True,
        json="one line of JSON",
    )
    command(
        sub,
        "history",
        _history,
        "every recorded run, oldest first",
        "List the project's runs from its journal, oldest first.",
        positional=True,
        json="one line of JSON",
    )
    report = command(
        sub,
        "report",
        _report,
        "the execution report of a run (default: the latest)",
        "Show what a run did: transitions, points and their hooks, waves, tasks, "
        "native hooks, warnings. The --json form is stable (reportVersion 1, docs/journal.md).",
        json="the stable JSON form, one line",
    )
    add_project_and_run(report)


def add_project_and_run(parser: argparse.ArgumentParser) -> None:
    """`[PROJECT] [RUN]` (read back with `project_and_run`)."""
    parser.add_argument(
        "first",
        nargs="?",
        metavar="PROJECT",
        help="project folder (default: --project, else the current directory); a single "
        "argument that is not a folder is taken as RUN",
    )
    parser.add_argument("run", nargs="?", metavar="RUN", help="run id or a unique prefix of it")


def project_and_run(args: argparse.Namespace) -> tuple[str, str | None]:
    """`[PROJECT] [RUN]`: with one argument, a folder is the project and anything else the run
    (`looprail report abc123` keeps working)."""
    first, run = args.first, args.run
    if first is not None and run is None and not Path(first).is_dir():
        return args.project, first
    return first or args.project, run


def _status(args: argparse.Namespace) -> int:
    # SQL aggregates, no task rows, no pydantic: cheap on a journal of any size.
    project = project_of(args)
    conn = _open_summary(project)
    holder = lock_holder(Path(project))
    header, wave, refusal = _latest_run(conn, project)
    run_status = header["status"] if header else None
    live = bool(header and run_status == "running" and holder and holder.run_id == header["id"])
    crashed = bool(run_status == "running" and holder is None)
    # Stopped from outside: its process died (crashed), or Ctrl-C/a signal halted it.
    interrupted = crashed or bool(
        header and run_status == "halted" and (header["haltReason"] or "").startswith("interrupted")
    )
    log = log_of(header["haltReason"]) if header else None
    phases = _project_phases(project, conn is not None)
    if args.json:
        refused = None if refusal is None else {"point": refusal[0], "capId": refusal[1]}
        lock = None if holder is None else _holder_json(holder)
        print_json(
            {"run": header, "wave": wave, "live": live, "interrupted": interrupted}
            | {"refusedAt": refused, "lockHolder": lock, "log": log}
            | {"phases": [p.as_json() for p in phases]}
        )
        return 0
    if header is None:
        lines = ["no runs yet"]
        if phases:
            lines.append(_phases_line(phases))
        elif not args.quiet and (why := _no_phase_reason(project)) is not None:
            lines.append(f"phases: none ({why})")
        if holder is not None:
            lines.append(f"lock: held by {holder.describe()}")
    else:
        lines = _status_lines(header, wave, refusal, live=live, crashed=crashed)
        if log:
            lines.append(f"log: {one_line(log)}")
        if holder is not None and not live:
            lines.append(f"lock: held by {holder.describe()}")
        if phases:
            lines.append(_phases_line(phases))
    print("\n".join(lines[:1] if args.quiet else lines))  # -q: the latest run, how it stands
    return 0


def _latest_run(conn, project: str):
    """(header, last wave, refusal) of the latest run, Nones when there is none."""
    if conn is None:
        return None, None, None
    with contextlib.closing(conn), summary.reading(summary.journal_file(project)):
        found = summary.headers(conn, latest=True)
        if not found:
            return None, None, None
        header = found[0]
        wave = summary.last_wave(conn, header["id"])
        return header, wave, summary.refusal(conn, header["id"], header["status"])


def _holder_json(holder: LockInfo) -> dict[str, object]:
    """The run lock's holder as `status --json` shows it."""
    return {
        "pid": holder.pid,
        "runId": holder.run_id,
        "startedAt": holder.started_at,
        "host": holder.host,
    }


def _status_lines(header, wave, refusal, *, live: bool, crashed: bool) -> list[str]:
    """The run's lines of `looprail status`: id, phase and status, state, wave, tasks, times."""
    status = paint(header["status"], header["status"])
    if live:
        status += f" (live: pid {header['pid']} on {header['host']})"
    elif crashed:
        status += (
            f" (interrupted: pid {header['pid']} on {header['host']} is gone; "
            "`looprail resume` continues it)"
        )
    counts = header["tasks"]
    ended = header["endedAt"]
    took = f" · ended {ended} ({summary.format_duration(header['durationMs'])})" if ended else ""
    lines = [
        f"run {header['id']} · phase {one_line(header['phase'])} · {status}",
        f"state: {'/'.join(header['state']) or '-'}{summary.format_refusal(refusal)}",
        f"wave: {'-' if wave is None else wave}",
        f"tasks: {counts['done']} done, {counts['running']} running, "
        f"{counts['pending']} pending, {counts['failed']} failed",
        f"started: {header['startedAt']}{took}",
    ]
    if header["haltReason"]:
        lines.append(f"halt reason: {one_line(header['haltReason'])}")
    return lines


def _project_phases(project: str, has_journal: bool) -> list:
    """The project's phases (ROADMAP order) with where each stands, for `status`; none when the
    folder is not a project or its phases cannot be read (status still says what it can, and
    why in one line: a ROADMAP.md that is a FIFO, a device or too large)."""
    if not any(os.path.exists(os.path.join(project, p)) for p in (PHASES_DIR, ROADMAP_FILE)):
        return []  # not a project with phases: nothing more to import

    try:
        return project_phases(project, journal_runs(Path(project)) if has_journal else None)
    except (LooprailError, OSError) as exc:
        print(f"looprail: warning: {one_line(str(exc))}", file=sys.stderr)
        return []


def _no_phase_reason(project: str) -> str | None:
    """Why a project with a ROADMAP.md has no phase (`no_phase_reason`); None without one, or
    when it cannot be read (`_project_phases` has said so, in its one line)."""
    if not os.path.exists(os.path.join(project, ROADMAP_FILE)):
        return None
    try:
        return no_phase_reason(project)
    except LooprailError:
        return None


def _phases_line(phases: list) -> str:
    """`phases: 1 shipped · 2 running · 3 not started` (the next unfinished one marked)."""
    nxt = next((p.number for p in phases if not p.finished), None)
    words = [f"{p.number} {p.status}" + (" (next)" if p.number == nxt else "") for p in phases]
    return "phases: " + " · ".join(words)


def _open_summary(project: str):
    """The journal as a plain connection, or None when the project has none."""
    try:
        return summary.open_journal(project_folder(project))
    except NoJournalError:
        return None


def _history(args: argparse.Namespace) -> int:
    project = project_of(args)
    conn = _open_summary(project)
    runs = []
    if conn is not None:
        with contextlib.closing(conn), summary.reading(summary.journal_file(project)):
            runs = summary.headers(conn)
    if args.json:
        print_json({"runs": runs})
        return 0
    if not runs:
        print("no runs yet")
        return 0
    rows: list[tuple[str, ...]] = [("RUN", "PHASE", "STATUS", "STARTED", "TOOK", "TASKS", "REASON")]
    for h in runs:
        total = sum(h["tasks"].values())
        rows.append(
            (
                h["id"],
                h["phase"],
                h["status"],
                h["startedAt"],
                summary.format_duration(h["durationMs"]),
                f"{h['tasks']['done']}/{total} done",
                one_line(h["haltReason"] or ""),
            )
        )
    print_table(rows)
    return 0


def _report(args: argparse.Namespace) -> int:
    project, run_id = project_and_run(args)
    project_folder(project)
    if args.json:
        # Straight from SQL to JSON: the report kinds of events only, no pydantic.
        path = summary.journal_file(project)
        conn = summary.open_journal(project)
        with contextlib.closing(conn), summary.reading(path):
            data = report_data.report_json(conn, path, run_id)
        # Where the project stands, beside the run (not part of the run's own report).
        data["projectPhases"] = [p.as_json() for p in _project_phases(project, True)]
        print_json(data)
        return 0
    with Journal.open_readonly(Path(project)) as journal:
        run = journal.find_run(run_id) if run_id else journal.latest_run()
        if run is None:
            raise JournalError(f"{journal.path}: no runs yet; nothing to report")
        report = build_report(journal, run.id)
    text = render_report_text(report)
    if phases := _project_phases(project, True):
        rows = [
            f"  {p.number:<6} {p.status:<12} {p.name}"
            + (f"  (run {p.run_id})" if p.run_id else "")
            + ("  ← this run" if p.run_id == run.id else "")
            for p in phases
        ]
        text += "\n".join(["", "Project phases", *rows]) + "\n"
    print(text, end="")
    return 0
