"""Native hook evaluation: every enabled hook of an event in order, the Event Outcome frozen
from their results before any Action is considered, then each result projected as one
`hook_result` evaluation; `deliver` hands the Effects to the loop best-effort
(docs/native-hooks.md, "Outcomes" to "hook_result")."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from looprail.hooks.native.actions import ActionRequest, ActionType, EmitCustomEvent
from looprail.hooks.native.events import (
    EVENTS,
    HOOK_RESULT_EXACT_KEYS,
    EventSpec,
    Outcome,
    event_environment,
    event_spec,
    is_managed_env,
)
from looprail.hooks.native.filters import filter_matches
from looprail.hooks.native.models import NativeHook, NativeHookSet
from looprail.hooks.native.shell import ShellRun, run_hook_shell
from looprail.runtime.process import escape_untrusted


@dataclass(frozen=True)
class NativeHookResult:
    """What one hook did at one event. Frozen before any Action is considered."""

    hook_ref: str
    event: str  # the hook's own event (`hook_result` for a reaction)
    invocation_id: str
    outcome: Outcome
    code: int | None
    duration_s: float
    started: bool  # the main shell started (then a report row exists)
    failed_during: Literal["when", "shell"] | None
    detail: str  # "exit 0", "exit 3", "timed out after 5000 ms", "could not start: …"
    action_type: ActionType | None = None  # the owned Action's type, if the hook has one
    action_selected: bool = False
    guarded: bool = False  # the Action matched but maxSelections was already reached
    origin_ref: str | None = None  # reactions: the hook whose result was observed
    origin_outcome: Outcome | None = None


@dataclass(frozen=True)
class ReportRow:
    """One execution report row, safe to journal: identity and outcome only (never a command,
    a message body, an event payload or an invocation id). A *hook* row for every started main
    shell (the exact `true`/`false` count); an *action* row for every selected Action and every
    one the loop guard (`maxSelections`) held back (`guarded`)."""

    kind: Literal["hook", "action"]
    hook_ref: str
    event: str  # the owning hook's event (`hook_result` for a reaction)
    outcome: Outcome  # the owner's Hook Outcome
    code: int | None
    duration_s: float | None = None  # hook rows: a passing `when` plus the main shell
    action_type: str | None = None  # action rows
    guarded: bool = False  # action rows: not selected because maxSelections was reached
    origin_ref: str | None = None  # reactions: the hook whose result this hook observed
    origin_outcome: Outcome | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "type": self.kind,
            "hookRef": self.hook_ref,
            "event": self.event,
            "outcome": self.outcome,
            "code": self.code,
        }
        if self.kind == "hook":
            out["durationMs"] = round((self.duration_s or 0.0) * 1000)
        else:
            out["actionType"] = self.action_type
            out["guarded"] = self.guarded
        if self.origin_ref is not None:
            out["origin"] = {"hookRef": self.origin_ref, "outcome": self.origin_outcome}
        return out


@dataclass(frozen=True)
class Effect:
    """A selected Action, as a request for the loop. `event` is the event whose evaluation
    selected it; `hook_event` is the owning hook's (they differ for `hook_result` reactions)."""

    hook_ref: str
    invocation_id: str
    event: str
    hook_event: str
    request: ActionRequest
    origin_ref: str | None = None

    @property
    def type(self) -> ActionType:
        return self.request.type

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "hookRef": self.hook_ref,
            "event": self.event,
            "action": self.request.to_json(),
        }
        if self.origin_ref is not None:
            out["originRef"] = self.origin_ref
        return out


@dataclass(frozen=True)
class EventEvaluation:
    """The whole, frozen answer for one event. `effects` and `report_rows` include the reactions;
    `hook_result_evaluations` has one entry per result, in the same order."""

    event: str
    outcome: Outcome
    reason: str | None = None
    results: tuple[NativeHookResult, ...] = ()
    effects: tuple[Effect, ...] = ()
    report_rows: tuple[ReportRow, ...] = ()
    hook_result_evaluations: tuple[EventEvaluation, ...] = ()
    errors: tuple[str, ...] = ()  # hooks that crashed (no result, the event failed closed)
    origin_ref: str | None = None  # for a hook_result evaluation: the originating hook

    @property
    def blocked(self) -> bool:
        return self.outcome == "block"


