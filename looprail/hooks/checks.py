"""Gate check evaluation: a gate's `check` → a delivered `Verdict` or a `CheckError`.

The two results are different types on purpose (the two-step gate contract): a `CheckError`
means the check could not deliver a verdict (malformed check, refused query, a runtime that failed
or "could not look", unparseable output) and the caller routes it by the gate's `onError`; a
`Verdict` was delivered and the caller reads `block` against the gate's `blocking`. An unknown or
malformed check is always an error, never a pass.

Three check shapes, exactly one per check:

- `query`: words matching `QUERY_GRAMMAR`, checked here before the runtime ever sees them (a
  manifest may be third-party), then handed to `runtime.run_query_check(words, ctx)` as a list.
- `predicate`: evaluated here by kind (`PREDICATES`, one `PredicateKind` record each).
  `command-exit-zero` is the one manifest surface that reaches `/bin/sh`; its phase values
  travel only as environment variables.
- `agentVerdict`: `runtime.ask_verdict(spec, ctx)`; advisory by manifest validation.

Effects (a process, a file read) happen only inside the kind that needs them; everything else is
plain data in, plain data out.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, cast

from pydantic import ValidationError

from looprail.config import MISSING, lookup
from looprail.errors import CheckFailedError as CheckFailedError  # re-exported
from looprail.errors import LooprailError
from looprail.frontmatter import reference_frontmatter
from looprail.hooks.ledger import LedgerError, parse_ledger
from looprail.hostcall import UNKNOWN_REQ_IDS, predicate_args, predicate_flags
from looprail.jsonload import json_type_name, loads_strict
from looprail.layout import PLANNING_DIR
from looprail.runtime.base import (
    EXIT_UNAVAILABLE,  # "could not look": never a verdict
    DispatchContext,
    verdict_problem,
)
from looprail.runtime.process import escape_untrusted, run_bounded, tail

# `\Z`, not `$`: Python's `$` also matches before a trailing newline, and a newline is exactly
# what must never slip through. The same grammar guards step `ref.command`.
COMMAND_GRAMMAR = re.compile(r"^[a-z][a-z0-9-]*(?: [a-z][a-z0-9-]*)*\Z")
GRAMMAR_TEXT = "^[a-z][a-z0-9-]*( [a-z][a-z0-9-]*)*$"  # as docs/contract.md writes it
# `check.query` words may be dotted handler names (`ui.plan-gate`): the reference's router reads
# a dot as a hyphen. A dot never starts or ends a word and never doubles, so `..` cannot occur.
_QUERY_WORD = r"[a-z][a-z0-9-]*(?:\.[a-z][a-z0-9-]*)*"
QUERY_GRAMMAR = re.compile(rf"^{_QUERY_WORD}(?: {_QUERY_WORD})*\Z")
QUERY_GRAMMAR_TEXT = "words [a-z][a-z0-9-]*(\\.[a-z][a-z0-9-]*)* separated by single spaces"

CHECK_SHAPES = ("query", "predicate", "agentVerdict")

COMMAND_MAX_LENGTH = 4096
COMMAND_DEFAULT_TIMEOUT_S = 30.0
COMMAND_MAX_TIMEOUT_S = 3600
MESSAGE_TAIL_CHARS = 2000
INTERPOLATED_VARS = ("PHASE_NUMBER", "PHASE_DIR", "PHASE_REQ_IDS")

# A phase-dir artifact may carry the phase prefix: `SECURITY.md` also matches `01-SECURITY.md`,
# `02.1-SECURITY.md`, `01-02-SUMMARY.md`.
_PHASE_PREFIX = re.compile(r"^[0-9][0-9.]*(?:-[0-9][0-9.]*)*-")


# Gates the reference's workflow enforces its own way rather than by their declared check:
# its ship workflow (step 7) reads the broken-windows ledger through `gsd_run windows status`
# (docs/checks.md).
LEDGER_GATES = {("ship:pre", "broken-windows")}
LEDGER_PATH = ".planning/WINDOWS.md"


# ── results and context ──────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Verdict:
    """A delivered verdict. `block` is read against the gate's `blocking`; `message` is shown."""

    block: bool
    message: str = ""
    details: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The `{block, message}` envelope hosts parse."""
        return {"block": self.block, "message": self.message}


@dataclass(frozen=True)
class CheckError:
    """The check itself failed; no verdict exists. Routed by the gate's `onError`.

    `unavailable` marks "could not look" (exit 69, a missing runtime or shell) as opposed to a
    check that is malformed or produced garbage.
    """

    reason: str
    unavailable: bool = False

    @property
    def exit_code(self) -> int:
        """How the CLI exits on it: 69 (EX_UNAVAILABLE) when the check could not look."""
        return EXIT_UNAVAILABLE if self.unavailable else 1


CheckResult = Verdict | CheckError


@dataclass(frozen=True)
class CheckContext:
    """What a check may see. `phase_dir` is absolute or relative to `project`."""

    project: Path
    phase_number: str = ""
    phase_dir: Path | None = None
    config: dict[str, Any] | None = None
    phase_req_ids: str = ""
    env: Mapping[str, str] | None = field(default=None, compare=False)  # None: inherit os.environ
    point: str | None = None  # the extension point; decides what the reference would pass
    cap_id: str | None = None

    def resolved_phase_dir(self) -> Path | None:
        if self.phase_dir is None:
            return None
        return self.phase_dir if self.phase_dir.is_absolute() else self.project / self.phase_dir


class CheckRuntime(Protocol):
    """The `Runtime` methods a check needs (see `looprail.runtime.base.Runtime`)."""

    def run_query_check(self, words: Sequence[str], ctx: Any) -> Any: ...

    def ask_verdict(self, agent_verdict: Mapping[str, Any], ctx: Any) -> Any: ...

    def host_tool_for(self, ctx: Any) -> str | None: ...

    def run_host(self, args: Sequence[str], ctx: Any) -> Any: ...


# ── entry points ─────────────────────────────────────────────────────────────────────────────


def validate_query(value: object) -> bool:
    """True when `value` is a `check.query`: lowercase (dotted) words that may be used as argv."""
    return isinstance(value, str) and QUERY_GRAMMAR.match(value) is not None


def validate_command(value: object) -> bool:
    """True when `value` is a step `ref.command`: lowercase words (no dots) for argv."""
    return isinstance(value, str) and COMMAND_GRAMMAR.match(value) is not None


def evaluate_check(
    check: object,
    ctx: CheckContext,
    runtime: CheckRuntime | None = None,
    *,
    runtime_ctx: Any = None,
) -> CheckResult:
    """Evaluate one gate `check`: the mapping of a compiled gate hook (anything else is a
    `CheckError`; the one capability shape the machine runs is the compiled one).

    `runtime` is needed for `query` and `agentVerdict`; it receives `runtime_ctx` (the caller's
    `DispatchContext`), or one built from `ctx` when that is omitted.
    """
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
    if shape == "predicate":
        predicate = check["predicate"]
        kind = predicate.get("kind") if isinstance(predicate, Mapping) else None
        if kind not in REFERENCE_KINDS:
            # looprail's own kinds: the reference's evaluator does not know them (it would
            # refuse the kind), so looprail evaluates them, with everything it knows
            return evaluate_predicate(predicate, ctx)
        if runtime is not None and runtime_ctx is None:
            runtime_ctx = _dispatch_context(ctx)
            if isinstance(runtime_ctx, CheckError):
                return runtime_ctx
        host = _host_runner(runtime, runtime_ctx)
        if host is not None:
            return _host_predicate(check["predicate"], ctx, host, runtime_ctx)
        return evaluate_predicate(check["predicate"], at_point(ctx))
    if runtime is None:
        return CheckError(f"check.{shape} needs a runtime and none was given", unavailable=True)
    if runtime_ctx is None:
        runtime_ctx = _dispatch_context(ctx)
        if isinstance(runtime_ctx, CheckError):
            return runtime_ctx
    if shape == "query":
        return _evaluate_query(check["query"], runtime, runtime_ctx)
    return _evaluate_agent_verdict(check["agentVerdict"], runtime, runtime_ctx)


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
    ctx: CheckContext, runtime: CheckRuntime | None = None, runtime_ctx: Any = None
) -> CheckResult:
    """The broken-windows ship gate as the reference's ship workflow enforces it: the ledger's
    `open_count` must be 0; no ledger passes; a ledger that cannot be read blocks. Through the
    host tool's `windows status --raw` when there is one, else from `.planning/WINDOWS.md`
    directly."""
    details: dict[str, Any] = {"ledger": LEDGER_PATH}
    if runtime is not None and runtime_ctx is None:
        runtime_ctx = _dispatch_context(ctx)
        if isinstance(runtime_ctx, CheckError):
            return runtime_ctx
    host = _host_runner(runtime, runtime_ctx)
    open_count: Any
    problem = ""
    if host is not None:
        outcome = host(["windows", "status", "--raw"], runtime_ctx)
        data = outcome.data if outcome.ok and isinstance(outcome.data, dict) else {}
        ledger = raw if isinstance(raw := data.get("ledger"), dict) else {}
        open_count = ledger.get("open_count")
        problem = outcome.detail or "no ledger.open_count in its output"
    else:
        try:
            raw = (ctx.project / LEDGER_PATH).read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            raw = None
        except OSError as exc:
            raw, problem = "", f"could not read {LEDGER_PATH}: {exc.strerror or exc}"
            open_count = None
        if raw is None:
            open_count = 0
        elif raw:
            try:
                open_count = parse_ledger(raw).open_count
            except LedgerError as exc:
                open_count, problem = None, str(exc)
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


def _host_runner(
    runtime: CheckRuntime | None, target: Any
) -> Callable[[Sequence[str], Any], Any] | None:
    """The runtime's way to call its host tool for `target`, or None without a host tool."""
    if runtime is None or target is None or not runtime.host_tool_for(target):
        return None
    return runtime.run_host


