"""What the dashboard shows, as plain JSON-able values, read from the project and its journal.

Everything here only reads: the journal is opened with `Journal.open_readonly` (SQLite
`mode=ro` + `query_only`), the run lock is only probed, log files are read bounded. A missing
journal, a journal that cannot be read and a project without `.planning/` are states the page
explains, not errors.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from looprail.diagrams.graph import crossed_points, hook_summary
from looprail.errors import LooprailError, OutsideProjectError
from looprail.fsutil import looprail_path
from looprail.layout import LOGS_DIR, PLANNING_DIR, normalize_phase_number
from looprail.machine import answers
from looprail.machine.answers import latest
from looprail.machine.project import latest_runs, project_phases
from looprail.plans import load_phase
from looprail.plans.checkpoint import render
from looprail.plans.phase import list_phases
from looprail.store import Journal, JournalError, NoJournalError, RunRow, is_run_id, lock_holder
from looprail.store.report import format_duration, report_from_rows

LOG_TAIL_BYTES = 64 * 1024
LOG_TAIL_LINES = 200
LOG_MAX_FILES = 2000  # files looked at under one run's log folder
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- opening ---------------------------------------------------------------------------------


def open_journal(project: Path) -> tuple[Journal | None, str | None]:
    """(journal, None), or (None, why not) where why is None for "no journal yet"."""
    try:
        return Journal.open_readonly(project), None
    except NoJournalError:
        return None, None
    except JournalError as exc:
        return None, str(exc)


def change_marker(project: Path) -> str:
    """A cheap value that changes whenever anything the page shows may have changed: the newest
    event, every run's status, and whether a live process holds the run lock."""
    journal, error = open_journal(project)
    if journal is None:
        return f"none:{error or ''}"
    with journal:
        runs = journal.runs()
        seq = journal.last_seq()
    holder = lock_holder(project)
    statuses = ",".join(f"{r.id}={r.status}" for r in runs)
    return f"{seq}|{statuses}|{holder.run_id if holder else '-'}"


# -- the snapshot ----------------------------------------------------------------------------


def snapshot(
    project: Path,
    capability_dirs: Sequence[str] = (),
    run_ref: str | None = None,
    *,
    envelopes: dict[str, dict[str, Any]] | None = None,
    envelope_warnings: Sequence[str] = (),
    event_cache: dict[str, list[Any]] | None = None,
) -> dict[str, Any]:
    """Everything the page shows for `run_ref` (None: the latest run). With `event_cache`
    (`{run id: events}`, kept by the caller between calls), only events newer than the cached
    ones are read: events are append-only, so the cache stays true."""
    is_project = (project / PLANNING_DIR).is_dir()
    phases: list[str] = []
    if is_project:
        try:
            phases = [p.number for p in list_phases(project)]
        except Exception:  # a damaged phases folder must not take the page down
            phases = []
    out: dict[str, Any] = {
        "now": now_iso(),
        "project": {
            "name": project.resolve().name,
            "path": str(project.resolve()),
            "isProject": is_project,
            "phases": phases,
        },
        "journalError": None,
        "runs": [],
        "run": None,
        "hint": None,
        "warnings": list(envelope_warnings),
    }
    out["checkpoints"] = None
    journal, error = open_journal(project)
    if journal is None:
        out["journalError"] = error
        out["hint"] = _hint(project, capability_dirs, is_project, phases, error)
        out["project"]["roadmap"] = project_phases_view(project, [], None) if is_project else []
        return out
    holder = lock_holder(project)
    with journal:
        runs = journal.runs()
        # The journal is a file in the project: a run id not in looprail's own form (planted
        # to reach a path or a printed command) is left out, and said so.
        for run in runs:
            if not is_run_id(run.id):
                out["warnings"].append(f"journal: run {run.id!r} skipped: not a looprail run id")
        runs = [run for run in runs if is_run_id(run.id)]
        if is_project:
            out["project"]["roadmap"] = project_phases_view(
                project, runs, run_ref and _ref(runs, run_ref)
            )
        else:
            out["project"]["roadmap"] = []
        if not runs:
            out["hint"] = _hint(project, capability_dirs, is_project, phases, None)
            return out
        selected = _select(journal, runs, run_ref)
        counts = journal.task_counts()
        tasks = journal.tasks(selected.id)
        waiting = journal.unfinished_run()
        if event_cache is None:
            events = journal.events(selected.id)
        else:
            cached = event_cache.setdefault(selected.id, [])
            cached.extend(journal.events(selected.id, after=cached[-1].seq if cached else 0))
            events = list(cached)
    out["runs"] = [
        _run_summary(r, counts.get(r.id, {}), holder)
        for r in sorted(runs, key=lambda r: (r.started_at, r.id), reverse=True)
    ]
    out["run"] = _run_detail(project, capability_dirs, selected, events, tasks, holder, envelopes)
    if waiting is not None and is_run_id(waiting.id):
        # The run shown is usually the one that waits: its events are read already.
        shown = events if waiting.id == selected.id else None
        out["checkpoints"] = checkpoints_view(project, waiting.id, waiting.phase, shown)
    return out


