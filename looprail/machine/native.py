"""Native hooks in the loop: the bridge between the native hooks engine
(`looprail.hooks.native`) and the runner.

- At each point, after the capability hooks, the point's native hooks run; a `:pre`
  point's failure (`block`) refuses the transition exactly as a blocking gate does, a `:post`
  failure is a `report`.
- `task_call` runs before a task body (after its content is resolved and read_first checked) and
  may block the task; `task_result` reports after it.
- `loop_settled` runs once when the loop stops, halts or ships.
- Selected Actions become Effects, delivered best-effort through `LoopEffects` (a delivery failure
  is recorded and never weakens an outcome): `interrupt` pauses at the next safe point,
  `shutdown` stops there (the journal is flushed as on any stop), `compact` asks the runtime to
  compact role context, `message` queues text into role context (`steer` now, `followUp` when
  the current wave settles, `nextTurn` at the start of the next run), `emit-custom-event` raises
  `custom_event` (the engine does that itself).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from looprail import layout
from looprail.errors import InvalidFileError, Issue, RefusedToStart
from looprail.fsutil import atomic_write, read_bounded
from looprail.hooks.native import (
    NativeHookEngine,
    load_native_hooks,
    loop_settled_candidate,
    point_candidate,
    task_candidate,
)
from looprail.jsonload import json_type_name
from looprail.layout import LOOPRAIL_DIR, NEXT_TURN_FILE
from looprail.machine.guards import HookResult, HookStatus
from looprail.machine.progress import Progress
from looprail.machine.record import EventRecord, Recorder
from looprail.runtime.base import DispatchContext
from looprail.trust import hooks_bytes_consented, is_trusted


class LoopEffects:
    """The loop's `EffectSink`."""

    def __init__(self, runtime: Any, project: Path, progress: Progress):
        self.runtime = runtime
        self.project = project
        self.progress = progress
        # Plans of a wave run in parallel and each delivers its own Effects: the dispatch
        # context is per thread, with the run's context as the default.
        self._local = threading.local()
        self.default_ctx: DispatchContext | None = None
        self.stop: tuple[Literal["paused", "halted"], str] | None = None  # (status, reason)
        self.follow_up: list[Any] = []
        self._lock = threading.Lock()

    def deliver(self, effect: Any) -> None:
        req = effect.request
        kind = req.type
        if kind == "interrupt":
            self._request_stop("paused", f"interrupted by native hook {effect.hook_ref}")
        elif kind == "shutdown":
            self._request_stop("halted", f"shutdown requested by native hook {effect.hook_ref}")
        elif kind == "compact":
            self._check(self.runtime.compact(req.instructions, self._ctx()), "compact")
        elif kind == "message":
            if req.delivery == "followUp":
                with self._lock:
                    self.follow_up.append(req)
            elif req.delivery == "nextTurn":
                self._queue_next_turn(req)
            else:
                self._send(req)
        elif kind == "emit-custom-event":
            self.progress.line(f"  ◇ custom event {req.name} (from {effect.hook_ref})")

    def _request_stop(self, status: Literal["paused", "halted"], reason: str) -> None:
        with self._lock:
            # A shutdown outranks an interrupt; the first reason of a kind is kept.
            if self.stop is None or (status == "halted" and self.stop[0] == "paused"):
                self.stop = (status, reason)

    @property
    def ctx(self) -> DispatchContext | None:
        return getattr(self._local, "ctx", None) or self.default_ctx

    @ctx.setter
    def ctx(self, value: DispatchContext) -> None:
        self._local.ctx = value

    def _ctx(self) -> DispatchContext:
        ctx = self.ctx
        if ctx is None:  # pragma: no cover - the bridge sets it before any delivery
            raise RuntimeError("no dispatch context yet")
        return ctx

    def _send(self, req: Any) -> None:
        outcome = self.runtime.deliver_message(
            req.message,
            send_as=req.send_as,
            delivery=req.delivery,
            trigger_turn=req.trigger_turn,
            ctx=self._ctx(),
        )
        self._check(outcome, "message")

    def _check(self, outcome: Any, what: str) -> None:
        if not outcome.ok:
            raise RuntimeError(f"{what} delivery failed: {outcome.detail}")

    def flush_follow_up(self) -> None:
        with self._lock:
            pending, self.follow_up = self.follow_up, []
        for req in pending:
            try:
                self._send(req)
            except Exception as exc:  # best-effort: never weakens an outcome
                self.progress.warn(f"follow-up message not delivered: {exc}")

    def _queue_next_turn(self, req: Any) -> None:
        path = self.project / LOOPRAIL_DIR / NEXT_TURN_FILE
        queued = read_queue(path)
        queued.append(
            {"message": req.message, "sendAs": req.send_as, "triggerTurn": req.trigger_turn}
        )
        _write_queue(path, queued)

    def deliver_next_turn_queue(self, queued: list[dict[str, Any]] | None = None) -> None:
        """At the start of a run: the `nextTurn` messages queued by the previous one (`queued`
        when the caller read them before the run started, else read now)."""
        path = self.project / LOOPRAIL_DIR / NEXT_TURN_FILE
        if queued is None:
            queued = read_queue(path)
        if not queued:
            return
        for item in queued:
            try:
                outcome = self.runtime.deliver_message(
                    item["message"],
                    send_as=item.get("sendAs", "custom"),
                    delivery="nextTurn",
                    trigger_turn=False,
                    ctx=self._ctx(),
                )
                if not outcome.ok:
                    self.progress.warn(f"queued message not delivered: {outcome.detail}")
            except Exception as exc:
                self.progress.warn(f"queued message not delivered: {exc}")
        path.unlink(missing_ok=True)