def _host_predicate(predicate: Any, ctx: CheckContext, host: Any, target: Any) -> CheckResult:
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
    outcome = host(["check", "predicate", "--predicate", text, *flags, "--raw"], target)
    return verdict_from_outcome(outcome, "check predicate")


def evaluate_predicate(predicate: Any, ctx: CheckContext) -> CheckResult:
    """Evaluate a `check.predicate` (an object, or its JSON text) by its `kind`."""
    if isinstance(predicate, str):
        return evaluate_predicate_json(predicate, ctx)
    if not isinstance(predicate, Mapping):
        return CheckError(f"check.predicate must be an object, got {json_type_name(predicate)}")
    kind = predicate.get("kind")
    if not isinstance(kind, str) or not kind:
        return CheckError("check.predicate.kind must be a non-empty string")
    spec = PREDICATES.get(kind)
    if spec is None:
        return CheckError(
            f"check.predicate.kind: unknown kind '{escape_untrusted(kind)}' "
            f"(known: {', '.join(PREDICATE_KINDS)})"
        )
    try:
        return spec.evaluate(predicate, ctx)
    except _Malformed as exc:
        return CheckError(f"check.predicate ({kind}): {exc}")
    except RecursionError:  # comparing or printing a hostile, deeply nested value
        return CheckError(f"check.predicate ({kind}): a value is nested too deeply")