@dataclass(frozen=True)
class DeliveryRecord:
    """One delivery attempt. `raised` is the `custom_event` evaluation an `emit-custom-event`
    Effect started (its own Effects follow this record in the list)."""

    effect: Effect
    delivered: bool
    error: str | None = None
    raised: EventEvaluation | None = None


@runtime_checkable
class EffectSink(Protocol):
    """What the loop implements to carry out Effects. Raising is allowed and is only recorded:
    delivery is best-effort and can never change an Event Outcome."""

    def deliver(self, effect: Effect) -> None: ...


# Called with (hook, its selection count including this one) before a selection counts; if it
# raises, the Action is not selected and the error propagates (a guard that cannot be persisted
# must not be spent in memory only).
OnSelect = Callable[[NativeHook, int], None]


class NativeHookEngine:
    """Evaluates native hooks for one run, from several threads if need be. Holds the loop-guard
    counters (`maxSelections`): a resumed run passes the counts journaled so far as `selections`
    (hook ref → times selected) and persists each new one in `on_select`."""

    def __init__(
        self,
        hooks: NativeHookSet | Iterable[NativeHook],
        *,
        run_id: str | None = None,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        selections: Mapping[str, int] | None = None,
        on_select: OnSelect | None = None,
    ) -> None:
        if isinstance(hooks, NativeHookSet):
            self._hooks = hooks.hooks
            default_cwd: Path = hooks.project
        else:
            self._hooks = tuple(hooks)
            default_cwd = Path.cwd()
        self._cwd = Path(cwd) if cwd is not None else default_cwd
        self._run_id = run_id
        self._env = _checked_env(env)
        self._selections: dict[str, int] = _checked_counts(selections)
        self._on_select = on_select
        self._lock = threading.Lock()

    @property
    def hooks(self) -> tuple[NativeHook, ...]:
        return self._hooks

    def has_hooks(self, event: str) -> bool:
        return any(h.entry.event == event for h in self._hooks)

    def selections(self, hook_ref: str) -> int:
        """How many times this run selected the Action of `hook_ref` so far."""
        with self._lock:
            return self._selections.get(hook_ref, 0)

    def matching(self, event: str, candidate: Mapping[str, object] | None = None) -> int:
        """How many hooks of `event` pass their filter for `candidate`: the hooks an evaluation
        will start (a `when` may still skip one). A filter that cannot be evaluated counts (the
        evaluation fails closed on it)."""
        hooks = [h for h in self._hooks if h.entry.event == event]
        payload = _snapshot(candidate)
        payload["event"] = event
        exact = HOOK_RESULT_EXACT_KEYS if event == "hook_result" else frozenset()
        count = 0
        for hook in hooks:
            try:
                count += bool(filter_matches(hook.entry.filter, payload, exact_keys=exact))
            except Exception:
                count += 1
        return count

    def evaluate(
        self,
        event: str,
        candidate: Mapping[str, object] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> EventEvaluation:
        """Evaluate `event` with the filter `candidate` (see `events.py` builders) and extra
        shell variables `env`. Raises `ValueError` for an unknown event or for `hook_result`
        (the engine raises that one itself)."""
        spec = event_spec(event)
        if spec.name == "hook_result":
            raise ValueError("hook_result is raised by the engine for each hook result")
        payload = _snapshot(candidate)
        payload["event"] = spec.name
        return self._evaluate(spec, payload, self._shell_env(env), spec.name, origin=None)

    def _evaluate(
        self,
        spec: EventSpec,
        payload: dict[str, object],
        shell_env: dict[str, str],
        native_event: str,
        origin: NativeHookResult | None,
    ) -> EventEvaluation:
        hooks = [h for h in self._hooks if h.entry.event == spec.name]
        origin_ref = origin.hook_ref if origin else None
        if not hooks:
            return EventEvaluation(spec.name, "pass", origin_ref=origin_ref)
        ran, errors = self._run_all(hooks, spec, payload, shell_env, origin)
        # The Event Outcome is decided here, from results alone, before any Action.
        failed = [r for _, r in ran if r.outcome != "pass"]
        outcome: Outcome = spec.failure if failed or errors else "pass"
        results: list[NativeHookResult] = []
        effects: list[Effect] = []
        rows: list[ReportRow] = []
        projections: list[EventEvaluation] = []
        for hook, unselected in ran:
            result = self._select(hook, unselected)
            results.append(result)
            rows.extend(_rows(result))
            if result.action_selected:
                assert hook.entry.action is not None
                request, ref = hook.entry.action.request, result.hook_ref
                effects.append(
                    Effect(ref, result.invocation_id, native_event, spec.name, request, origin_ref)
                )
            if origin is None and spec.name != "hook_result":
                observed = _hook_result_payload(result, spec.name)
                projected = self._evaluate(
                    EVENTS["hook_result"], observed, shell_env, native_event, origin=result
                )
                projections.append(projected)
                effects.extend(projected.effects)
                rows.extend(projected.report_rows)
        return EventEvaluation(
            event=spec.name,
            outcome=outcome,
            reason=_reason(spec, failed, errors) if outcome != "pass" else None,
            results=tuple(results),
            effects=tuple(effects),
            report_rows=tuple(rows),
            hook_result_evaluations=tuple(projections),
            errors=tuple(errors),
            origin_ref=origin_ref,
        )

    def _run_all(
        self,
        hooks: list[NativeHook],
        spec: EventSpec,
        payload: dict[str, object],
        shell_env: dict[str, str],
        origin: NativeHookResult | None,
    ) -> tuple[list[tuple[NativeHook, NativeHookResult]], list[str]]:
        """Every hook in order, each even after another failed: filter → `when` → `shell`."""
        exact = HOOK_RESULT_EXACT_KEYS if spec.name == "hook_result" else frozenset()
        env = {**shell_env, **event_environment(spec, payload)}
        ran: list[tuple[NativeHook, NativeHookResult]] = []
        errors: list[str] = []
        for hook in hooks:
            try:
                if not filter_matches(hook.entry.filter, payload, exact_keys=exact):
                    continue
                result = self._invoke(hook, spec, env, origin)
            except Exception as exc:  # a broken hook has no result; its siblings still run
                errors.append(escape_untrusted(f"native hook {hook.ref} failed to execute: {exc}"))
                continue
            if result is not None:
                ran.append((hook, result))
        return ran, errors

    def _invoke(
        self,
        hook: NativeHook,
        spec: EventSpec,
        env: dict[str, str],
        origin: NativeHookResult | None,
    ) -> NativeHookResult | None:
        invocation_id = str(uuid.uuid4())  # shared by `when` and `shell`
        entry = hook.entry
        env = {
            **env,
            "LOOPRAIL_HOOK_REF": hook.ref,
            "LOOPRAIL_HOOK_EVENT": entry.event,
            "LOOPRAIL_HOOK_INVOCATION_ID": invocation_id,
            "LOOPRAIL_CWD": str(self._cwd),
            "PWD": str(self._cwd),
        }
        if self._run_id is not None:
            env["LOOPRAIL_RUN_ID"] = self._run_id

        def result(run: ShellRun, during: Literal["when", "shell"] | None) -> NativeHookResult:
            return NativeHookResult(
                hook_ref=hook.ref,
                event=entry.event,
                invocation_id=invocation_id,
                outcome="pass" if run.passed else spec.failure,
                code=run.code,
                duration_s=time.monotonic() - started_at,
                started=run.started and during != "when",
                failed_during=None if run.passed else during,
                detail=run.detail,
                action_type=entry.action.type if entry.action else None,
                origin_ref=origin.hook_ref if origin else None,
                origin_outcome=origin.outcome if origin else None,
            )

        started_at = time.monotonic()  # a passing `when` counts toward the hook's duration
        if entry.when is not None:
            when = run_hook_shell(entry.when, env=env, cwd=self._cwd, timeout_ms=entry.timeout_ms)
            if when.code is None:  # could not run the precondition: fail closed
                return result(when, "when")
            if not when.passed:
                return None  # an ordinary false precondition: the hook does not apply
        shell = run_hook_shell(entry.shell, env=env, cwd=self._cwd, timeout_ms=entry.timeout_ms)
        return result(shell, "shell")

    def _select(self, hook: NativeHook, result: NativeHookResult) -> NativeHookResult:
        """Consider the owned Action against the owner's own outcome and code; apply the
        per-run loop guard."""
        action, limit = hook.entry.action, hook.entry.max_selections
        if action is None or not action.selects(result.outcome, result.code):
            return result
        with self._lock:
            count = self._selections.get(hook.ref, 0)
            if limit is not None and count >= limit:
                return replace(result, guarded=True)
            if self._on_select is not None:
                self._on_select(hook, count + 1)  # persisted before it counts or is delivered
            self._selections[hook.ref] = count + 1
        return replace(result, action_selected=True)

    def deliver(
        self, effects: Sequence[Effect], sink: EffectSink, *, env: Mapping[str, str] | None = None
    ) -> list[DeliveryRecord]:
        """Hand `effects` to `sink` in order; a failure is recorded and the rest still go out. An
        `emit-custom-event` Effect then raises `custom_event`, whose Effects are delivered next
        (one level: an Effect of a `custom_event` evaluation never raises another)."""
        records: list[DeliveryRecord] = []
        for effect in effects:
            delivered, error = True, None
            try:
                sink.deliver(effect)
            except Exception as exc:  # best-effort: nothing a sink does changes an outcome
                delivered = False
                error = escape_untrusted(f"{type(exc).__name__}: {exc}")
            raised = None
            if isinstance(effect.request, EmitCustomEvent) and effect.event != "custom_event":
                raised = self._raise_custom_event(effect, env)
            records.append(DeliveryRecord(effect, delivered, error, raised))
            if raised is not None:
                records.extend(self.deliver(raised.effects, sink, env=env))
        return records

    def _raise_custom_event(self, effect: Effect, env: Mapping[str, str] | None) -> EventEvaluation:
        request = effect.request
        assert isinstance(request, EmitCustomEvent)
        payload = {
            "event": "custom_event",
            "name": request.name,
            "data": request.data,
            "hookRef": effect.hook_ref,
            "originEvent": effect.event,
        }
        spec = EVENTS["custom_event"]
        return self._evaluate(spec, payload, self._shell_env(env), spec.name, origin=None)

    def _shell_env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        """Inherited variables minus stale managed ones, then the engine's and the call's."""
        inherited = {k: v for k, v in os.environ.items() if not is_managed_env(k)}
        return {**inherited, **self._env, **_checked_env(extra)}


def _checked_env(env: Mapping[str, str] | None) -> dict[str, str]:
    if env is None:
        return {}
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"environment entries must be str → str, got {key!r}: {value!r}")
    return dict(env)


