"""Durable runs: the SQLite journal (runs, events, task rows), the one-run-per-project lock,
the inputs digest a resume is checked against, and the execution report (docs/journal.md)."""

from looprail.journal.inputs import diff_inputs, digest_inputs
from looprail.journal.lock import LockedError, LockInfo, RunLock, lock_holder, lock_path
from looprail.journal.models import (
    EVENT_KINDS,
    FINAL_STATUSES,
    RESUMABLE_STATUSES,
    EventKind,
    EventRecord,
    EventRow,
    HookKind,
    JournalRunStatus,
    PlannedTask,
    RunRow,
    TaskRow,
    TaskStatus,
    TaskUpdate,
    is_run_id,
    new_run_id,
)
from looprail.journal.report import RunReport, build_report, render_report_text
from looprail.journal.schema import JournalError, NoJournalError, schema_version
from looprail.journal.writer import Journal, journal_path

__all__ = [
    "EVENT_KINDS",
    "FINAL_STATUSES",
    "RESUMABLE_STATUSES",
    "EventKind",
    "EventRecord",
    "EventRow",
    "HookKind",
    "Journal",
    "JournalError",
    "JournalRunStatus",
    "LockInfo",
    "LockedError",
    "NoJournalError",
    "PlannedTask",
    "RunLock",
    "RunReport",
    "RunRow",
    "TaskRow",
    "TaskStatus",
    "TaskUpdate",
    "build_report",
    "diff_inputs",
    "digest_inputs",
    "is_run_id",
    "journal_path",
    "lock_holder",
    "lock_path",
    "new_run_id",
    "render_report_text",
    "schema_version",
]
