"""What `run` and `resume` print when a phase or the project loop ends: a line for a person
(coloured on a terminal), or the stable JSON of `--json`."""

from __future__ import annotations

import sys

from looprail.cli._common import paint, print_json
from looprail.layout import log_of
from looprail.machine.progress import fmt_duration
from looprail.textsafe import one_line, plural


def project_summary_json(result, loop: dict | None) -> dict:
    """The machine-readable end of `run --json` without `--phase` (stable keys): each phase's
    own summary (as `run --phase N --json` prints it), which shipped, which were finished
    before, which were not run, and why it stopped."""
    sessions = [summary_json(s, n) for n, s in result.sessions]
    if result.sessions:
        last = result.sessions[-1][1].result
        status = last.status if last.status != "shipped" or not result.stopped else "halted"
    else:
        status = "halted" if result.stopped else "nothing-to-run"
    return {
        "loop": "through" if loop and "through" in loop else "all" if loop else "next",
        "through": loop.get("through") if loop else None,
        "status": status,
        "exitCode": result.exit_code,
        "shipped": result.shipped,
        "finishedBefore": result.finished_before,
        "notRun": result.remaining,
        "reason": result.stopped
        if result.stopped
        else (sessions[-1]["reason"] if sessions and status != "shipped" else None),
        "spentUsd": round(result.spent_usd, 6),
        "phases": sessions,
    }


def project_summary(result, loop: dict | None, *, as_json: bool) -> int:
    """Print how the project loop ended (which phases shipped, what was not run); its exit code."""
    code = result.exit_code
    if as_json:
        print_json(project_summary_json(result, loop))
        return code
    if not result.sessions:
        if result.stopped:
            print(f"looprail: {result.stopped}", file=sys.stderr)
        elif not result.phase_count:
            print(f"no phase to run: {result.no_phase}; nothing to run (use --phase N for one)")
        else:
            upto = f" through phase {loop['through']}" if loop and "through" in loop else ""
            print(f"every phase{upto} is finished; nothing to run")
        return code
    if loop is None and not result.stopped:
        return code  # one phase: its own summary said it all
    stream = sys.stdout if code == 0 else sys.stderr
    statuses = [(number, session.result.status) for number, session in result.sessions]
    line = "phases: " + ", ".join(f"{n} {paint(status, status, stream)}" for n, status in statuses)
    if result.remaining:
        line += f"; not run: {', '.join(result.remaining)}"
    if result.stopped:
        line += f" ({result.stopped})"
    print(line, file=stream)
    return code


def summary_json(outcome, phase: str) -> dict:
    """The machine-readable end of `run --json` and `resume --json` (stable keys)."""
    r = outcome.result
    refused = r.refused_by
    return {
        "runId": outcome.run_id,
        "phase": phase,
        "status": r.status,
        "state": list(r.state),
        "reason": r.reason,
        "refusedBy": None
        if refused is None
        else {"capId": refused.cap_id, "point": refused.point, "kind": refused.kind},
        "exitCode": r.exit_code,
        "durationS": round(r.duration_s, 3),
        "tasksRun": r.tasks_run,
        "wavesRun": r.waves_run,
        "hooksDispatched": r.hooks_dispatched,
        "resumed": outcome.resumed,
        "log": log_of(r.reason),
        "warnings": list(r.warnings),
        "unverified": list(r.unverified),
    }


def phase_summary(outcome, phase: str, *, as_json: bool = False) -> int:
    """Print how one phase's run ended (shipped, paused or halted, and why); its exit code."""
    r = outcome.result
    if as_json:
        print_json(summary_json(outcome, phase))
        return r.exit_code
    run = f"run {outcome.run_id}: " if outcome.run_id else ""
    took = fmt_duration(r.duration_s)
    if r.unverified:  # never silent; said before the run's last line, which stays last
        shown = ", ".join(r.unverified[:10]) + (" …" if len(r.unverified) > 10 else "")
        stream = sys.stdout if r.status == "shipped" else sys.stderr
        words = f"unverified ({plural(len(r.unverified), 'task')}, no automated check): {shown}"
        print(words, file=stream)
    if r.status == "shipped":
        waves = plural(r.waves_run, "wave")
        hooks = f"{plural(r.hooks_dispatched, 'hook')} dispatched"
        shipped = paint("shipped", "shipped")
        print(f"{run}{shipped} in {took} ({plural(r.tasks_run, 'task')} run, {waves}, {hooks})")
    elif r.status == "paused":
        print(
            f"{run}{paint('paused', 'paused', sys.stderr)}: {one_line(r.reason)}", file=sys.stderr
        )
    else:
        # The state is where the run stayed; a refusal also names the point that refused (a
        # block at execute:pre stays in plan).
        refused = r.refused_by
        where = f", refused at {refused.point}" if refused is not None else ""
        halted = paint("halted", "halted", sys.stderr)
        print(f"{run}{halted} in {'/'.join(r.state)}{where}: {one_line(r.reason)}", file=sys.stderr)
    return r.exit_code
