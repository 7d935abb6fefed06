"""The harness's log (`HarnessRun.log`): one line per call of the work and per recorder event
worth reading, in the order they happened."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from looprail.journal.recorder import MemoryRecorder
from looprail.runtime.base import DispatchContext, Outcome, Request
from looprail.runtime.scripted import ScriptedRuntime


class LoggingRuntime(ScriptedRuntime):
    """A ScriptedRuntime that first writes one line per call of the work into `log` (the
    current run's; `list.append` is atomic, so a wave's parallel tasks may share it)."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        line = _call_line(request)
        if line is not None:
            self.log.append(line)
        return super().handle(request, ctx)


def _call_line(r: Request) -> str | None:
    """One log line per call of the work (None: not logged, the session's and the host's)."""
    if r.kind == "phase":
        return f"phase {r.step} ({r.role})"
    if r.kind == "context":
        return f"context {r.role} ({r.cap_id})"
    if r.kind in ("skill", "agent", "command", "query", "verdict", "task"):
        return f"{r.kind} {r.name}"
    return None


def _event_line(e: Any) -> str | None:
    """One log line per recorder event worth reading (None: not logged)."""
    if e.kind == "point":
        wave = f" (wave {e.wave})" if e.wave is not None else ""
        return f"point {e.point}{wave}"
    if e.kind == "hook":
        return f"hook {e.hook_kind} {e.cap_id} {e.outcome}"
    if e.kind == "native_hook":
        return f"native {e.cap_id} {e.outcome}"
    if e.kind == "transition":
        return f"transition {e.data.get('event')} → {'/'.join(e.data.get('target') or ())}"
    if e.kind == "resolver":
        return f"resolver {e.task_id} {e.data.get('trackerId')} {e.outcome}"
    if e.kind == "read_first":
        return f"read_first {e.task_id}"
    if e.kind == "task_finished":
        return f"task_finished {e.task_id} {e.outcome}"
    if e.kind == "halted":
        return f"halted {e.message}"
    return None


def logged_recorder(log: list[str]) -> MemoryRecorder:
    """A MemoryRecorder that also writes a line into `log` per event worth reading."""

    class LoggedRecorder(MemoryRecorder):
        def event(self, record: Any, *, state: Sequence[str] | None = None) -> None:
            line = _event_line(record)
            if line is not None:
                log.append(line)
            super().event(record, state=state)

        def task_finished(
            self, key: str, *, status: str, duration_ms: int | None, message: str | None = None
        ) -> None:
            log.append(f"task_finished {key} {status}")
            super().task_finished(key, status=status, duration_ms=duration_ms, message=message)

    return LoggedRecorder()
