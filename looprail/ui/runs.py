"""One run as the dashboard shows it (`snapshot()["run"]` and the list of runs): its status
(a `running` run whose lock nobody holds was interrupted), waves and tasks, the hooks at each
point and what they did, its answers, where it stopped and the command that continues it."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeGuard

from looprail.diagrams.graph import crossed_points, hook_summary
from looprail.journal import EventRow, RunRow, TaskRow, is_run_id
from looprail.journal.lock import LockInfo
from looprail.journal.report import current_halt, format_duration, report_from_rows
from looprail.journal.summary import duration_ms
from looprail.machine.answers import latest
from looprail.machine.commands import approve_option
from looprail.ui.logs import task_logs

if TYPE_CHECKING:
    from looprail.hooks.resolve import Envelope

Envelopes = Mapping[str, "Envelope"]


class _Run(TypedDict):
    id: str
    phase: str
    status: str
    display: str
    live: bool
    interrupted: bool
    startedAt: str
    endedAt: str | None
    took: str
    haltReason: str | None


class RunSummary(_Run):
    """One row of the page's list of runs."""

    tasks: dict[str, int]


class TaskView(TypedDict):
    key: str
    status: str
    attempts: int
    startedAt: str | None
    endedAt: str | None
    elapsedMs: int | None
    elapsed: str
    resolver: dict[str, object] | None
    tokens: int | None
    cost: float | None
    logFiles: list[str]


class PlanView(TypedDict):
    planId: str | None
    tasks: list[TaskView]


class WaveView(TypedDict):
    wave: int | None
    outcome: str | None
    startedAt: str | None
    endedAt: str | None
    took: str
    plans: list[PlanView]


class Step(TypedDict):
    """One transition of the run's path through the chart."""

    source: list[str]
    target: list[str]
    event: str | None


class AnswerView(TypedDict):
    seq: int
    ts: str
    taskId: str | None
    kind: str | None
    text: str | None
    option: str | None
    source: str | None


class HookResult(TypedDict):
    """What one hook (or gate verdict) did at a point in this run."""

    wave: int | None
    outcome: str | None
    durationMs: int | None
    took: str
    message: str | None
    verdict: bool


class HookView(TypedDict):
    """A hook at a point: its place in dispatch order (None until placed), what it is, and what
    it did in this run."""

    order: int | None
    kind: str
    capId: str | None
    summary: str
    blocking: bool
    onError: object
    results: list[HookResult]


class PointView(TypedDict):
    point: str
    dispatches: int
    hooks: list[HookView]


_Continue = TypedDict("_Continue", {"continue": str | None})  # a keyword: no class syntax


class RunDetail(_Run, _Continue):
    """The run the page shows: its summary, chart state, answers, points, waves and report."""

    state: list[str]
    pid: int | None
    host: str | None
    halt: dict[str, object] | None  # the report's NoteRow, as warnings are
    answers: list[AnswerView]
    path: list[Step]
    points: list[PointView]
    waves: list[WaveView]
    tasks: dict[str, object]
    warnings: list[dict[str, object]]
    resumes: list[dict[str, object]]
    nativeHooks: list[dict[str, object]]


def display_status(run: RunRow, holder: LockInfo | None) -> tuple[str, bool, bool]:
    """(status to show, live, interrupted): a `running` run that nobody holds the lock for was
    interrupted (its process is gone)."""
    if run.status != "running":
        return run.status, False, False
    if holder is not None and (holder.run_id in (None, run.id)):
        return "running", True, False
    return "interrupted", False, True


def _run(run: RunRow, holder: LockInfo | None) -> _Run:
    shown, live, interrupted = display_status(run, holder)
    return {
        "id": run.id,
        "phase": run.phase,
        "status": run.status,
        "display": shown,
        "live": live,
        "interrupted": interrupted,
        "startedAt": run.started_at,
        "endedAt": run.ended_at,
        "took": format_duration(duration_ms(run.started_at, run.ended_at)),
        "haltReason": run.halt_reason,
    }


def run_summary(run: RunRow, task_counts: Mapping[str, int], holder: LockInfo | None) -> RunSummary:
    tasks = {"pending": 0, "running": 0, "done": 0, "failed": 0, **task_counts}
    return {**_run(run, holder), "tasks": tasks}


