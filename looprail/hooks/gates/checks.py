"""Gate check evaluation: a gate's `check` (`query`, `predicate` or `agentVerdict`) → a `Verdict`
or a `CheckError`. Two types on purpose (the two-step gate contract): a `CheckError` means no
verdict exists and is routed by the gate's `onError`; a `Verdict`'s `block` is read against
`blocking`. An unknown or malformed check is always an error, never a pass."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from looprail.errors import CheckFailedError as CheckFailedError  # re-exported
from looprail.errors import LooprailError
from looprail.hooks.gates.ledger import LedgerError, parse_ledger

# Re-exported: callers know the shared result types and the predicate kinds by this module.
from looprail.hooks.gates.predicates import PREDICATE_KINDS as PREDICATE_KINDS
from looprail.hooks.gates.predicates import PREDICATES as PREDICATES
from looprail.hooks.gates.predicates import REFERENCE_KINDS, CheckResult, js_string
from looprail.hooks.gates.predicates import CheckContext as CheckContext
from looprail.hooks.gates.predicates import CheckError as CheckError
from looprail.hooks.gates.predicates import Verdict as Verdict
from looprail.hooks.gates.predicates import evaluate_predicate as evaluate_predicate
from looprail.hooks.gates.predicates import evaluate_predicate_json as evaluate_predicate_json
from looprail.hooks.manifest_rules import CHECK_SHAPES, QUERY_GRAMMAR_TEXT, validate_query
from looprail.hooks.manifest_rules import COMMAND_GRAMMAR as COMMAND_GRAMMAR
from looprail.hooks.manifest_rules import GRAMMAR_TEXT as GRAMMAR_TEXT
from looprail.hooks.manifest_rules import QUERY_GRAMMAR as QUERY_GRAMMAR
from looprail.hooks.manifest_rules import validate_command as validate_command
from looprail.jsonload import json_type_name
from looprail.runtime.base import EXIT_UNAVAILABLE as EXIT_UNAVAILABLE
from looprail.runtime.base import (
    DispatchContext,
    Outcome,
    Runtime,
    ask_verdict,
    host_tool_for,
    run_host,
    run_query_check,
    verdict_problem,
)
from looprail.runtime.hostcall import UNKNOWN_REQ_IDS, predicate_args, predicate_flags
from looprail.runtime.process import escape_untrusted

# Gates the reference's workflow enforces its own way rather than by their declared check:
# its ship workflow (step 7) reads the broken-windows ledger through `gsd_run windows status`
# (docs/checks.md).
LEDGER_GATES = {("ship:pre", "broken-windows")}
LEDGER_PATH = ".planning/WINDOWS.md"


def evaluate_check(
    check: object,
    ctx: CheckContext,
    runtime: Runtime | None = None,
    *,
    runtime_ctx: DispatchContext | None = None,
) -> CheckResult:
    """Evaluate one gate `check`, the mapping of a compiled gate hook. `runtime` (needed for
    `query` and `agentVerdict`) is called with `runtime_ctx`, or one built from `ctx`."""
    if not isinstance(check, Mapping):
        return CheckError(f"check must be an object, got {json_type_name(check)}")
    present = [k for k in CHECK_SHAPES if k in check]
    if len(present) != 1:
        found = ", ".join(present) if present else "none"
        return CheckError(
            f"check must have exactly one of {', '.join(CHECK_SHAPES)} (found {found})"
        )
    shape = present[0]
    if (ctx.point, ctx.cap_id) in LEDGER_GATES:
        return evaluate_ledger(ctx, runtime, runtime_ctx)
    value = check[shape]
    if shape == "predicate":
        kind = value.get("kind") if isinstance(value, Mapping) else None
        if kind not in REFERENCE_KINDS:
            # looprail's own kinds: the reference's evaluator does not know them (it would
            # refuse the kind), so looprail evaluates them, with everything it knows
            return evaluate_predicate(value, ctx)
    elif runtime is None:
        return CheckError(f"check.{shape} needs a runtime and none was given", unavailable=True)
    target = _target(ctx, runtime, runtime_ctx)
    if isinstance(target, CheckError):
        return target
    if runtime is None or target is None:  # a predicate, and no runtime to ask
        return evaluate_predicate(value, at_point(ctx))
    if shape == "query":
        return _evaluate_query(value, runtime, target)
    if shape == "agentVerdict":
        return _evaluate_agent_verdict(value, runtime, target)
    if host_tool_for(runtime, target):
        return _host_predicate(value, ctx, runtime, target)
    return evaluate_predicate(value, at_point(ctx))


def at_point(ctx: CheckContext) -> CheckContext:
    """`ctx` with only what the reference's workflow passes at `ctx.point` (e.g. no phase
    folder at `execute:wave:post`, where an artifact is then looked up in the project root).
    Without a point (the `check predicate` command) everything given is kept."""
    if ctx.point is None:
        return ctx
    names = predicate_args(ctx.point)
    return replace(
        ctx,
        phase_number=ctx.phase_number if "phase_number" in names else "",
        phase_dir=ctx.phase_dir if "phase_dir" in names else None,
        phase_req_ids=(ctx.phase_req_ids or UNKNOWN_REQ_IDS) if "phase_req_ids" in names else "",
    )


def evaluate_ledger(
    ctx: CheckContext, runtime: Runtime | None = None, runtime_ctx: DispatchContext | None = None
) -> CheckResult:
    """The broken-windows ship gate as the reference's ship workflow enforces it: the ledger's
    `open_count` must be 0; no ledger passes; a ledger that cannot be read blocks. Through the
    host tool's `windows status --raw` when there is one, else from `.planning/WINDOWS.md`
    directly."""
    target = _target(ctx, runtime, runtime_ctx)
    if isinstance(target, CheckError):
        return target
    if runtime is not None and target is not None and host_tool_for(runtime, target):
        open_count, problem = _host_open_count(runtime, target)
    else:
        open_count, problem = _ledger_open_count(ctx.project / LEDGER_PATH)
    details: dict[str, object] = {"ledger": LEDGER_PATH}
    if isinstance(open_count, bool) or not isinstance(open_count, (int, float)):
        details["readFailed"] = True
        return Verdict(
            True,
            f"Broken-windows ship gate: could not read open_count from {LEDGER_PATH} "
            f"({escape_untrusted(problem)}); fix the ledger before shipping",
            details,
        )
    details["openCount"] = open_count
    if open_count == 0:
        return Verdict(False, f"{LEDGER_PATH}: no open windows", details)
    return Verdict(
        True,
        f"Broken-windows ship gate: WINDOWS.md has {js_string(open_count)} open window(s); "
        "resolve or waive each entry before shipping",
        details,
    )


def _host_open_count(runtime: Runtime, target: DispatchContext) -> tuple[object, str]:
    """`ledger.open_count` from the host tool's `windows status --raw`, and what went wrong."""
    outcome = run_host(runtime, ["windows", "status", "--raw"], target)
    data = outcome.data if outcome.ok and isinstance(outcome.data, dict) else {}
    ledger = raw if isinstance(raw := data.get("ledger"), dict) else {}
    return ledger.get("open_count"), outcome.detail or "no ledger.open_count in its output"