_QUEUE_KEYS = {"message", "sendAs", "triggerTurn"}
_MAX_QUEUE_BYTES = 16 * 1024 * 1024


def read_queue(path: Path) -> list[dict[str, Any]]:
    """The queued `nextTurn` messages. A missing file is an empty queue. Anything else that is
    not a JSON list of `{message, sendAs?, triggerTurn?}` (truncated, hostile, a FIFO, nested
    beyond the parser's depth, an entry of the wrong shape) raises `InvalidFileError`, one line
    naming the file, the entry and the reason: never a traceback, and never a silent drop of
    what was queued."""

    def bad(where: str, reason: str) -> InvalidFileError:
        fix = "fix or remove the file (it holds queued messages)"
        return InvalidFileError([Issue(str(path), where, f"{reason}; {fix}")])

    try:
        raw = read_bounded(str(path), _MAX_QUEUE_BYTES)
    except OSError as exc:
        raise bad("$", f"cannot be read ({exc.strerror or exc})") from None
    if raw is None:
        return []
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise bad("$", "JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise bad("$", "not UTF-8") from None
    except ValueError as exc:
        raise bad("$", f"not valid JSON ({' '.join(str(exc).split())})") from None
    if not isinstance(data, list):
        raise bad("$", f"must be a list of messages, not {_json_type(data)}")
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise bad(f"$[{i}]", f"must be an object, not {_json_type(item)}")
        if not isinstance(item.get("message"), str):
            raise bad(f"$[{i}].message", "must be a string")
        if item.get("sendAs", "custom") not in ("custom", "user"):
            raise bad(f"$[{i}].sendAs", 'must be "custom" or "user"')
        if not isinstance(item.get("triggerTurn", False), bool):
            raise bad(f"$[{i}].triggerTurn", "must be true or false")
        extra = sorted(set(item) - _QUEUE_KEYS)
        if extra:
            raise bad(f"$[{i}].{extra[0]}", "unknown field")
    return data


def _json_type(value: Any) -> str:
    return json_type_name(value)


def _write_queue(path: Path, items: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(items))


@dataclass(frozen=True)
class NativeInputs:
    """What the native hooks of a run read before it starts: the hooks (None when there are
    none) and the `nextTurn` queue they will deliver."""

    hooks: Any = None
    queued: tuple[dict[str, Any], ...] = ()


def read_native_inputs(project: Path, progress: Progress) -> NativeInputs:
    """Load the project's native hooks (warnings shown) and, when there are any, read and check
    the `nextTurn` queue they deliver at the start: before the run starts, so a broken queue
    stops it (`RefusedToStart`, exit 2) with nothing journaled."""
    global_file = os.path.join(layout.looprail_home(), layout.HOOKS_FILE)
    if not (
        os.path.lexists(global_file)
        or os.path.lexists(layout.project_path(project, layout.HOOKS_FILE))
    ):
        return NativeInputs()  # no hooks file anywhere: nothing to load, warn about or import

    hooks = load_native_hooks(
        project,
        trusted=is_trusted,
        accept_project_bytes=lambda raw: hooks_bytes_consented(project, raw),
    )
    for w in hooks.warnings:
        progress.warn(w)
    if not hooks.hooks:
        return NativeInputs()
    try:
        queued = read_queue(project / LOOPRAIL_DIR / NEXT_TURN_FILE)
    except InvalidFileError as exc:
        raise RefusedToStart(f"{exc}; the run did not start") from None
    return NativeInputs(hooks, tuple(queued))


class NativeBridge:
    """What the runner calls: `point_hooks`, `task_hooks`, `settled`, and `stop` after each."""

    def __init__(
        self,
        engine: Any,
        *,
        runtime: Any,
        project: Path,
        phase: str,
        progress: Progress,
        recorder: Recorder | None,
        queued: list[dict[str, Any]] | None = None,
    ):
        self.engine = engine
        self.queued = queued
        self.phase = phase
        self.progress = progress
        self.recorder = recorder
        self.effects = LoopEffects(runtime, project, progress)

    @property
    def stop(self) -> tuple[Literal["paused", "halted"], str] | None:
        return self.effects.stop

    def point_hooks(
        self, point: str, ctx: DispatchContext, earlier: Sequence[HookResult]
    ) -> list[HookResult]:
        if not self.engine.has_hooks(point):
            return []
        candidate = point_candidate(point, phase=self.phase, wave=ctx.wave)
        return self._evaluate(point, candidate, ctx, point=point)

    def point_count(self, point: str, wave: int | None) -> int:
        """How many native hooks will run at `point` (enabled, filter matching)."""
        if not self.engine.has_hooks(point):
            return 0
        return self.engine.matching(point, point_candidate(point, phase=self.phase, wave=wave))

    def task_hooks(
        self,
        event: Literal["task_call", "task_result"],
        plan: Any,
        task: Any,
        wave: int,
        work: Any,
        ctx: DispatchContext,
    ) -> list[HookResult]:
        if not self.engine.has_hooks(event):
            return []
        content = None
        if work is not None:
            content = {
                "action": work.action,
                "verify": work.verify,
                "acceptanceCriteria": list(work.acceptance_criteria),
                "readFirst": list(work.read_first),
                "done": work.done,
            }
        candidate = task_candidate(
            event,
            task_id=task.id,
            name=task.name or "",
            plan=plan.id,
            wave=wave,
            files=list(task.files),
            tracker_id=task.tracker_id,
            phase=self.phase,
            content=content,
            resolved=bool(work and work.resolved_by_tracker),
            ok=True if event == "task_result" else None,
        )
        results = self._evaluate(event, candidate, ctx, point=None, subject=f" of {task.id}")
        # A refused task is named in the run's halt reason, not only the hook.
        return [
            r
            if r.status == "ok"
            else r.model_copy(update={"message": f"task {task.id}: {r.message}"})
            for r in results
        ]

    def settled(self, status: str, reason: str | None, ctx: DispatchContext) -> None:
        self.effects.flush_follow_up()
        if self.engine.has_hooks("loop_settled"):
            candidate = loop_settled_candidate(status=status, phase=self.phase, reason=reason)
            self._evaluate("loop_settled", candidate, ctx, point=None, record_results=True)

    def wave_settled(self) -> None:
        self.effects.flush_follow_up()

    def start(self, ctx: DispatchContext) -> None:
        self.effects.default_ctx = ctx
        self.effects.deliver_next_turn_queue(self.queued)

    def _evaluate(
        self,
        event: str,
        candidate: dict[str, Any],
        ctx: DispatchContext,
        *,
        point: str | None,
        record_results: bool = False,
        subject: str = "",
    ) -> list[HookResult]:
        self.effects.ctx = ctx
        evaluation = self.engine.evaluate(event, candidate)
        results = []
        for r in evaluation.results:
            status: HookStatus
            if r.outcome == "pass":
                status = "ok"
            elif r.outcome == "block":
                status = "block"
            else:
                status = "report"
            results.append(
                HookResult(
                    point=point or event,
                    cap_id=r.hook_ref,
                    kind="native",
                    status=status,
                    blocking=r.outcome == "block",
                    message=r.detail if r.outcome != "pass" else "",
                    label=f"native {event}",
                    duration_s=r.duration_s,
                )
            )
        if evaluation.outcome != "pass" and all(r.status == "ok" for r in results):
            # A hook that crashed has no result, yet the event failed closed: never drop that.
            results.append(
                HookResult(
                    point=point or event,
                    cap_id="native",
                    kind="native",
                    status="block" if evaluation.outcome == "block" else "report",
                    blocking=evaluation.outcome == "block",
                    message=evaluation.reason or "a native hook could not run",
                    label=f"native {event}",
                )
            )
        for row in evaluation.report_rows:
            if row.kind == "action" and row.guarded:
                self.progress.line(
                    f"  ⊘ native hook {row.hook_ref}: {row.action_type} not selected "
                    f"(maxSelections {self._limit(row.hook_ref)} reached in this run)"
                )
        # Report rows never hold message bodies or commands (they come from the engine so).
        if self.recorder is not None:
            for row in evaluation.report_rows:
                self.recorder.event(
                    EventRecord(
                        kind="native_hook",
                        point=point,
                        hook_kind="native",
                        cap_id=row.hook_ref,
                        outcome=row.outcome,
                        duration_ms=round(row.duration_s * 1000) if row.duration_s else None,
                        data=row.to_json(),
                    )
                )
        if point is None or record_results:  # the dispatcher reports the points' results
            for r in results:
                if r.status == "block":
                    self.progress.line(
                        f"  ✗ native hook {r.cap_id} blocked {event}{subject}: {r.message}"
                    )
                elif r.status != "ok":
                    self.progress.warn(
                        f"native hook {r.cap_id} reported at {event}{subject}: {r.message}"
                    )
        for record in self.engine.deliver(evaluation.effects, self.effects):
            if not record.delivered:
                self.progress.warn(
                    f"native hook {record.effect.hook_ref}: {record.effect.type} not delivered: "
                    f"{record.error}"
                )
                if self.recorder is not None:
                    self.recorder.event(
                        EventRecord(
                            kind="warning",
                            point=point,
                            cap_id=record.effect.hook_ref,
                            message=f"{record.effect.type} not delivered: {record.error}",
                        )
                    )
        return results

    def _limit(self, hook_ref: str) -> int | str:
        hook = next((h for h in self.engine.hooks if h.ref == hook_ref), None)
        return hook.max_selections if hook is not None and hook.max_selections else "?"


def load_bridge(
    project: Path,
    *,
    runtime: Any,
    phase: str,
    progress: Progress,
    recorder: Recorder | None,
    run_id: str | None,
    inputs: NativeInputs | None = None,
) -> NativeBridge | None:
    """The native hooks of this project (global, and project when trusted), or None. `inputs`
    are the hooks and queue `read_native_inputs` read before the run started (read now when
    not given)."""

    if inputs is None:
        inputs = read_native_inputs(project, progress)
    hooks = inputs.hooks
    if hooks is None:
        return None

    engine = NativeHookEngine(
        hooks,
        run_id=run_id,
        cwd=project,
        # The loop guard holds per run, across any number of resumes: counts come back from
        # the recorder (the journal) and every new selection is committed before delivery.
        selections=recorder.native_selections() if recorder is not None else None,
        on_select=(
            (lambda hook, count: recorder.native_selected(hook.ref, count, hook.max_selections))
            if recorder is not None
            else None
        ),
    )
    return NativeBridge(
        engine,
        runtime=runtime,
        project=project,
        phase=phase,
        progress=progress,
        recorder=recorder,
        queued=list(inputs.queued),
    )