def evaluate_predicate_json(text: str, ctx: CheckContext) -> CheckResult:
    """`evaluate_predicate` for the predicate's JSON text (the CLI's `--predicate` value)."""
    try:
        value, duplicates = loads_strict(text)
    except json.JSONDecodeError as exc:
        return CheckError(f"check.predicate is not valid JSON ({exc.msg} at char {exc.pos})")
    except ValueError as exc:  # NaN / Infinity
        return CheckError(f"check.predicate is not valid JSON ({exc})")
    except RecursionError:  # a hostile argument must not end in a traceback
        return CheckError("check.predicate is not valid JSON (nested too deeply)")
    if duplicates:  # which value wins differs between readers: refuse to guess
        return CheckError(
            f"check.predicate has duplicate key {escape_untrusted(json.dumps(duplicates[0]))}"
        )
    if not isinstance(value, dict):
        return CheckError(f"check.predicate must be a JSON object, got {json_type_name(value)}")
    return evaluate_predicate(value, ctx)


# ── query and agentVerdict: through the runtime ──────────────────────────────────────────────


def _dispatch_context(ctx: CheckContext) -> Any:
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


def _evaluate_query(query: Any, runtime: CheckRuntime, target: Any) -> CheckResult:
    if not isinstance(query, str):
        return CheckError(f"check.query must be a string, got {json_type_name(query)}; not run")
    if not validate_query(query):
        return CheckError(
            f"check.query fails the grammar ({QUERY_GRAMMAR_TEXT}): "
            f"'{escape_untrusted(query)}'; not run"
        )
    words = query.split(" ")
    try:
        outcome = runtime.run_query_check(words, target)
    except (LooprailError, OSError) as exc:
        return CheckError(f"check.query {query!r}: runtime failed: {escape_untrusted(str(exc))}")
    return verdict_from_outcome(outcome, f"check.query {query!r}")