# -- checkpoints -----------------------------------------------------------------------------


def checkpoints_view(
    project: Path, run_id: str, phase: str, events: Sequence[Any] | None = None
) -> dict[str, Any] | None:
    """What the latest unfinished run `run_id` waits on (`machine.answers.pending_checkpoints`,
    the seam the terminal and `looprail answer` use; with that run's `events` at hand, the
    seam's own rule over them, which spares reading them again): each checkpoint's
    presentation model, its title, and the text the terminal shows for it
    (`plans.checkpoint.render`, with the plan's progress as the terminal counts it). None when
    it waits on nothing."""
    if events is None:
        pending = answers.pending_checkpoints(project)
    else:
        kinds = ("checkpoint", "answer", "task_finished")  # what pending_checkpoints reads
        pending = answers.pending_in([e for e in events if e.kind in kinds])
    if not pending:
        return None
    items = []
    for cp in pending:
        done, total = _progress(project, phase, cp.plan_id, cp.task_id)
        items.append(
            {
                **cp.model_dump(mode="json"),
                "title": cp.title,
                "text": render(cp, done, total),
            }
        )
    return {"runId": run_id, "items": items}


def _progress(
    project: Path, phase: str, plan_id: str, task_id: str
) -> tuple[int | None, int | None]:
    """(tasks of the plan before the checkpoint, tasks of the plan): the terminal's "Progress"
    line; (None, None) when the plan cannot be read now."""
    try:
        plan = load_phase(project, phase).plan(plan_id)
    except (LooprailError, OSError, KeyError):
        return None, None
    ids = [t.id for t in plan.tasks]
    if task_id not in ids:
        return None, None
    return ids.index(task_id), len(ids)


def project_phases_view(
    project: Path, runs: Sequence[RunRow], selected: str | None
) -> list[dict[str, Any]]:
    """The project's phases in ROADMAP order with where each stands (`looprail status`'s
    phases): finished or not and why, its latest run; `next` marks the phase `looprail run`
    runs next, `current` the phase of the run shown (`selected`; None: the latest run)."""
    try:
        phases = project_phases(project, latest_runs(runs))
    except Exception:  # a damaged ROADMAP or phases folder must not take the page down
        return []
    shown = next((r for r in runs if r.id == selected), None) or (
        max(runs, key=lambda r: (r.started_at, r.id)) if runs else None
    )
    current = normalize_phase_number(shown.phase) if shown is not None else None
    nxt = next((p.number for p in phases if not p.finished), None)
    return [
        {**p.as_json(), "next": p.number == nxt, "current": p.number == current} for p in phases
    ]


