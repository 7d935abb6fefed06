"""The execution report of one run, from the journal alone: `build_report` folds the run's rows
(`report_data.fold`, the JSON `looprail report --json` prints); `render_report_text` is the
same facts for people."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from looprail.journal.models import EventRow, RunRow, TaskRow
from looprail.journal.report_data import TASK_COLUMNS, fold
from looprail.journal.summary import format_duration, format_refusal
from looprail.journal.writer import Journal
from looprail.layout import log_of

# The report as the fold builds it: its keys and their order are docs/journal.md's table.
RunReport = dict[str, Any]
Row = Mapping[str, Any]


def build_report(journal: Journal, run_id: str) -> RunReport:
    """The report of run `run_id` (an exact id; use `journal.find_run` for prefixes)."""
    run = journal.get_run(run_id)
    if run is None:
        run = journal.find_run(run_id)
    return report_from_rows(run, journal.events(run.id), journal.tasks(run.id))


def report_from_rows(run: RunRow, events: list[EventRow], tasks: list[TaskRow]) -> RunReport:
    """The pure part of `build_report`."""
    return fold(
        run.model_dump(),
        [e.model_dump() for e in events],
        [tuple(getattr(t, c) for c in TASK_COLUMNS) for t in tasks],
    )


def format_spend(s: Row) -> str:
    calls = f"{s['calls']} call{'s' if s['calls'] != 1 else ''}"
    cost = f"${s['costUsd']:.4f}" if s["costUsd"] is not None else "cost not reported"
    if s["estimated"]:
        cost = f"~{cost} (estimated from tokens)"
    cached = f" ({s['cachedInputTokens']} cached)" if s["cachedInputTokens"] else ""
    return f"{cost} · {s['inputTokens']} in{cached} / {s['outputTokens']} out tokens · {calls}"


# -- text ------------------------------------------------------------------------------------

_MARKS = {
    **dict.fromkeys(("ok", "done", "pass", "shipped"), "✓"),
    **dict.fromkeys(("failed", "blocked", "block", "halted"), "✗"),
    **dict.fromkeys(("warned", "advisory"), "!"),
    **{"skipped": "-", "running": "…", "pending": "·"},
}


def render_report_text(report: RunReport) -> str:
    """The report for a terminal: one header, then only the sections that have rows."""
    lines = _header_lines(report)
    for section in (_transitions, _points, _waves, _spend, _native_hooks, _notes, _resumes):
        lines += section(report)
    return "\n".join(lines) + "\n"


def _header_lines(report: RunReport) -> list[str]:
    run = report["run"]
    counts = run["tasks"]
    took = f" · ended {run['endedAt']} · took {format_duration(run['durationMs'])}"
    lines = [
        f"Run {run['id']} · phase {run['phase']} · {run['status']}",
        f"  started {run['startedAt']}{took if run['endedAt'] else ''}",
        f"  state: {'/'.join(run['state']) or '-'}{format_refusal(refusal_of(report))}",
    ]
    if run["haltReason"]:  # the one place the halt reason is stated in full
        lines.append("  reason: " + run["haltReason"].strip().replace("\n", "\n          "))
    if log := log_of(run["haltReason"]):  # the failed work's log, on a line of its own
        lines.append(f"  log: {log}")
    lines.append(
        f"  tasks: {counts['done']} done, {counts['failed']} failed, "
        f"{counts['running']} running, {counts['pending']} pending"
    )
    return lines


def _transitions(report: RunReport) -> list[str]:
    if not report["transitions"]:
        return []
    return ["", "Transitions"] + [
        f"  {t['source'] or '?'} → {t['target'] or '?'}"
        + (f"  ({t['event']})" if t["event"] else "")
        for t in report["transitions"]
    ]


def _points(report: RunReport) -> list[str]:
    if not report["points"]:
        return []
    said = _said_by_halt(report)
    lines = ["", "Points"]
    for point in report["points"]:
        plural = "es" if point["dispatches"] != 1 else ""
        lines.append(f"  {point['point']}  ({point['dispatches']} dispatch{plural})")
        for row in point["hooks"] + point["verdicts"]:
            hook = "durationMs" in row  # a verdict row has no kind, duration or wave shown
            lines.append(
                "    "
                + _columns(
                    _mark(row["outcome"]),
                    f"{(row['kind'] or '?') if hook else 'verdict':<12}",
                    f"{row['capId'] or '-':<24}",
                    f"{row['outcome'] or '-':<9}",
                    f"{format_duration(row['durationMs']) if hook else '':>7}",
                    None if not hook or row["wave"] is None else f"wave {row['wave']}",
                    said(row["message"]),
                )
            )
    return lines


def _waves(report: RunReport) -> list[str]:
    if not report["waves"]:
        return []
    lines = ["", "Waves"]
    for wave in report["waves"]:
        label = "no wave" if wave["wave"] is None else f"wave {wave['wave']}"
        took = format_duration(wave["durationMs"])
        lines.append("  " + _columns(label, wave["outcome"] or "", took))
        for plan in wave["plans"]:
            lines.append(f"    plan {plan['planId'] or '-'}")
            for task in plan["tasks"]:
                lines.append("      " + _task_line(task))
                lines += ["        " + _check_line(check) for check in task.get("checks") or []]
    return lines


def _check_line(check: Row) -> str:
    """`✓ check grep -q hello out.txt  exit 0  attempt 1`."""
    if check["outcome"] == "unchecked":
        return f"! unverified: no automated check ({check['message']})"
    caught = f"[{check['rule']}]" if check["rule"] else None
    return _columns(
        _mark("done" if check["outcome"] == "passed" else "failed"),
        f"check {check['command']}",
        check["message"],
        f"attempt {check['attempt']}",
        format_duration(check["durationMs"]),
        caught,
    )


def _task_line(task: Row) -> str:
    tries = f"attempt{'s' if task['attempts'] != 1 else ''} {task['attempts']}"
    resolver = task["resolver"]
    tracker = f"tracker {resolver['trackerId']} {resolver['outcome'] or ''}" if resolver else None
    return _columns(
        _mark(task["status"]),
        f"{task['key']:<20}",
        f"{task['status']:<8}",
        tries,
        format_duration(task["durationMs"]),
        tracker,
    )


def _spend(report: RunReport) -> list[str]:
    spend = report["spend"]
    if spend is None:
        return []
    calls = report["agentCalls"]
    agents = sorted({c["agent"] for c in calls if c["agent"]})
    lines = ["", f"Agent work ({', '.join(agents) or '?'})"]
    lines.append(f"  run: {format_spend(spend['run'])}")
    models = _role_models(calls)
    roles = spend.get("roles", {})
    lines += [f"  role {r}{models.get(r, '')}: {format_spend(s)}" for r, s in roles.items()]
    lines += [f"  plan {plan}: {format_spend(s)}" for plan, s in spend["plans"].items()]
    lines += [f"    task {task}: {format_spend(s)}" for task, s in spend["tasks"].items()]
    lines.append("  calls (transcripts):")
    for c in calls:
        what = c["taskKey"] or f"{c['kind']} {c['name']}"
        cost = f"${c['costUsd']:.4f}" if c["costUsd"] is not None else "-"
        cost = f"~{cost}" if c["costEstimated"] else cost
        mark = "✓" if c["ok"] else "✗"
        cells = (mark, f"{what:<24}", f"{cost:>9}", c["sessionId"], c["transcript"])
        lines.append("    " + _columns(*cells))
    return lines


def _role_models(calls: list[Row]) -> dict[str, str]:
    """` (model, …)` per role: the models its calls were given."""
    seen: dict[str, dict[str, None]] = {}
    for c in calls:
        if c["role"]:
            seen.setdefault(c["role"], {})[c["model"] or "CLI default"] = None
    return {role: f" ({', '.join(models)})" for role, models in seen.items()}


def _native_hooks(report: RunReport) -> list[str]:
    if not report["nativeHooks"]:
        return []
    lines = ["", "Native hooks"]
    for row in report["nativeHooks"]:
        data = row["data"] or {}
        # an engine row is either the hook's own result or its owned Action's selection
        what = (
            f"action {data.get('actionType')}" + (" (guarded)" if data.get("guarded") else "")
            if data.get("type") == "action"
            else f"at {data.get('event', '?')}"
        )
        lines.append(
            "  "
            + _columns(
                _mark(row["outcome"]),
                f"{row['capId'] or '-':<24}",
                f"{row['outcome'] or '-':<9}",
                f"{format_duration(row['durationMs']):>7}",
                what,
                _cell(row["message"]),
            )
        )
    return lines


def _notes(report: RunReport) -> list[str]:
    lines: list[str] = []
    reason = report["run"]["haltReason"]
    # the halt the header states is not repeated (earlier halts, before a resume, are listed)
    halts = [h for h in report["halts"] if not (reason and h["message"] == reason)]
    for title, notes in (("Warnings", report["warnings"]), ("Halts", halts)):
        if notes:
            lines += ["", title]
            for note in notes:
                where = " ".join(x for x in (note["point"], note["capId"], note["taskId"]) if x)
                text = _cell(note["message"]) or ""
                lines.append(f"  {where + ': ' if where else ''}{text}".rstrip())
    return lines


def _cell(text: str | None) -> str | None:
    """A message in one row of a table: its first line, and how many more it has."""
    rows = [row.strip() for row in (text or "").splitlines() if row.strip()]
    if len(rows) <= 1:
        return rows[0] if rows else None
    more = len(rows) - 1
    return f"{rows[0]} (+{more} more line{'s' * (more > 1)}: report --json)"


def _said_by_halt(report: RunReport) -> Callable[[str | None], str | None]:
    """A hook's message for its row, or a pointer to the halt reason that says it."""
    reason = report["run"]["haltReason"] or ""

    def said(message: str | None) -> str | None:
        if message and message.strip() and message.strip() in reason:
            return "(the halt reason, above)"
        return _cell(message)

    return said


