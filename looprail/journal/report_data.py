"""The execution report as plain data: the one fold from a run's rows to the report's stable
JSON form (docs/journal.md), the only declaration of its keys. `report_json` reads straight
from SQL only the event kinds the report shows; `report.build_report` folds the same rows
read through a `Journal` (a test checks both print the same JSON)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from looprail.journal.schema import JournalError
from looprail.journal.summary import duration_ms as _duration
from looprail.journal.summary import run_header

Row = Mapping[str, Any]
# A task row as the fold takes it: the values of TASK_COLUMNS, in that order.
TaskTuple = Sequence[Any]


REPORT_VERSION = 1
TASK_COLUMNS = ("task_key", "plan_id", "wave", "status", "attempt", "started_at", "ended_at")

# The event kinds a report shows; the rest (task rows say what tasks did) stay in SQLite.
REPORT_KINDS = (
    "transition",
    "point",
    "hook",
    "gate_verdict",
    "native_hook",
    "warning",
    "halted",
    "agent_call",
    "run_resumed",
    "wave_started",
    "check",
    "wave_finished",
    "resolver",
)


def find_run(conn: sqlite3.Connection, path: object, ref: str | None) -> sqlite3.Row:
    """The run `ref` names (an id or a unique prefix, case-insensitive), or the latest run."""
    if not ref:
        row = conn.execute("SELECT * FROM runs ORDER BY started_at DESC, id DESC").fetchone()
        if row is None:
            raise JournalError(f"{path}: no runs yet; nothing to report")
        return row
    exact = conn.execute("SELECT * FROM runs WHERE id = ?", (ref,)).fetchone()
    if exact is not None:
        return exact
    pattern = ref.upper().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = conn.execute(
        "SELECT * FROM runs WHERE upper(id) LIKE ? ESCAPE '\\' ORDER BY started_at, id",
        (pattern + "%",),
    ).fetchall()
    if not rows:
        raise JournalError(f"{path}: no run {ref!r} (`looprail history` lists them)")
    if len(rows) > 1:
        listed = ", ".join(row["id"] for row in rows[:3]) + (", …" if len(rows) > 3 else "")
        raise JournalError(
            f"{path}: run prefix {ref!r} matches {len(rows)} runs ({listed}); give more characters"
        )
    return rows[0]


def report_json(conn: sqlite3.Connection, path: object, ref: str | None) -> dict[str, object]:
    """The report of run `ref` (default: the latest), read with SQL from `conn`."""
    run = dict(find_run(conn, path, ref))
    for column in ("state", "machine_config", "inputs_digest"):
        run[column] = json.loads(run[column])
    marks = ", ".join("?" * len(REPORT_KINDS))
    events = _dicts(
        conn,
        f"SELECT * FROM events WHERE run_id = ? AND kind IN ({marks}) ORDER BY seq",
        (run["id"], *REPORT_KINDS),
    )
    for event in events:
        event["data"] = json.loads(event["data"])
    # Only the order of a wave's own tasks matters to the fold (waves are sorted there), so
    # registration (rowid) order is enough; plain tuples, no per-row dict.
    tasks = conn.cursor()
    tasks.row_factory = None
    tasks.execute(
        f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks WHERE run_id = ? ORDER BY rowid",
        (run["id"],),
    )
    return fold(run, events, tasks.fetchall())


def _dicts(conn: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> list[dict]:
    """Rows as dicts, built from plain tuples (twice as fast as `dict(sqlite3.Row)`)."""
    cursor = conn.cursor()
    cursor.row_factory = None
    cursor.execute(sql, params)
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor]


def fold(run: Row, events: Sequence[Row], tasks: Sequence[TaskTuple]) -> dict[str, object]:
    """The report of one run from its rows (JSON columns decoded; task rows as tuples of
    TASK_COLUMNS). Keys are in the order docs/journal.md lists them."""
    calls = _agent_calls(events)
    return {
        "reportVersion": REPORT_VERSION,
        "run": header(run, tasks),
        "transitions": [_transition(e) for e in events if e["kind"] == "transition"],
        "points": _points(events),
        "waves": _waves(events, tasks),
        "nativeHooks": [
            _pick(e, "seq", "ts", "cap_id", "outcome", "duration_ms", "message", "data")
            for e in events
            if e["kind"] == "native_hook"
        ],
        "warnings": [_note(e) for e in events if e["kind"] == "warning"],
        "halts": [_note(e) for e in events if e["kind"] == "halted"],
        "resumes": [_resume(e) for e in events if e["kind"] == "run_resumed"],
        "agentCalls": calls,
        "spend": _spend(calls) if calls else None,
    }


# The report's JSON key of a journal column, where they differ.
_KEYS = {"cap_id": "capId", "duration_ms": "durationMs", "task_id": "taskId", "hook_kind": "kind"}


def _pick(e: Row, *columns: str) -> dict[str, object]:
    """The event's `columns`, under the report's keys, in that order."""
    return {_KEYS.get(column, column): e[column] for column in columns}


def _transition(e: Row) -> dict[str, object]:
    data = e["data"]
    return {
        **_pick(e, "seq", "ts"),
        "source": _state(data.get("source")),
        "target": _state(data.get("target")),
        "event": _str(data.get("event")),
    }


def _resume(e: Row) -> dict[str, object]:
    data = e["data"]
    return {
        **_pick(e, "seq", "ts"),
        "previousStatus": _str(data.get("previous_status")),
        "previousPid": data.get("previous_pid"),
        "inFlight": list(data.get("in_flight", [])),
        "inputsChanged": list(data.get("inputs_changed", [])),
    }


def header(run: Row, tasks: Iterable[TaskTuple]) -> dict[str, object]:
    counts = {"pending": 0, "running": 0, "done": 0, "failed": 0}
    for task in tasks:
        counts[task[3]] += 1
    return run_header(run, counts, list(run["state"]), run["machine_config"])


def _agent_calls(events: Sequence[Row]) -> list[dict[str, Any]]:
    rows = []
    for e in events:
        if e["kind"] != "agent_call":
            continue
        d = e["data"]
        plan, task = _str(d.get("planId")), _str(d.get("taskId"))
        rows.append(
            {
                "seq": e["seq"],
                "ts": e["ts"],
                "agent": _str(d.get("agent")),
                "kind": _str(d.get("kind")),
                "name": _str(d.get("name")),
                "planId": plan,
                "taskKey": f"{plan}/{task}" if plan and task else None,
                "role": _str(d.get("role")),
                "model": _str(d.get("model")),
                "ok": bool(d.get("ok")),
                "sessionId": _str(d.get("sessionId")),
                "inputTokens": _int(d.get("inputTokens")),
                "cachedInputTokens": _int(d.get("cachedInputTokens")),
                "outputTokens": _int(d.get("outputTokens")),
                "costUsd": _float(d.get("costUsd")),
                "costEstimated": d.get("costEstimated") is True,
                "durationMs": _int(d.get("durationMs")),
                "transcript": _str(d.get("transcript")),
            }
        )
    return rows


def _spend(calls: list[dict[str, Any]]) -> dict[str, Any]:
    def total(rows: list[dict[str, Any]]) -> dict[str, Any]:
        costs = [r["costUsd"] for r in rows if r["costUsd"] is not None]
        return {
            "calls": len(rows),
            "inputTokens": sum(r["inputTokens"] or 0 for r in rows),
            "cachedInputTokens": sum(r["cachedInputTokens"] or 0 for r in rows),
            "outputTokens": sum(r["outputTokens"] or 0 for r in rows),
            "costUsd": round(sum(costs), 6) if costs else None,
            "estimated": any(r["costEstimated"] for r in rows),
        }

    roles = list(dict.fromkeys(r["role"] for r in calls if r["role"]))  # in the loop's order
    plans = sorted({r["planId"] for r in calls if r["planId"]})
    tasks = sorted({r["taskKey"] for r in calls if r["taskKey"]})
    return {
        "run": total(calls),
        "roles": {role: total([r for r in calls if r["role"] == role]) for role in roles},
        "plans": {p: total([r for r in calls if r["planId"] == p]) for p in plans},
        "tasks": {t: total([r for r in calls if r["taskKey"] == t]) for t in tasks},
    }


def _points(events: Sequence[Row]) -> list[dict[str, object]]:
    dispatches: dict[str, int] = {}  # in the order the points were first crossed
    hooks: dict[str, list[dict[str, object]]] = {}
    verdicts: dict[str, list[dict[str, object]]] = {}
    for e in events:
        point = e["point"]
        if e["kind"] not in ("point", "hook", "gate_verdict") or point is None:
            continue
        if point not in dispatches:
            dispatches[point], hooks[point], verdicts[point] = 0, [], []
        if e["kind"] == "point":
            dispatches[point] += 1
        elif e["kind"] == "hook":
            columns = ("seq", "ts", "wave", "hook_kind", "cap_id", "outcome", "duration_ms")
            hooks[point].append(_pick(e, *columns, "message"))
        else:
            verdicts[point].append(_pick(e, "seq", "ts", "wave", "cap_id", "outcome", "message"))
    return [
        {"point": p, "dispatches": dispatches[p], "hooks": hooks[p], "verdicts": verdicts[p]}
        for p in dispatches
    ]


def _waves(events: Sequence[Row], tasks: Sequence[TaskTuple]) -> list[dict[str, object]]:
    started: dict[int | None, Row] = {}
    finished: dict[int | None, Row] = {}
    checks: dict[str, list[dict[str, object]]] = {}  # each task's, in journal order
    for e in events:
        if e["kind"] == "wave_started":
            started.setdefault(e["wave"], e)
        elif e["kind"] == "wave_finished":
            finished[e["wave"]] = e  # a wave re-finished after a resume: the last word counts
        elif e["kind"] == "check" and e["task_id"]:
            checks.setdefault(e["task_id"], []).append(_check(e))
    resolvers = {e["task_id"]: e for e in events if e["kind"] == "resolver" and e["task_id"]}
    plan_order: dict[int | None, list[str | None]] = {
        wave: list(event["data"].get("plans", [])) for wave, event in started.items()
    }
    by_plan: dict[tuple[int | None, str | None], list[dict[str, object]]] = {}
    for task in tasks:
        key, plan, wave = task[0], task[1], task[2]
        plans = plan_order.setdefault(wave, [])
        rows = by_plan.get((wave, plan))
        if rows is None:
            if plan not in plans:
                plans.append(plan)
            rows = by_plan[wave, plan] = []
        rows.append(_task_report(task, resolvers.get(key), checks.get(key, [])))

    waves = []
    for wave in sorted(plan_order, key=lambda w: (w is None, w or 0)):
        begin, end = started.get(wave), finished.get(wave)
        duration = end["duration_ms"] if end and end["duration_ms"] is not None else None
        if duration is None and begin and end:
            duration = _duration(begin["ts"], end["ts"])
        waves.append(
            {
                "wave": wave,
                "startedAt": begin["ts"] if begin else None,
                "endedAt": end["ts"] if end else None,
                "durationMs": duration,
                # A `wave_finished` means done (journals older than its `outcome` have none).
                "outcome": (end["outcome"] or "done") if end else None,
                "plans": [
                    {"planId": plan, "tasks": by_plan.get((wave, plan), [])}
                    for plan in plan_order[wave]
                ],
            }
        )
    return waves


def _check(e: Row) -> dict[str, object]:
    """A task's `check` event: a check that ran, or `unchecked` and why (docs/loop.md)."""
    data = e["data"] or {}
    return {
        "outcome": e["outcome"],
        "command": _str(data.get("command")),
        "exitCode": _int(data.get("exit_code")),
        "attempt": _int(data.get("attempt")),
        "durationMs": e["duration_ms"],
        "message": e["message"],
        "rule": _str(data.get("rule")),
        "log": _str(data.get("log")),
        "tree": _str(data.get("tree")),
    }


def _task_report(
    task: TaskTuple, resolver: Row | None, checks: list[dict[str, object]]
) -> dict[str, object]:
    key, plan, wave, status, attempt, started, ended = task
    return {
        "key": key,
        "planId": plan,
        "wave": wave,
        "status": status,
        "attempts": attempt,
        "startedAt": started,
        "endedAt": ended,
        "durationMs": _duration(started, ended),
        "resolver": None if resolver is None else _resolver(resolver),
        "checks": checks,
    }


def _resolver(e: Row) -> dict[str, object]:
    data = e["data"]
    # the runner writes `trackerId`; early journals wrote `tracker_id`
    tracker = _str(data.get("trackerId", data.get("tracker_id")))
    return {
        "seq": e["seq"],
        "trackerId": tracker,
        **_pick(e, "cap_id", "outcome", "duration_ms", "message"),
    }


def _note(e: Row) -> dict[str, object]:
    return _pick(e, "seq", "ts", "point", "cap_id", "task_id", "message")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _state(value: Any) -> str | None:
    """A machine configuration as people write it: `execute/wave_running`."""
    if isinstance(value, list):
        return "/".join(str(v) for v in value) or None
    return _str(value)