def _evaluate_agent_verdict(spec: Any, runtime: CheckRuntime, target: Any) -> CheckResult:
    if not isinstance(spec, Mapping):
        return CheckError(f"check.agentVerdict must be an object, got {json_type_name(spec)}")
    try:
        outcome = runtime.ask_verdict(spec, target)
    except (LooprailError, OSError) as exc:
        return CheckError(f"check.agentVerdict: runtime failed: {escape_untrusted(str(exc))}")
    return verdict_from_outcome(outcome, "check.agentVerdict")


def verdict_from_outcome(outcome: Any, label: str) -> CheckResult:
    """Read a runtime `Outcome` with the two-step contract: step 1 (did the check run and say
    something usable?) decides between `CheckError` and `Verdict`; `block` is never inferred
    from an exit code, and exit 69 is "could not look" even when JSON was printed."""
    detail = escape_untrusted(outcome.detail or "")
    if outcome.unavailable or outcome.exit_code == EXIT_UNAVAILABLE:
        return CheckError(f"{label} could not look (unavailable): {detail}", unavailable=True)
    if not outcome.ok:
        code = "no exit code" if outcome.exit_code is None else f"exit {outcome.exit_code}"
        return CheckError(f"{label} failed ({code}): {detail}")
    problem = verdict_problem(outcome)
    if problem is not None:
        return CheckError(f"{label} {problem}")
    data = outcome.data
    extra = {k: v for k, v in data.items() if k not in ("block", "message")}
    return Verdict(block=data["block"], message=data.get("message", ""), details=extra or None)


# ── predicate kinds ──────────────────────────────────────────────────────────────────────────


class _Malformed(Exception):
    """A predicate field is missing or has the wrong type (→ `CheckError`)."""


def _required_str(predicate: Mapping[str, Any], name: str) -> str:
    value = predicate.get(name)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if name not in predicate else json_type_name(value)
        raise _Malformed(f"{name!r} must be a non-empty string ({got})")
    return value


def _required_value(predicate: Mapping[str, Any], name: str) -> Any:
    if name not in predicate:
        raise _Malformed(f"{name!r} is required")
    return predicate[name]


def _command_exit_zero(predicate: Mapping[str, Any], ctx: CheckContext) -> CheckResult:
    command = _required_str(predicate, "command")
    if len(command) > COMMAND_MAX_LENGTH:
        raise _Malformed(f"'command' is longer than {COMMAND_MAX_LENGTH} characters")
    if "\0" in command:  # no shell can receive it (and Popen would raise)
        raise _Malformed("'command' contains a NUL byte")
    timeout_s = COMMAND_DEFAULT_TIMEOUT_S
    if "timeout" in predicate:
        raw = predicate["timeout"]
        if (
            isinstance(raw, bool)
            or not isinstance(raw, (int, float))
            or not math.isfinite(raw)
            or raw <= 0
        ):
            raise _Malformed("'timeout' must be a positive number of seconds")
        if raw > COMMAND_MAX_TIMEOUT_S:  # a third-party predicate cannot buy an unbounded run
            raise _Malformed(f"'timeout' must be at most {COMMAND_MAX_TIMEOUT_S} seconds")
        timeout_s = float(raw)
    # The command is never rewritten: `${PHASE_NUMBER}` etc. are expanded by the shell from the
    # environment, so a value carrying a quote or `;` stays data and cannot become syntax.
    phase_dir = ctx.resolved_phase_dir()
    env = dict(os.environ if ctx.env is None else ctx.env)
    values = (ctx.phase_number, str(phase_dir) if phase_dir else "", ctx.phase_req_ids)
    env.update(zip(INTERPOLATED_VARS, values, strict=True))
    result = run_bounded(command, shell=True, timeout_s=timeout_s, cwd=ctx.project, env=env)
    if result.spawn_error:
        return CheckError(f"could not start the command: {result.spawn_error}", unavailable=True)
    details: dict[str, Any] = {"kind": "command-exit-zero", "exitCode": result.exit_code}
    if result.timed_out:
        details["timedOut"] = True
        return Verdict(True, f"command timed out after {timeout_s:g}s", details)
    if result.exit_code == 0:
        return Verdict(False, "command exited 0", details)
    code = cast(int, result.exit_code)  # it started and was not timed out: it exited
    said = tail((result.stderr or result.stdout).strip(), MESSAGE_TAIL_CHARS)
    head = f"command killed by signal {-code}" if code < 0 else f"command exited {code}"
    return Verdict(True, f"{head}: {escape_untrusted(said)}" if said else head, details)