def _ref(runs: Sequence[RunRow], ref: str) -> str | None:
    """The id of the run `ref` names (an id or a unique prefix), else None."""
    hits = [r.id for r in runs if r.id.lower().startswith(ref.lower())]
    return hits[0] if len(hits) == 1 else None


def _select(journal: Journal, runs: list[RunRow], ref: str | None) -> RunRow:
    if ref:
        try:
            found = journal.find_run(ref)
            if is_run_id(found.id):
                return found
        except JournalError:
            pass  # an unknown run in the URL: show the latest
    return max(runs, key=lambda r: (r.started_at, r.id))


def _display_status(run: RunRow, holder: Any) -> tuple[str, bool, bool]:
    """(status to show, live, interrupted): a `running` run that nobody holds the lock for was
    interrupted (its process is gone)."""
    if run.status != "running":
        return run.status, False, False
    if holder is not None and (holder.run_id in (None, run.id)):
        return "running", True, False
    return "interrupted", False, True


def _run_summary(run: RunRow, task_counts: dict[str, int], holder: Any) -> dict[str, Any]:
    shown, live, interrupted = _display_status(run, holder)
    counts = {"pending": 0, "running": 0, "done": 0, "failed": 0}
    for status, count in task_counts.items():
        counts[status] = count
    return {
        "id": run.id,
        "phase": run.phase,
        "status": run.status,
        "display": shown,
        "live": live,
        "interrupted": interrupted,
        "startedAt": run.started_at,
        "endedAt": run.ended_at,
        "took": format_duration(_ms(run.started_at, run.ended_at)),
        "haltReason": run.halt_reason,
        "tasks": counts,
    }