def _ledger_open_count(path: Path) -> tuple[object, str]:
    """`open_count` of the ledger file (0 when there is none), or None and why."""
    try:
        raw = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return 0, ""
    except OSError as exc:
        return None, f"could not read {LEDGER_PATH}: {exc.strerror or exc}"
    try:
        return parse_ledger(raw), ""
    except LedgerError as exc:
        return None, str(exc)


def _target(
    ctx: CheckContext, runtime: Runtime | None, runtime_ctx: DispatchContext | None
) -> DispatchContext | CheckError | None:
    """What the runtime is called with: the caller's context, or one built from `ctx`."""
    if runtime is None or runtime_ctx is not None:
        return runtime_ctx
    return _dispatch_context(ctx)


def _host_predicate(
    predicate: object, ctx: CheckContext, runtime: Runtime, target: DispatchContext
) -> CheckResult:
    """`<tool> check predicate --predicate JSON <flags> --raw`, the flags the workflow at
    `ctx.point` passes."""
    try:
        text = json.dumps(predicate, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return CheckError("check.predicate cannot be written as JSON")
    flags = predicate_flags(
        predicate_args(ctx.point),
        ctx.project,
        ctx.phase_number,
        ctx.resolved_phase_dir(),
        ctx.phase_req_ids,
    )
    argv = ["check", "predicate", "--predicate", text, *flags, "--raw"]
    outcome = run_host(runtime, argv, target)
    return verdict_from_outcome(outcome, "check predicate")


def _dispatch_context(ctx: CheckContext) -> DispatchContext | CheckError:
    phase_dir = ctx.resolved_phase_dir()
    try:
        return DispatchContext(
            project=ctx.project,
            phase_number=ctx.phase_number,
            phase_dir=phase_dir.absolute() if phase_dir is not None else None,
            point=ctx.point,
            cap_id=ctx.cap_id,
        )
    except ValidationError as exc:
        reason = exc.errors()[0].get("msg", "invalid")
        return CheckError(f"cannot build the runtime context: {reason}")


def _evaluate_query(query: object, runtime: Runtime, target: DispatchContext) -> CheckResult:
    if not isinstance(query, str):
        return CheckError(f"check.query must be a string, got {json_type_name(query)}; not run")
    if not validate_query(query):
        return CheckError(
            f"check.query fails the grammar ({QUERY_GRAMMAR_TEXT}): "
            f"'{escape_untrusted(query)}'; not run"
        )
    try:
        outcome = run_query_check(runtime, query.split(" "), target)
    except (LooprailError, OSError) as exc:
        return CheckError(f"check.query {query!r}: runtime failed: {escape_untrusted(str(exc))}")
    return verdict_from_outcome(outcome, f"check.query {query!r}")


def _evaluate_agent_verdict(spec: object, runtime: Runtime, target: DispatchContext) -> CheckResult:
    if not isinstance(spec, Mapping):
        return CheckError(f"check.agentVerdict must be an object, got {json_type_name(spec)}")
    try:
        outcome = ask_verdict(runtime, spec, target)
    except (LooprailError, OSError) as exc:
        return CheckError(f"check.agentVerdict: runtime failed: {escape_untrusted(str(exc))}")
    return verdict_from_outcome(outcome, "check.agentVerdict")


def verdict_from_outcome(outcome: Outcome, label: str) -> CheckResult:
    """Read a runtime `Outcome` with the two-step contract: step 1 (did the check run and say
    something usable?) decides between `CheckError` and `Verdict`; `block` is never inferred
    from an exit code, and exit 69 is "could not look" even when JSON was printed."""
    detail = escape_untrusted(outcome.detail or "")
    if outcome.unavailable or outcome.exit_code == EXIT_UNAVAILABLE:
        return CheckError(f"{label} could not look (unavailable): {detail}", unavailable=True)
    if not outcome.ok:
        code = "no exit code" if outcome.exit_code is None else f"exit {outcome.exit_code}"
        return CheckError(f"{label} failed ({code}): {detail}")
    problem, data = verdict_problem(outcome), outcome.data
    if problem is not None or data is None:  # no data: verdict_problem says why
        return CheckError(f"{label} {problem}")
    block, message = data["block"], data.get("message", "")
    assert isinstance(block, bool) and isinstance(message, str)  # verdict_problem checked both
    extra = {k: v for k, v in data.items() if k not in ("block", "message")}
    return Verdict(block=block, message=message, details=extra or None)
