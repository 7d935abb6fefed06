"""Native hooks in the loop: the bridge between the native hooks engine (`looprail.hooks.native`)
and the runner, and `LoopEffects`, where their Effects are delivered (docs/native-hooks.md)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

from looprail import layout
from looprail.errors import InvalidFileError, Issue, RefusedToStart
from looprail.fsutil import atomic_write, read_bounded
from looprail.hooks.native import (
    Compact,
    Effect,
    EmitCustomEvent,
    EventEvaluation,
    Interrupt,
    Message,
    NativeHookEngine,
    NativeHookSet,
    Shutdown,
    load_native_hooks,
    loop_settled_candidate,
    point_candidate,
    task_candidate,
)
from looprail.journal.recorder import EventRecord, Recorder
from looprail.jsonload import json_type_name
from looprail.layout import LOOPRAIL_DIR, NEXT_TURN_FILE
from looprail.machine.guards import HookResult, HookStatus
from looprail.machine.progress import Progress
from looprail.plans import Plan, Task
from looprail.runtime.base import (
    DispatchContext,
    Outcome,
    Runtime,
    TaskWork,
    compact,
    deliver_message,
)
from looprail.trust import hooks_bytes_consented, is_trusted

Stop = tuple[Literal["paused", "halted"], str]  # (status, reason)
_STATUS: dict[str, HookStatus] = {"pass": "ok", "block": "block", "report": "report"}


class QueuedMessage(TypedDict):
    """One `nextTurn` message waiting in the queue file for the next run."""

    message: str
    sendAs: NotRequired[str]
    triggerTurn: NotRequired[bool]


class LoopEffects:
    """The loop's `EffectSink`."""

    def __init__(self, runtime: Runtime, project: Path, progress: Progress):
        self.runtime = runtime
        self.project = project
        self.progress = progress
        # Per thread (a wave's plans deliver their Effects in parallel), the run's by default.
        self._local = threading.local()
        self.default_ctx: DispatchContext | None = None
        self.stop: Stop | None = None
        self.follow_up: list[Message] = []
        self._lock = threading.Lock()

    def deliver(self, effect: Effect) -> None:
        req = effect.request
        if isinstance(req, Interrupt):
            self._request_stop("paused", f"interrupted by native hook {effect.hook_ref}")
        elif isinstance(req, Shutdown):
            self._request_stop("halted", f"shutdown requested by native hook {effect.hook_ref}")
        elif isinstance(req, Compact):
            self._check(compact(self.runtime, req.instructions, self._ctx()), "compact")
        elif isinstance(req, Message):
            if req.delivery == "followUp":
                with self._lock:
                    self.follow_up.append(req)
            elif req.delivery == "nextTurn":
                self._queue_next_turn(req)
            else:
                self._send(req)
        elif isinstance(req, EmitCustomEvent):
            self.progress.line(f"  ◇ custom event {req.name} (from {effect.hook_ref})")

    def _request_stop(self, status: Literal["paused", "halted"], reason: str) -> None:
        with self._lock:
            # A shutdown outranks an interrupt; the first reason of a kind is kept.
            if self.stop is None or (status == "halted" and self.stop[0] == "paused"):
                self.stop = (status, reason)

    def use(self, ctx: DispatchContext) -> None:
        """The context this thread's Effects are delivered in."""
        self._local.ctx = ctx

    def _ctx(self) -> DispatchContext:
        ctx = getattr(self._local, "ctx", None) or self.default_ctx
        if ctx is None:  # pragma: no cover - the bridge sets it before any delivery
            raise RuntimeError("no dispatch context yet")
        return ctx

    def _send(self, req: Message) -> None:
        outcome = deliver_message(
            self.runtime,
            req.message,
            send_as=req.send_as,
            delivery=req.delivery,
            trigger_turn=req.trigger_turn,
            ctx=self._ctx(),
        )
        self._check(outcome, "message")

    def _check(self, outcome: Outcome, what: str) -> None:
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

    def _queue_next_turn(self, req: Message) -> None:
        path = self.project / LOOPRAIL_DIR / NEXT_TURN_FILE
        queued = read_queue(path)
        queued.append(
            {"message": req.message, "sendAs": req.send_as, "triggerTurn": req.trigger_turn}
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(queued))

    def deliver_next_turn_queue(self, queued: Sequence[QueuedMessage]) -> None:
        """At the start of a run: the `nextTurn` messages the previous one queued."""
        if not queued:
            return
        for item in queued:
            try:
                outcome = deliver_message(
                    self.runtime,
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
        (self.project / LOOPRAIL_DIR / NEXT_TURN_FILE).unlink(missing_ok=True)


_QUEUE_KEYS = set(QueuedMessage.__annotations__)
_MAX_QUEUE_BYTES = 16 * 1024 * 1024


def read_queue(path: Path) -> list[QueuedMessage]:
    """The queued `nextTurn` messages (a missing file: none). Anything but a JSON list of
    `{message, sendAs?, triggerTurn?}` raises `InvalidFileError`, one line naming the file, the
    entry and the reason: never a traceback, never a silent drop."""

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
        raise bad("$", f"must be a list of messages, not {json_type_name(data)}")
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise bad(f"$[{i}]", f"must be an object, not {json_type_name(item)}")
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


@dataclass(frozen=True)
class NativeInputs:
    """What the native hooks of a run read before it starts (`hooks` None: there are none)."""

    hooks: NativeHookSet | None = None
    queued: tuple[QueuedMessage, ...] = ()


def read_native_inputs(project: Path, progress: Progress) -> NativeInputs:
    """Load the project's native hooks (warnings shown) and, when there are any, their
    `nextTurn` queue: a broken one refuses the run (`RefusedToStart`) with nothing journaled."""
    global_file = os.path.join(layout.looprail_home(), layout.HOOKS_FILE)
    if not (
        os.path.lexists(global_file)
        or os.path.lexists(layout.project_path(project, layout.HOOKS_FILE))
    ):
        return NativeInputs()  # no hooks file anywhere: nothing to load or warn about

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


def _task_content(work: TaskWork | None) -> dict[str, object] | None:
    if work is None:
        return None
    return {
        "action": work.action,
        "verify": work.verify,
        "acceptanceCriteria": list(work.acceptance_criteria),
        "readFirst": list(work.read_first),
        "done": work.done,
    }


class NativeBridge:
    """What the runner calls: `point_hooks`, `task_hooks`, `settled`, and `stop` after each;
    over the native hooks `read_native_inputs` read before the run."""

    def __init__(
        self,
        hooks: NativeHookSet,
        queued: Sequence[QueuedMessage],
        *,
        runtime: Runtime,
        project: Path,
        phase: str,
        progress: Progress,
        recorder: Recorder,
        run_id: str | None,
    ):
        self.engine = NativeHookEngine(
            hooks,
            run_id=run_id,
            cwd=project,
            # The loop guard holds per run, across resumes: counts come back from the journal.
            selections=recorder.native_selections(),
            on_select=lambda h, n: recorder.native_selected(h.ref, n, h.entry.max_selections),
        )
        self.queued = queued
        self.phase = phase
        self.progress = progress
        self.recorder = recorder
        self.effects = LoopEffects(runtime, project, progress)

    @property
    def stop(self) -> Stop | None:
        return self.effects.stop

    def point_hooks(self, point: str, ctx: DispatchContext) -> list[HookResult]:
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
        plan: Plan,
        task: Task,
        wave: int,
        work: TaskWork | None,
        ctx: DispatchContext,
    ) -> list[HookResult]:
        if not self.engine.has_hooks(event):
            return []
        candidate = task_candidate(
            event,
            task_id=task.id,
            name=task.name or "",
            plan=plan.id,
            wave=wave,
            files=list(task.files),
            tracker_id=task.tracker_id,
            phase=self.phase,
            content=_task_content(work),
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
        candidate: Mapping[str, object],
        ctx: DispatchContext,
        *,
        point: str | None,
        record_results: bool = False,
        subject: str = "",
    ) -> list[HookResult]:
        self.effects.use(ctx)
        evaluation = self.engine.evaluate(event, candidate)
        results = _hook_results(evaluation, point or event)
        self._journal_rows(evaluation, point)
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
        self._deliver(evaluation, point)
        return results

    def _journal_rows(self, evaluation: EventEvaluation, point: str | None) -> None:
        """Say which Actions the loop guard held back, and journal every report row."""
        for row in evaluation.report_rows:
            if row.kind == "action" and row.guarded:
                self.progress.line(
                    f"  ⊘ native hook {row.hook_ref}: {row.action_type} not selected "
                    f"(maxSelections {self._limit(row.hook_ref)} reached in this run)"
                )
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

    def _deliver(self, evaluation: EventEvaluation, point: str | None) -> None:
        for record in self.engine.deliver(evaluation.effects, self.effects):
            if record.delivered:
                continue
            message = f"{record.effect.type} not delivered: {record.error}"
            self.progress.warn(f"native hook {record.effect.hook_ref}: {message}")
            self.recorder.event(
                EventRecord(
                    kind="warning", point=point, cap_id=record.effect.hook_ref, message=message
                )
            )

    def _limit(self, hook_ref: str) -> int | str:
        hook = next((h for h in self.engine.hooks if h.ref == hook_ref), None)
        limit = hook.entry.max_selections if hook is not None else None
        return limit or "?"


def _hook_results(evaluation: EventEvaluation, point: str) -> list[HookResult]:
    """The evaluation as the dispatcher's results, plus one for the event when it failed closed
    without a failing result (a hook that crashed has none)."""
    label = f"native {evaluation.event}"
    results = [
        HookResult(
            point=point,
            cap_id=r.hook_ref,
            kind="native",
            status=_STATUS[r.outcome],
            blocking=r.outcome == "block",
            message=r.detail if r.outcome != "pass" else "",
            label=label,
            duration_s=r.duration_s,
        )
        for r in evaluation.results
    ]
    if evaluation.outcome != "pass" and all(r.status == "ok" for r in results):
        results.append(
            HookResult(
                point=point,
                cap_id="native",
                kind="native",
                status=_STATUS[evaluation.outcome],
                blocking=evaluation.outcome == "block",
                message=evaluation.reason or "a native hook could not run",
                label=label,
            )
        )
    return results