def _resumes(report: RunReport) -> list[str]:
    if not report["resumes"]:
        return []
    lines = ["", "Resumes"]
    for resume in report["resumes"]:
        parts = [f"  {resume['ts']} from {resume['previousStatus'] or '?'}"]
        if resume["previousPid"]:
            parts.append(f"(pid {resume['previousPid']})")
        if resume["inFlight"]:
            parts.append(f"re-running {', '.join(resume['inFlight'])}")
        lines.append(" ".join(parts))
        lines += [f"    {change}" for change in resume["inputsChanged"]]
    return lines


def current_halt(report: RunReport) -> Row | None:
    """The run's last halt since its last resume, or None."""
    since = max((r["seq"] for r in report["resumes"]), default=0)
    halts = [h for h in report["halts"] if h["seq"] > since]
    return halts[-1] if halts else None


def refusal_of(report: RunReport) -> tuple[str, str | None] | None:
    """(point, capId) of the hook that refused a `halted` run (its state is where it stayed,
    not where it was refused: a block at `execute:pre` stays in `plan`)."""
    halt = current_halt(report) if report["run"]["status"] == "halted" else None
    return (halt["point"], halt["capId"]) if halt is not None and halt["point"] else None


def _mark(outcome: str | None) -> str:
    return _MARKS.get(outcome or "", "?")


def _columns(*cells: str | None) -> str:
    return "  ".join(cell for cell in cells if cell).rstrip()