def _artifact_exists(predicate: Mapping[str, Any], ctx: CheckContext) -> CheckResult:
    artifact = _relative_artifact(predicate)
    phase_dir = ctx.resolved_phase_dir()
    places = [p for p in (phase_dir, ctx.project) if p is not None]
    for base in places:
        found = _find_artifact(base, artifact, allow_prefix=base == phase_dir)
        if found is not None:
            return Verdict(False, f"{artifact} exists ({found})", {"kind": "artifact-exists"})
    where = " or ".join(str(p) for p in places)
    return Verdict(
        True,
        f"artifact {artifact} not found in {where}",
        {"kind": "artifact-exists", "artifactNotFound": True},
    )


def _artifact_frontmatter_equals(predicate: Mapping[str, Any], ctx: CheckContext) -> CheckResult:
    """The reference's semantics exactly (its `check predicate`): the artifact is a bare file
    name looked up in the phase folder (or the project root when no phase folder is passed),
    the frontmatter is read by the reference's line reader (scalars stay text), and the field
    matches when its text equals the text of `equals` (`0` matches `"0"`, not `0.0`)."""
    artifact = _required_str(predicate, "artifact")
    name = _required_str(predicate, "field")
    expected = _required_value(predicate, "equals")
    kind = "artifact-frontmatter-equals"
    base = ctx.resolved_phase_dir() or ctx.project
    path = _find_reference_artifact(base, artifact)
    shown_base = ctx.phase_dir if ctx.phase_dir is not None else ctx.project
    if path is None:
        return Verdict(
            True,
            f"artifact matching {escape_untrusted(artifact)} not found in {shown_base}",
            {"kind": kind, "artifactNotFound": True},
        )
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        return CheckError(f"cannot read {path}: {exc.strerror or exc}", unavailable=True)
    frontmatter = reference_frontmatter(text)
    actual = frontmatter.get(name)  # a literal key, as the reference reads it: no dotted path
    shown_expected = js_string(expected)
    if actual is not None and js_string(actual) == shown_expected:
        return Verdict(
            False,
            f'frontmatter field "{name}" matches expected value ({shown_expected})',
            {"kind": kind, "match": True},
        )
    shown_actual = "undefined" if actual is None else js_string(actual)
    details: dict[str, Any] = {"kind": kind, "match": False, "expected": expected}
    if actual is not None:
        details["actual"] = actual
    return Verdict(
        True,
        f'frontmatter field "{name}" in {escape_untrusted(path.name)} is '
        f"{escape_untrusted(shown_actual)}, expected {shown_expected}",
        details,
    )


def _config_equals(predicate: Mapping[str, Any], ctx: CheckContext) -> CheckResult:
    key = _required_str(predicate, "key")
    expected = _required_value(predicate, "equals")
    actual = lookup(ctx.config, key)
    shown_expected = json.dumps(expected, ensure_ascii=False)
    if actual is MISSING:
        return Verdict(
            True,
            f"config key {key} is not set, expected {shown_expected}",
            {"kind": "config-equals", "match": False, "expected": expected},
        )
    if json_equal(actual, expected):
        return Verdict(
            False,
            f"config key {key} matches expected value ({shown_expected})",
            {"kind": "config-equals", "match": True},
        )
    return Verdict(
        True,
        f"config key {key} is {json.dumps(actual, ensure_ascii=False)}, expected {shown_expected}",
        {"kind": "config-equals", "match": False, "actual": actual, "expected": expected},
    )


# ── the predicate kinds: one record each, read by checks, lint, audit ────────────────────────