def run_detail(
    project: Path,
    capability_dirs: Sequence[str],
    run: RunRow,
    events: list[EventRow],
    tasks: list[TaskRow],
    holder: LockInfo | None,
    envelopes: Envelopes | None,
) -> RunDetail:
    report = report_from_rows(run, events, tasks)
    base = _run(run, holder)
    logs = task_logs(project, run.id, [t.task_key for t in tasks])
    finished = {e.task_id: e for e in events if e.kind == "task_finished" and e.task_id}
    stopped = report["run"]["status"] in ("halted", "paused", "failed")
    halt = current_halt(report) if stopped else None  # where a stopped run stopped
    return {
        **base,
        "state": run.state,
        "took": format_duration(report["run"]["durationMs"]),
        "pid": run.pid,
        "host": run.host,
        "halt": None if halt is None else dict(halt),
        "continue": continue_command(project, run, base["interrupted"], events),
        "answers": answers_view(events),
        "path": [_step(e) for e in events if e.kind == "transition"],
        "points": points_view(events, envelopes),
        "waves": [_wave(w, finished, logs, base["live"]) for w in report["waves"]],
        "tasks": report["run"]["tasks"],
        "warnings": report["warnings"],
        "resumes": report["resumes"],
        "nativeHooks": [{k: v for k, v in h.items() if k != "data"} for h in report["nativeHooks"]],
    }


def _wave(
    wave: Mapping[str, Any],
    finished: Mapping[str, EventRow],
    logs: Mapping[str, list[tuple[str, Path]]],
    live: bool,
) -> WaveView:
    now = datetime.now(UTC).isoformat()
    plans: list[PlanView] = []
    for plan in wave["plans"]:
        rows: list[TaskView] = []
        for task in plan["tasks"]:
            key, started = task["key"], task["startedAt"]
            tokens, cost = _usage(finished.get(key))
            elapsed = task["durationMs"]
            if elapsed is None and started and task["status"] == "running" and live:
                elapsed = duration_ms(started, now)
            rows.append(
                {
                    "key": key,
                    "status": task["status"],
                    "attempts": task["attempts"],
                    "startedAt": started,
                    "endedAt": task["endedAt"],
                    "elapsedMs": elapsed,
                    "elapsed": format_duration(elapsed),
                    "resolver": task["resolver"],
                    "tokens": tokens,
                    "cost": cost,
                    "logFiles": [name for name, _ in logs.get(key, [])],
                }
            )
        plans.append({"planId": plan["planId"], "tasks": rows})
    return {
        "wave": wave["wave"],
        "outcome": wave["outcome"],
        "startedAt": wave["startedAt"],
        "endedAt": wave["endedAt"],
        "took": format_duration(wave["durationMs"]),
        "plans": plans,
    }


def _step(e: EventRow) -> Step:
    event = e.data.get("event")
    return {
        "source": _states(e.data.get("source")),
        "target": _states(e.data.get("target")),
        "event": event if isinstance(event, str) else None,
    }