def _run_detail(
    project: Path,
    capability_dirs: Sequence[str],
    run: RunRow,
    events: list[Any],
    tasks: list[Any],
    holder: Any,
    envelopes: dict[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    report = report_from_rows(run, events, tasks)
    shown, live, interrupted = _display_status(run, holder)
    halt = _current_halt(run, events)
    finished = {e.task_id: e for e in events if e.kind == "task_finished" and e.task_id}
    logs = task_logs(project, run.id, [t.task_key for t in tasks])
    now = datetime.now(UTC)
    waves = []
    for wave in report.waves:
        plans = []
        for plan in wave.plans:
            rows = []
            for task in plan.tasks:
                usage = _usage(finished.get(task.key))
                elapsed = task.durationMs
                if elapsed is None and task.startedAt and task.status == "running" and live:
                    start = datetime.fromisoformat(task.startedAt)
                    elapsed = max(0, round((now - start).total_seconds() * 1000))
                rows.append(
                    {
                        "key": task.key,
                        "status": task.status,
                        "attempts": task.attempts,
                        "startedAt": task.startedAt,
                        "endedAt": task.endedAt,
                        "elapsedMs": elapsed,
                        "elapsed": format_duration(elapsed),
                        "resolver": task.resolver.model_dump(mode="json")
                        if task.resolver
                        else None,
                        "tokens": usage.get("tokens"),
                        "cost": usage.get("cost"),
                        "logFiles": [name for name, _ in logs.get(task.key, [])],
                    }
                )
            plans.append({"planId": plan.planId, "tasks": rows})
        waves.append(
            {
                "wave": wave.wave,
                "outcome": wave.outcome,
                "startedAt": wave.startedAt,
                "endedAt": wave.endedAt,
                "took": format_duration(wave.durationMs),
                "plans": plans,
            }
        )
    return {
        "id": run.id,
        "phase": run.phase,
        "status": run.status,
        "display": shown,
        "live": live,
        "interrupted": interrupted,
        "state": run.state,
        "startedAt": run.started_at,
        "endedAt": run.ended_at,
        "took": format_duration(report.run.durationMs),
        "pid": run.pid,
        "host": run.host,
        "haltReason": run.halt_reason,
        "halt": halt,
        "continue": continue_command(project, capability_dirs, run, interrupted, events),
        "answers": answers_view(events),
        "path": [
            {
                "source": _states(e.data.get("source")),
                "target": _states(e.data.get("target")),
                "event": e.data.get("event") if isinstance(e.data.get("event"), str) else None,
            }
            for e in events
            if e.kind == "transition"
        ],
        "points": points_view(events, envelopes),
        "waves": waves,
        "tasks": report.run.tasks.model_dump(mode="json"),
        "warnings": [w.model_dump(mode="json") for w in report.warnings],
        "resumes": [r.model_dump(mode="json") for r in report.resumes],
        "nativeHooks": [
            {k: v for k, v in h.model_dump(mode="json").items() if k != "data"}
            for h in report.nativeHooks
        ],
    }


def _current_halt(run: RunRow, events: list[Any]) -> dict[str, Any] | None:
    """Where a stopped run stopped: its last `halted` event since the last resume (a resumed
    run is not still refused where an earlier attempt was)."""
    if run.status not in ("halted", "paused", "failed"):
        return None
    last = None
    for e in events:
        if e.kind == "run_resumed":
            last = None
        elif e.kind == "halted":
            last = e
    if last is None:
        return None
    return {
        "seq": last.seq,
        "ts": last.ts,
        "point": last.point,
        "capId": last.cap_id,
        "taskId": last.task_id,
        "message": last.message,
    }


def _states(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _ms(start: str | None, end: str | None) -> int | None:
    if not start or not end:
        return None
    delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    return max(0, round(delta.total_seconds() * 1000))


def _usage(event: Any) -> dict[str, Any]:
    """Tokens and cost of a finished task, when its runtime reported them (`tokens`,
    `usage.{input,output}_tokens`, `cost`/`cost_usd`/`costUsd` in the event's data)."""
    if event is None:
        return {}
    data = event.data or {}
    out: dict[str, Any] = {}
    tokens = data.get("tokens")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    if tokens is None and usage:
        parts = [usage.get(k) for k in ("input_tokens", "output_tokens")]
        if any(isinstance(p, int) for p in parts):
            tokens = sum(p for p in parts if isinstance(p, int))
        elif isinstance(usage.get("total_tokens"), int):
            tokens = usage["total_tokens"]
    if isinstance(tokens, int | float) and not isinstance(tokens, bool):
        out["tokens"] = int(tokens)
    for key in ("cost", "cost_usd", "costUsd", "total_cost_usd"):
        value = data.get(key, usage.get(key) if usage else None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out["cost"] = float(value)
            break
    return out


# -- points ----------------------------------------------------------------------------------


def points_view(
    events: list[Any], envelopes: dict[str, dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Every point the loop crosses, in loop order, with its active hooks in contract order
    (the resolver's dispatch order) and what each did in this run. Hooks the run dispatched
    that the current manifests no longer declare (or that were loaded without
    `--capabilities`) follow, in the order they ran."""
    dispatches: dict[str, int] = {}
    ran: dict[str, list[Any]] = {}
    for e in events:
        if e.point is None:
            continue
        if e.kind == "point":
            dispatches[e.point] = dispatches.get(e.point, 0) + 1
        elif e.kind in ("hook", "gate_verdict"):
            ran.setdefault(e.point, []).append(e)
    order = list(crossed_points())
    order += [p for p in list(dispatches) + list(ran) if p not in order]
    points = []
    for point in dict.fromkeys(order):
        env = (envelopes or {}).get(point) or {}
        hooks: list[dict[str, Any]] = []
        for index, hook in enumerate(env.get("activeHooks") or ()):
            hooks.append(
                {
                    "order": index + 1,
                    "kind": str(hook.get("kind")),
                    "capId": str(hook.get("capId")),
                    "summary": hook_summary(hook),
                    "blocking": hook.get("blocking") is True,
                    "onError": hook.get("onError"),
                    "results": [],
                }
            )
        unmatched: list[dict[str, Any]] = []
        for e in ran.get(point, ()):
            result = {
                "wave": e.wave,
                "outcome": e.outcome,
                "durationMs": e.duration_ms,
                "took": format_duration(e.duration_ms),
                "message": e.message,
                "verdict": e.kind == "gate_verdict",
            }
            target = next(
                (
                    h
                    for h in hooks
                    if h["capId"] == e.cap_id
                    and (e.kind == "gate_verdict" or h["kind"] == e.hook_kind)
                ),
                None,
            )
            if target is None:
                target = next(
                    (
                        h
                        for h in unmatched
                        if h["capId"] == e.cap_id
                        and (e.kind == "gate_verdict" or h["kind"] == e.hook_kind)
                    ),
                    None,
                )
            if target is None:
                data = e.data or {}
                target = {
                    "order": None,
                    "kind": e.hook_kind or ("gate" if e.kind == "gate_verdict" else "?"),
                    "capId": e.cap_id,
                    "summary": data.get("label") if isinstance(data.get("label"), str) else "",
                    "blocking": data.get("blocking") is True,
                    "onError": data.get("onError")
                    if isinstance(data.get("onError"), str)
                    else None,
                    "results": [],
                }
                unmatched.append(target)
            target["results"].append(result)
        for extra in unmatched:
            extra["order"] = len(hooks) + 1
            hooks.append(extra)
        points.append({"point": point, "dispatches": dispatches.get(point, 0), "hooks": hooks})
    return points


# -- what to do next -------------------------------------------------------------------------


def _caps(capability_dirs: Sequence[str]) -> str:
    return "".join(f" --capabilities {shlex.quote(str(d))}" for d in capability_dirs)


def continue_command(
    project: Path,
    capability_dirs: Sequence[str],
    run: RunRow,
    interrupted: bool,
    events: Sequence[Any] = (),
) -> str | None:
    """The command that continues `run`, or None when there is nothing to continue. A run
    paused at a checkpoint continues with `--approve TASK`, unless the checkpoint has been
    answered since (from the dashboard or `looprail answer`): the resumed run uses the
    answer."""
    if run.status in ("shipped", "failed"):
        return None
    if run.status == "running" and not interrupted:
        return None  # live: it is going on right now
    if not is_run_id(run.id):
        return None  # never print a planted id as a command to copy
    cmd = (
        f"looprail resume {shlex.quote(run.id)} --project {shlex.quote(str(project))}"
        f"{_caps(capability_dirs)}"
    )
    if run.status == "paused" and run.halt_reason:
        match = re.search(r"--approve (\S+)", run.halt_reason)
        if match and not _answered(events, match.group(1)):
            cmd += f" --approve {shlex.quote(match.group(1))}"
    return cmd


def _answered(events: Sequence[Any], task_id: str) -> bool:
    last = latest(events, task_id)
    return last is not None and last.kind == "answer"


def answers_view(events: Sequence[Any]) -> list[dict[str, Any]]:
    """The run's journaled answers to checkpoints, oldest first: the task, what the answer
    meant (approved, chosen, issues, value, withheld), the text as journaled (a secret's is
    "answer withheld": its value is never in the journal), the chosen option, and where it
    came from (terminal, dashboard, `looprail answer`, …)."""
    out = []
    for e in events:
        if e.kind != "answer":
            continue
        data = e.data or {}
        out.append(
            {
                "seq": e.seq,
                "ts": e.ts,
                "taskId": e.task_id,
                "kind": e.outcome,
                "text": e.message,
                "option": data.get("option") if isinstance(data.get("option"), str) else None,
                "source": data.get("source") if isinstance(data.get("source"), str) else None,
            }
        )
    return out


def _hint(
    project: Path,
    capability_dirs: Sequence[str],
    is_project: bool,
    phases: list[str],
    error: str | None,
) -> str:
    where = shlex.quote(str(project))
    if error:
        return f"The journal cannot be read: {error}"
    if not is_project:
        return (
            f"{project} has no .planning/ folder, so it is not a looprail project yet. Create "
            ".planning/phases/<NN-name>/ with PLAN.md files (docs/plans.md), then run "
            f"`looprail run {where} --phase 1`; this page follows the run live."
        )
    phase = phases[0] if phases else "1"
    return (
        "No runs yet. Start one in another terminal: "
        f"`looprail run {where} --phase {phase}{_caps(capability_dirs)}`; "
        "this page follows it live."
    )


# -- task logs -------------------------------------------------------------------------------


def _tokens(text: str) -> list[str]:
    return re.findall(r"[0-9a-z]+", text.lower())


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def log_dir(project: Path, run_id: str) -> Path | None:
    """`.looprail/logs/<run>/`, or None: only for a run id in looprail's own form (a plain
    name, so `../../../../etc` never names a folder), and never through a `.looprail/logs` or
    run folder linked out of the project."""
    if not is_run_id(run_id):
        return None
    try:
        return looprail_path(project, LOGS_DIR, run_id)
    except OutsideProjectError:
        return None


def task_logs(project: Path, run_id: str, task_keys: Sequence[str]) -> dict[str, list[tuple]]:
    """`{task key: [(relative name, path), …]}` of the log files under
    `.looprail/logs/<run>/` that belong to each task. A file belongs to a task when the task
    key's words (`01-02/T3` → 01 02 t3) appear in order in its path without extensions, so
    `01-02/T3.log`, `01-02_T3.stderr` and `01-02/T3/out.txt` all match and `T30` does not.
    Regular files only; symlinks are not followed."""
    root = log_dir(project, run_id)
    if root is None:
        return {}
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            return {}
    except OSError:
        return {}
    files: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    continue
            except OSError:
                continue
            files.append((path.relative_to(root).as_posix(), path))
            if len(files) >= LOG_MAX_FILES:
                break
        if len(files) >= LOG_MAX_FILES:
            break
    out: dict[str, list[tuple]] = {}
    wanted = {key: _tokens(key) for key in task_keys}
    for rel, path in files:
        parts = rel.split("/")
        stem = parts[-1].split(".", 1)[0] if not parts[-1].startswith(".") else parts[-1]
        words = _tokens("/".join([*parts[:-1], stem]))
        best = None
        for key, needle in wanted.items():
            # the longest matching key wins (01-02/T3 over a key that is a prefix of it)
            if _contains(words, needle) and (best is None or len(needle) > len(wanted[best])):
                best = key
        if best is not None:
            out.setdefault(best, []).append((rel, path))
    return out


def read_tail(path: Path) -> tuple[str, bool]:
    """The last lines of a log file as text (escape sequences and control characters removed),
    and whether it was cut."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", False
        size = os.fstat(fd).st_size
        start = max(0, size - LOG_TAIL_BYTES)
        blob = os.pread(fd, LOG_TAIL_BYTES, start)
    finally:
        os.close(fd)
    text = blob.decode("utf-8", errors="replace")
    cut = start > 0
    if cut and "\n" in text:
        text = text.split("\n", 1)[1]  # drop the partial first line
    text = _CONTROL.sub("", _ANSI.sub("", text.replace("\r\n", "\n")))
    lines = text.split("\n")
    if len(lines) > LOG_TAIL_LINES + 1:
        lines, cut = lines[-LOG_TAIL_LINES - 1 :], True
    return "\n".join(lines), cut


def task_log(project: Path, run_id: str, task_key: str) -> dict[str, Any]:
    """The tails of a task's log files (an empty list: "no log")."""
    matched = task_logs(project, run_id, [task_key]).get(task_key, [])
    files = []
    for rel, path in matched:
        try:
            text, cut = read_tail(path)
        except OSError as exc:
            text, cut = f"(cannot read: {exc.strerror})", False
        files.append({"name": rel, "text": text, "truncated": cut})
    return {"run": run_id, "task": task_key, "files": files}