def _checked_counts(counts: Mapping[str, int] | None) -> dict[str, int]:
    if counts is None:
        return {}
    for ref, n in counts.items():
        if not isinstance(ref, str) or isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"selection counts must be hook ref → count ≥ 0, got {ref!r}: {n!r}")
    return dict(counts)


def _snapshot(candidate: Mapping[str, object] | None) -> dict[str, object]:
    """A private JSON copy of the candidate: later changes by the caller cannot reach an
    evaluation, and every value is JSON (paths and other objects become strings)."""
    if candidate is None:
        return {}
    if not isinstance(candidate, Mapping):
        raise TypeError(f"candidate must be a mapping, got {type(candidate).__name__}")
    return json.loads(json.dumps(dict(candidate), default=str))


def _hook_result_payload(result: NativeHookResult, origin_event: str) -> dict[str, object]:
    return {
        "event": "hook_result",
        "hookRef": result.hook_ref,
        "invocationId": result.invocation_id,
        "outcome": result.outcome,
        "code": result.code,
        "originEvent": origin_event,
    }


def _rows(result: NativeHookResult) -> list[ReportRow]:
    row = ReportRow(
        "hook",
        result.hook_ref,
        result.event,
        result.outcome,
        result.code,
        origin_ref=result.origin_ref,
        origin_outcome=result.origin_outcome,
    )
    rows = [replace(row, duration_s=result.duration_s)] if result.started else []
    if result.action_selected or result.guarded:
        rows.append(
            replace(row, kind="action", action_type=result.action_type, guarded=result.guarded)
        )
    return rows


def _reason(spec: EventSpec, failed: list[NativeHookResult], errors: list[str]) -> str:
    """One line naming every failing hook and why (never its command)."""
    items = [
        f"{r.hook_ref} ({r.detail}{' during when' if r.failed_during == 'when' else ''})"
        for r in failed
    ]
    items += errors
    verb = "blocked" if spec.failure == "block" else "failed at"
    count = len(failed) + len(errors)
    noun = "native hook" if count == 1 else "native hooks"
    return escape_untrusted(f"{count} {noun} {verb} {spec.name}: {'; '.join(items)}")
