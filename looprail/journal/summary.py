"""What `looprail status` and `looprail history` show, straight from SQL (task counts by
`GROUP BY`; no pydantic import, so these commands cost little more than Python's start-up).
Each header is the report's `run` (`run_header`, the one place its keys are written)."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

from looprail.journal.schema import connect
from looprail.journal.schema import reading as reading  # re-exported
from looprail.layout import JOURNAL_FILE, project_path


def open_journal(project: str | Path) -> sqlite3.Connection:
    """The project's journal, read-only (`schema.connect`). Read its rows inside
    `reading(path)`, so damage met in a page is one line too."""
    return connect(journal_file(project), readonly=True)


def journal_file(project: str | Path) -> Path:
    """The project's journal, `.looprail/journal.sqlite`."""
    return Path(project_path(project, JOURNAL_FILE))


def headers(conn: sqlite3.Connection, *, latest: bool = False) -> list[dict[str, Any]]:
    """Every run's header, oldest first (or only the latest run's)."""
    order = "started_at DESC, id DESC LIMIT 1" if latest else "started_at, id"
    runs = conn.execute(f"SELECT * FROM runs ORDER BY {order}").fetchall()
    counts: dict[str, dict[str, int]] = {}
    where, params = ("WHERE run_id = ?", (runs[0]["id"],)) if latest and runs else ("", ())
    for row in conn.execute(
        f"SELECT run_id, status, COUNT(*) FROM tasks {where} GROUP BY run_id, status", params
    ):
        counts.setdefault(row[0], {})[row[1]] = row[2]
    return [_header(run, counts.get(run["id"], {})) for run in runs]


def _header(run: sqlite3.Row, counts: dict[str, int]) -> dict[str, Any]:
    return run_header(run, counts, json.loads(run["state"]), json.loads(run["machine_config"]))


def run_header(
    run: Any, counts: dict[str, int], state: list[str], machine_config: Any
) -> dict[str, Any]:
    """A run's header as `status --json`, `history --json` and the report print it; `counts`
    are its tasks by status, `state` and `machine_config` its decoded JSON columns."""
    return {
        "id": run["id"],
        "phase": run["phase"],
        "status": run["status"],
        "startedAt": run["started_at"],
        "endedAt": run["ended_at"],
        "durationMs": duration_ms(run["started_at"], run["ended_at"]),
        "haltReason": run["halt_reason"],
        "state": state,
        "pid": run["pid"],
        "host": run["host"],
        "machineConfig": machine_config,
        "tasks": {k: counts.get(k, 0) for k in ("pending", "running", "done", "failed")},
    }


def last_wave(conn: sqlite3.Connection, run_id: str) -> int | None:
    row = conn.execute(
        "SELECT wave FROM events WHERE run_id = ? AND kind = 'wave_started' "
        "ORDER BY seq DESC LIMIT 1",
        (run_id,),
    ).fetchone()
    return row[0] if row else None


def refusal(conn: sqlite3.Connection, run_id: str, status: str) -> tuple[str, str | None] | None:
    """(point, capId) of the hook that refused the transition a `halted` run stands at: the
    last `halted` event since the last resume, when it names a point."""
    if status != "halted":
        return None
    row = conn.execute(
        "SELECT kind, point, cap_id FROM events WHERE run_id = ? "
        "AND kind IN ('halted', 'run_resumed') ORDER BY seq DESC LIMIT 1",
        (run_id,),
    ).fetchone()
    if row is None or row["kind"] != "halted" or not row["point"]:
        return None
    return row["point"], row["cap_id"]


def duration_ms(start: str | None, end: str | None) -> int | None:
    if not start or not end:
        return None
    delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    return max(0, round(delta.total_seconds() * 1000))


def format_duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_refusal(refusal: tuple[str, str | None] | None) -> str:
    """` (refused at execute:pre by local/no-exec)`, or nothing."""
    if refusal is None:
        return ""
    point, cap = refusal
    return f" (refused at {point}{f' by {cap}' if cap else ''})"
