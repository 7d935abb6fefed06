"""Dispatch every active hook of a point through a Runtime, whatever its kind (docs/contract.md,
"Dispatch"): the reference's worst bugs were hooks of one shape silently never run. The results
go to the guards."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from looprail.hooks.capset import CapabilitySet
from looprail.hooks.gates.checks import (
    COMMAND_GRAMMAR,
    LEDGER_GATES,
    LEDGER_PATH,
    CheckContext,
    CheckError,
    evaluate_check,
)
from looprail.hooks.resolve import resolve
from looprail.journal.recorder import EventRecord, Recorder
from looprail.machine.guards import HookKind, HookResult, HookStatus, refuses
from looprail.machine.progress import Progress, fmt_duration
from looprail.runtime.base import (
    DispatchContext,
    Flavor,
    Runtime,
    deliver_context,
    phase_req_ids,
    run_command,
    run_skill,
    spawn_agent,
    step_of,
)
from looprail.runtime.hostcall import predicate_args, query_args

# The native hooks of a point, evaluated: their results.
NativePoint = Callable[[str, DispatchContext], list[HookResult]]
# How many native hooks will run at a point (their filters match): for the point's header line.
NativeCount = Callable[[str, int | None], int]
# (step, role) → the step whose work reads what that role is given at that step's points:
# execute points may contribute `into: verifier` (host contract), for verify.
_CARRIED: Mapping[tuple[str, str], str] = {("execute", "verifier"): "verify"}
_OFF_GRAMMAR = "ref.command fails the grammar ^[a-z][a-z0-9-]*( [a-z][a-z0-9-]*)*$; not run"


@dataclass(kw_only=True, eq=False)
class Dispatcher:
    """Dispatches the points of one phase's run (`LoopRunner.dispatcher`)."""

    compiled: CapabilitySet
    config: Mapping[str, Any] | None
    runtime: Runtime
    project: Path
    phase_number: str
    phase_dir: Path | None
    flavor: Flavor = "gsd"
    host_tool: str | None = None
    progress: Progress = field(default_factory=lambda: Progress(quiet=True))
    recorder: Recorder
    native: NativePoint | None = None
    native_count: NativeCount | None = None
    dispatched: int = field(default=0, init=False)  # hooks dispatched so far (native too)
    # The contributions' fragments, per (step, role), in delivery order.
    _texts: dict[tuple[str, str], list[str]] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def context(self, point: str | None = None, **extra: Any) -> DispatchContext:
        """The context of work dispatched at `point` (`extra`: plan, task, wave...)."""
        return DispatchContext(
            project=self.project,
            phase_number=self.phase_number,
            phase_dir=self.phase_dir,
            point=point,
            flavor=self.flavor,
            host_tool=self.host_tool,
            **extra,
        )

    def contribute(self, role: str, text: str, ctx: DispatchContext) -> None:
        """Queue `text` for `role`'s later work in the step of `ctx.point` (once: a wave's is
        dispatched again at every wave), and tell the runtime."""
        deliver_context(self.runtime, role, text, ctx)  # refuses a call without role or point
        step = step_of(ctx.point or "")
        step = _CARRIED.get((step, role), step)
        with self._lock:
            texts = self._texts.setdefault((step, role), [])
            if text not in texts:
                texts.append(text)

    def role_context(self, role: str, step: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._texts.get((step, role), ()))

    def dispatch(self, point: str, *, wave: int | None = None) -> list[HookResult]:
        """Dispatch one point, up to the first result that refuses (no later hook's effects)."""
        envelope = resolve(self.compiled, self.config, point)
        hooks = envelope.get("activeHooks") or []
        where = f" (wave {wave})" if wave is not None else ""
        natives = self.native_count(point, wave) if self.native_count is not None else 0
        self.progress.line(f"▸ {point}{where}: {_count(hooks, natives)}")
        data = {"hooks": len(hooks), **({"nativeHooks": natives} if natives else {})}
        self.recorder.event(EventRecord(kind="point", point=point, wave=wave, data=data))
        for w in envelope.get("warnings", ()):
            self.progress.warn(w)
            self.recorder.event(EventRecord(kind="warning", point=point, message=w))
        results: list[HookResult] = []
        for hook in hooks:
            if self._counted(results, self._dispatch_one(point, hook, wave), wave):
                return results
        if self.native is not None:
            for result in self.native(point, self.context(point, wave=wave)):
                if self._counted(results, result, wave):
                    break
        return results

    def _counted(self, results: list[HookResult], result: HookResult, wave: int | None) -> bool:
        """Count, keep and report `result`; whether it refuses (the point stops there)."""
        self.dispatched += 1
        results.append(result)
        self._report(result, wave)
        return refuses(result)

    def _dispatch_one(self, point: str, hook: Mapping[str, Any], wave: int | None) -> HookResult:
        kind = hook.get("kind")
        cap_id = str(hook.get("capId"))
        ctx = self.context(point, cap_id=cap_id, wave=wave)
        start = time.monotonic()
        if kind == "contribution":
            text = (hook.get("fragment") or {}).get("inline")
            role = hook.get("into")
            if not isinstance(text, str) or not role:
                return self._result(
                    point, hook, "failed", start, "contribution has no inline text or role"
                )
            self.contribute(role, text, ctx)
            # Journaled so that a resumed run hands the same fragments to later role work.
            data = {"into": role, "text": text}
            self.recorder.event(
                EventRecord(kind="contribution", point=point, wave=wave, cap_id=cap_id, data=data)
            )
            return self._result(point, hook, "ok", start, f"into {role}", label=f"→ {role}")
        if kind == "step":
            return self._step(point, hook, ctx, start)
        if kind == "gate":
            return self._gate(point, hook, ctx, start)
        return self._result(point, hook, "failed", start, f"unknown hook kind {kind!r}")

    def _step(
        self, point: str, hook: Mapping[str, Any], ctx: DispatchContext, start: float
    ) -> HookResult:
        ref = hook.get("ref") or {}
        if ref.get("skill"):
            label = f"skill:{self.flavor}-{ref['skill']}"
            outcome = run_skill(self.runtime, f"{self.flavor}-{ref['skill']}", ctx)
        elif ref.get("agent"):
            label = f"agent:{ref['agent']}"
            outcome = spawn_agent(self.runtime, ref["agent"], ctx)
        elif isinstance(ref.get("command"), str):
            command = ref["command"]
            label = f"command:{command}"
            if not COMMAND_GRAMMAR.match(command):
                return self._result(point, hook, "failed", start, _OFF_GRAMMAR, label=label)
            outcome = run_command(self.runtime, command.split(" "), ctx)
        else:
            return self._result(
                point, hook, "failed", start, "step ref has no skill, agent or command"
            )
        if outcome.ok:
            return self._result(point, hook, "ok", start, "", label=label)
        return self._result(point, hook, "failed", start, outcome.detail or "failed", label=label)

    def _gate(
        self, point: str, hook: Mapping[str, Any], ctx: DispatchContext, start: float
    ) -> HookResult:
        check = hook.get("check") or {}
        label = _check_label(check)
        check_ctx = CheckContext(
            project=self.project,
            phase_number=self.phase_number,
            phase_dir=self.phase_dir,
            config=dict(self.config) if self.config else None,
            phase_req_ids=self._phase_req_ids(point, ctx),
            point=point,
            cap_id=str(hook.get("capId")),
        )
        if (point, check_ctx.cap_id) in LEDGER_GATES:
            label = f"ledger {LEDGER_PATH}"
        result = evaluate_check(check, check_ctx, self.runtime, runtime_ctx=ctx)
        if isinstance(result, CheckError):
            reason = result.reason + (" (could not look)" if result.unavailable else "")
            return self._result(point, hook, "error", start, reason, label=label)
        status: HookStatus = "block" if result.block else "pass"
        return self._result(
            point, hook, status, start, result.message, label=label, details=result.details
        )

    def _phase_req_ids(self, point: str, ctx: DispatchContext) -> str:
        """Only plan:post passes requirement ids (docs/checks.md); asked once per point."""
        if "phase_req_ids" not in query_args(point) + predicate_args(point):
            return ""
        return phase_req_ids(self.runtime, ctx)

    def _result(
        self,
        point: str,
        hook: Mapping[str, Any],
        status: HookStatus,
        start: float,
        message: str,
        *,
        label: str = "",
        details: Mapping[str, Any] | None = None,
    ) -> HookResult:
        return HookResult(
            details=shown_details(message, details),
            point=point,
            cap_id=str(hook.get("capId")),
            kind=cast(HookKind, hook.get("kind"))
            if hook.get("kind") in ("step", "contribution", "gate")
            else "step",
            status=status,
            blocking=hook.get("blocking") is True,
            on_error=hook.get("onError"),
            message=message,
            label=label,
            duration_s=time.monotonic() - start,
        )

    def _report(self, r: HookResult, wave: int | None) -> None:
        """Say what a hook did (one line) and journal its `hook` event."""
        self._say(r)
        outcome = {"block": "blocked" if r.blocking else "advisory"}.get(r.status, r.status)
        self.recorder.event(
            EventRecord(
                kind="hook",
                point=r.point,
                wave=wave,
                cap_id=r.cap_id,
                hook_kind=r.kind,
                outcome=outcome,
                duration_ms=int(r.duration_s * 1000),
                message=(r.shown if r.status == "block" else r.message) or None,
                data={
                    "label": r.label,
                    "onError": r.on_error,
                    "blocking": r.blocking,
                    **({"details": r.details} if r.details else {}),
                },
            )
        )

    def _say(self, r: HookResult) -> None:
        took = fmt_duration(r.duration_s)
        what = f"{r.kind} {r.label or ''} ({r.cap_id})".replace("  ", " ")
        if r.kind == "gate":
            if r.status == "pass" and not r.blocking and r.message.strip():
                # the reference's workflows show an advisory gate's non-empty message
                first = r.message.strip().splitlines()[0][:200]
                self.progress.line(f"  ✓ {what} pass {took}: {first}")
            elif r.status == "pass":
                self.progress.line(f"  ✓ {what} pass {took}")
            elif r.status == "block" and r.blocking:
                self.progress.line(f"  ✗ {what} BLOCKED: {r.shown}")
            elif r.status == "block":
                self.progress.line(f"  ! {what} advisory: {r.shown}")
            elif refuses(r):
                self.progress.line(f"  ✗ {what} gate check failed: {r.message}")
            else:
                self.progress.warn(f"{what} gate check failed, onError {r.on_error}: {r.message}")
        elif r.kind == "native":
            # Native hooks have no onError: a `:pre` failure blocks, any other one reports.
            if r.status == "ok":
                self.progress.line(f"  ✓ native hook {r.cap_id} {took}")
            elif r.status == "block":
                self.progress.line(f"  ✗ native hook {r.cap_id} blocked {r.point}: {r.message}")
            else:
                self.progress.warn(f"native hook {r.cap_id} reported at {r.point}: {r.message}")
        elif r.status in ("ok",):
            self.progress.line(f"  ✓ {what} {took}")
        elif refuses(r):
            self.progress.line(f"  ✗ {what} failed (onError {r.on_error}): {r.message}")
        elif r.status == "report":
            self.progress.warn(f"{what} reported: {r.message}")
        else:
            self.progress.warn(f"{what} failed, onError {r.on_error or 'skip'}: {r.message}")


def shown_details(message: str, details: Mapping[str, Any] | None) -> dict[str, object] | None:
    """The extra keys of a verdict worth showing: not `block`/`message`, nor a copy of the
    message (the reference repeats its report as `table`)."""
    if not details:
        return None
    kept = {k: v for k, v in details.items() if k not in ("block", "message") and v != message}
    return kept or None


def _count(hooks: Sequence[Mapping[str, Any]], natives: int = 0) -> str:
    """`1 step, 2 gates, 1 native hook`, or `no active hooks` when nothing will run."""
    by_kind = Counter(h.get("kind", "?") for h in hooks)
    if natives:
        by_kind["native hook"] = natives
    if not by_kind:
        return "no active hooks"
    return ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in by_kind.items())


def _check_label(check: Mapping[str, Any]) -> str:
    if "query" in check:
        return f"query {check['query']}"
    if "predicate" in check:
        pred = check["predicate"]
        return f"predicate {pred.get('kind') if isinstance(pred, Mapping) else '?'}"
    if "agentVerdict" in check:
        return "agentVerdict"
    return "check"
