"""The harness's log (`HarnessRun.log`): one line per call of the work and per recorder event
worth reading, in the order they happened."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from looprail.journal.recorder import MemoryRecorder
from looprail.runtime.base import Outcome
from looprail.runtime.scripted import ScriptedRuntime


class LoggingRuntime(ScriptedRuntime):
    """A ScriptedRuntime that first writes one line per call of the work into `log` (the
    current run's; `list.append` is atomic, so a wave's parallel tasks may share it)."""

    log: list[str]

    def __init__(self) -> None:
        super().__init__()
        self.log = []

    def run_skill(self, skill_id: str, ctx: Any) -> Outcome:
        self.log.append(f"skill {skill_id}")
        return super().run_skill(skill_id, ctx)

    def spawn_agent(self, agent: str, ctx: Any) -> Outcome:
        self.log.append(f"agent {agent}")
        return super().spawn_agent(agent, ctx)

    def run_command(self, words: Sequence[str], ctx: Any) -> Outcome:
        self.log.append(f"command {' '.join(words)}")
        return super().run_command(words, ctx)

    def run_query_check(self, words: Sequence[str], ctx: Any) -> Outcome:
        self.log.append(f"query {' '.join(words)}")
        return super().run_query_check(words, ctx)

    def ask_verdict(self, agent_verdict: Mapping[str, Any], ctx: Any) -> Outcome:
        self.log.append(f"verdict {agent_verdict.get('ref')}")
        return super().ask_verdict(agent_verdict, ctx)

    def do_phase_work(self, role: str, step: str, ctx: Any) -> Outcome:
        self.log.append(f"phase {step} ({role})")
        return super().do_phase_work(role, step, ctx)

    def execute_task(self, task: Any, ctx: Any) -> Outcome:
        self.log.append(f"task {task.key}")
        return super().execute_task(task, ctx)

    def deliver_context(self, role: str, text: str, ctx: Any) -> None:
        self.log.append(f"context {role} ({ctx.cap_id})")
        super().deliver_context(role, text, ctx)


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