@dataclass(frozen=True)
class PredicateKind:
    """Everything looprail knows about one `check.predicate.kind` (like pluggy's HookSpec: the
    one declaration every layer reads). `evaluate` decides it; lint checks `fields` and
    `values`; audit shows `audit` (a template: each `{field}` is filled with that field of the
    predicate, the command of a `shell` kind shown as a command line)."""

    name: str
    fields: tuple[str, ...]  # required, each a non-empty string (a `shell` kind's command first)
    evaluate: Callable[[Mapping[str, Any], CheckContext], CheckResult]
    audit: str
    values: tuple[str, ...] = ()  # required, any JSON value (compared, never run)
    reference: bool = False  # the reference's `check predicate` evaluates it too (same rules)
    shell: bool = False  # runs its command under /bin/sh (a shell surface in the audit)
    pure: bool = False  # its verdict depends on the config alone (lint can foresee it)


PREDICATES: dict[str, PredicateKind] = {
    k.name: k
    for k in (
        PredicateKind(
            "command-exit-zero",
            ("command",),
            _command_exit_zero,
            "/bin/sh -c {command} (exit 0 passes; PHASE_NUMBER, PHASE_DIR, PHASE_REQ_IDS in "
            "its environment; cwd = the project)",
            reference=True,
            shell=True,
        ),
        PredicateKind(
            "artifact-exists",
            ("artifact",),
            _artifact_exists,
            "reads artifact {artifact} in the phase folder (no process)",
        ),
        PredicateKind(
            "artifact-frontmatter-equals",
            ("artifact", "field"),
            _artifact_frontmatter_equals,
            "reads artifact {artifact} field {field} in the phase folder (no process)",
            values=("equals",),
            reference=True,
        ),
        PredicateKind(
            "config-equals",
            ("key",),
            _config_equals,
            "reads config key {key} (no process)",
            values=("equals",),
            pure=True,
        ),
    )
}
PREDICATE_KINDS: tuple[str, ...] = tuple(PREDICATES)
# The kinds the reference's `check predicate` evaluates; they get its semantics exactly and go
# to the host tool when there is one. The other kinds are looprail's own.
REFERENCE_KINDS: tuple[str, ...] = tuple(k.name for k in PREDICATES.values() if k.reference)


# ── helpers (pure) ───────────────────────────────────────────────────────────────────────────


def _relative_artifact(predicate: Mapping[str, Any]) -> str:
    artifact = _required_str(predicate, "artifact")
    if "\x00" in artifact or "\\" in artifact:
        raise _Malformed("'artifact' must be a plain relative path")
    parts = PurePosixPath(artifact).parts
    if artifact.startswith("/") or ".." in parts:
        raise _Malformed(
            f"'artifact' must be relative with no '..' ('{escape_untrusted(artifact)}')"
        )
    return artifact


def _find_artifact(base: Path, artifact: str, *, allow_prefix: bool) -> Path | None:
    """`base/artifact`, else (for a bare file name) the first `NN-…-artifact` in `base`."""
    exact = base / artifact
    try:
        if exact.exists():
            return exact
    except OSError:  # a name too long for the file system, say: it is not there
        return None
    if not allow_prefix or "/" in artifact:
        return None
    try:
        names = sorted(entry.name for entry in base.iterdir())
    except OSError:
        return None
    suffix = "-" + artifact
    for entry in names:
        if entry.endswith(suffix) and _PHASE_PREFIX.fullmatch(entry[: -len(artifact)]):
            return base / entry
    return None


def _find_reference_artifact(base: Path, artifact: str) -> Path | None:
    """Where the reference's predicate looks: `base/artifact`, `base/.planning/artifact`, then
    the first file of `base` (in name order) ending in `-artifact`. Only a bare file name is
    looked up; anything else (`a/b`, `..`, a NUL) is "not found", as there."""
    if artifact in (".", "..") or "/" in artifact or "\\" in artifact or "\0" in artifact:
        return None
    for candidate in (base / artifact, base / PLANNING_DIR / artifact):
        if _is_file(candidate):
            return candidate
    try:
        names = sorted(entry.name for entry in base.iterdir())
    except OSError:
        return None
    for entry in names:
        if entry.endswith("-" + artifact) and _is_file(base / entry):
            return base / entry
    return None


def js_string(value: Any) -> str:
    """`String(value)` in JavaScript, `JSON.stringify` for arrays and objects: the text the
    reference compares a frontmatter field by."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        text = repr(value)
        return text.replace("e+0", "e+").replace("e-0", "e-")
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: `0 == 0.0`, but `true != 1` and `"0" != 0`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return False