def _states(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _usage(event: EventRow | None) -> tuple[int | None, float | None]:
    """(tokens, cost) of a finished task, when its runtime reported them (`tokens`,
    `usage.{input,output}_tokens`, `cost`/`cost_usd`/`costUsd` in the event's data)."""
    data = (event.data or {}) if event is not None else {}
    tokens, usage = data.get("tokens"), data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    if tokens is None and usage:
        parts = [p for k in ("input_tokens", "output_tokens") if isinstance(p := usage.get(k), int)]
        if parts:
            tokens = sum(parts)
        elif isinstance(usage.get("total_tokens"), int):
            tokens = usage["total_tokens"]
    costs = (data.get(k, usage.get(k)) for k in ("cost", "cost_usd", "costUsd", "total_cost_usd"))
    cost = next((float(c) for c in costs if _number(c)), None)
    return (int(tokens) if _number(tokens) else None), cost


def points_view(events: list[EventRow], envelopes: Envelopes | None) -> list[PointView]:
    """Every point the loop crosses, in loop order, with its active hooks in contract order
    (the resolver's dispatch order) and what each did in this run. Hooks the run dispatched
    that the current manifests no longer declare (or that were loaded without
    `--capabilities`) follow, in the order they ran."""
    dispatches: dict[str, int] = {}
    ran: dict[str, list[EventRow]] = {}
    for e in events:
        if e.point is None:
            continue
        if e.kind == "point":
            dispatches[e.point] = dispatches.get(e.point, 0) + 1
        elif e.kind in ("hook", "gate_verdict"):
            ran.setdefault(e.point, []).append(e)
    order = list(crossed_points())
    order += [p for p in list(dispatches) + list(ran) if p not in order]
    points: list[PointView] = []
    for point in dict.fromkeys(order):
        env = (envelopes or {}).get(point)
        active = (env.get("activeHooks") if env else None) or ()
        hooks = [_active_hook(i + 1, hook) for i, hook in enumerate(active)]
        unmatched: list[HookView] = []
        for e in ran.get(point, ()):
            target = _hook_of(e, hooks) or _hook_of(e, unmatched)
            if target is None:
                target = _unknown_hook(e)
                unmatched.append(target)
            target["results"].append(_result(e))
        for extra in unmatched:
            extra["order"] = len(hooks) + 1
            hooks.append(extra)
        points.append({"point": point, "dispatches": dispatches.get(point, 0), "hooks": hooks})
    return points


def _active_hook(order: int, hook: Mapping[str, object]) -> HookView:
    return {
        "order": order,
        "kind": str(hook.get("kind")),
        "capId": str(hook.get("capId")),
        "summary": hook_summary(hook),
        "blocking": hook.get("blocking") is True,
        "onError": hook.get("onError"),
        "results": [],
    }


def _unknown_hook(e: EventRow) -> HookView:
    """A hook the run dispatched that the current manifests do not declare."""
    data = e.data or {}
    label, on_error = data.get("label"), data.get("onError")
    return {
        "order": None,
        "kind": e.hook_kind or ("gate" if e.kind == "gate_verdict" else "?"),
        "capId": e.cap_id,
        "summary": label if isinstance(label, str) else "",
        "blocking": data.get("blocking") is True,
        "onError": on_error if isinstance(on_error, str) else None,
        "results": [],
    }


def _hook_of(e: EventRow, hooks: list[HookView]) -> HookView | None:
    """The hook of `hooks` that event `e` is a result of (a gate's verdict: its capability's
    first hook)."""
    verdict = e.kind == "gate_verdict"
    return next(
        (h for h in hooks if h["capId"] == e.cap_id and (verdict or h["kind"] == e.hook_kind)),
        None,
    )


def _result(e: EventRow) -> HookResult:
    return {
        "wave": e.wave,
        "outcome": e.outcome,
        "durationMs": e.duration_ms,
        "took": format_duration(e.duration_ms),
        "message": e.message,
        "verdict": e.kind == "gate_verdict",
    }


def caps_args(capability_dirs: Sequence[str]) -> str:
    """` --capabilities DIR` for each capability folder, quoted for a shell."""
    return "".join(f" --capabilities {shlex.quote(str(d))}" for d in capability_dirs)


def continue_command(
    project: Path, run: RunRow, interrupted: bool, events: Sequence[EventRow] = ()
) -> str | None:
    """The command that continues `run`, or None when there is nothing to continue. A run
    paused at a checkpoint continues with `--approve TASK`, unless the checkpoint has been
    answered since (from the dashboard or `looprail answer`): the resumed run uses the
    answer. No `--capabilities`: a resume uses the folders its run started with (its journal
    record, machine/started_with.py), not the dashboard's."""
    if run.status in ("shipped", "failed"):
        return None
    if run.status == "running" and not interrupted:
        return None  # live: it is going on right now
    if not is_run_id(run.id):
        return None  # never print a planted id as a command to copy
    cmd = f"looprail resume {shlex.quote(run.id)} --project {shlex.quote(str(project))}"
    if run.status == "paused" and run.halt_reason:
        # the checkpoint the run paused at: the one its halt reason says to approve
        asked = {e.task_id for e in events if e.kind == "checkpoint" and e.task_id}
        named = [t for t in asked if f"{approve_option(t)}," in run.halt_reason]
        if named and not _answered(events, max(named, key=len)):
            cmd += f" {approve_option(max(named, key=len))}"
    return cmd


def _answered(events: Sequence[EventRow], task_id: str) -> bool:
    last = latest(events, task_id)
    return last is not None and last.kind == "answer"


def answers_view(events: Sequence[EventRow]) -> list[AnswerView]:
    """The run's journaled answers to checkpoints, oldest first (a secret's text is "answer
    withheld": its value is never in the journal)."""
    out: list[AnswerView] = []
    for e in events:
        if e.kind != "answer":
            continue
        data = e.data or {}
        option, source = data.get("option"), data.get("source")
        out.append(
            {
                "seq": e.seq,
                "ts": e.ts,
                "taskId": e.task_id,
                "kind": e.outcome,
                "text": e.message,
                "option": option if isinstance(option, str) else None,
                "source": source if isinstance(source, str) else None,
            }
        )
    return out
