"""Gate check evaluation: a gate's `check` → a delivered `Verdict` or a `CheckError`.

The two results are different types on purpose (the two-step gate contract): a `CheckError`
means the check could not deliver a verdict (malformed check, refused query, a runtime that failed
or "could not look", unparseable output) and the caller routes it by the gate's `onError`; a
`Verdict` was delivered and the caller reads `block` against the gate's `blocking`. An unknown or
malformed check is always an error, never a pass.

Three check shapes, exactly one per check:

- `query`: words matching `COMMAND_GRAMMAR`, checked here before the runtime ever sees them (a
  manifest may be third-party), then handed to `runtime.run_query_check(words, ctx)` as a list.
- `predicate`: evaluated here by kind (`PREDICATE_KINDS`). `command-exit-zero` is the one manifest
  surface that reaches `/bin/sh`; its phase values travel only as environment variables.
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
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from looprail.config import MISSING, lookup
from looprail.errors import LooprailError
from looprail.jsonload import json_type_name
from looprail.runtime.process import escape_untrusted, run_bounded, tail

# `\Z`, not `$`: Python's `$` also matches before a trailing newline, and a newline is exactly
# what must never slip through. The same grammar guards step `ref.command`.
COMMAND_GRAMMAR = re.compile(r"^[a-z][a-z0-9-]*(?: [a-z][a-z0-9-]*)*\Z")
GRAMMAR_TEXT = "^[a-z][a-z0-9-]*( [a-z][a-z0-9-]*)*$"  # as DESIGN.md and the seeds write it

CHECK_SHAPES = ("query", "predicate", "agentVerdict")
PREDICATE_KINDS = (
    "command-exit-zero",
    "artifact-exists",
    "artifact-frontmatter-equals",
    "config-equals",
)
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE: the check "could not look"; JSON on stdout is not a verdict

COMMAND_MAX_LENGTH = 4096
COMMAND_DEFAULT_TIMEOUT_S = 30.0
COMMAND_MAX_TIMEOUT_S = 3600
MESSAGE_TAIL_CHARS = 2000
INTERPOLATED_VARS = ("PHASE_NUMBER", "PHASE_DIR", "PHASE_REQ_IDS")

# A phase-dir artifact may carry the phase prefix: `SECURITY.md` also matches `01-SECURITY.md`,
# `02.1-SECURITY.md`, `01-02-SUMMARY.md`.
_PHASE_PREFIX = re.compile(r"^[0-9][0-9.]*(?:-[0-9][0-9.]*)*-")


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

    def resolved_phase_dir(self) -> Path | None:
        if self.phase_dir is None:
            return None
        return self.phase_dir if self.phase_dir.is_absolute() else self.project / self.phase_dir


class CheckRuntime(Protocol):
    """The two `Runtime` methods a check needs (see `looprail.runtime.base.Runtime`)."""

    def run_query_check(self, words: Sequence[str], ctx: Any) -> Any: ...

    def ask_verdict(self, agent_verdict: Mapping[str, Any], ctx: Any) -> Any: ...


class CheckFailedError(LooprailError):
    """The CLI form of a `CheckError`: exit 69 when the check could not look, else 1."""

    def __init__(self, error: CheckError):
        super().__init__(error.reason)
        self.error = error
        self.exit_code = EXIT_UNAVAILABLE if error.unavailable else 1


# ── entry points ─────────────────────────────────────────────────────────────────────────────


def validate_query(value: object) -> bool:
    """True when `value` is a string of lowercase words that may be used as argv."""
    return isinstance(value, str) and COMMAND_GRAMMAR.match(value) is not None


def evaluate_check(
    check: Mapping[str, Any] | Any,
    ctx: CheckContext,
    runtime: CheckRuntime | None = None,
    *,
    runtime_ctx: Any = None,
) -> CheckResult:
    """Evaluate one gate `check` (a mapping or the manifest's `Check` model).

    `runtime` is needed for `query` and `agentVerdict`; it receives `runtime_ctx` (the caller's
    `DispatchContext`), or one built from `ctx` when that is omitted.
    """
    if hasattr(check, "model_dump"):  # manifest.Check: absent shapes are None there
        check = check.model_dump(exclude_none=True)
    if not isinstance(check, Mapping):
        return CheckError(f"check must be an object, got {json_type_name(check)}")
    present = [k for k in CHECK_SHAPES if k in check]
    if len(present) != 1:
        found = ", ".join(present) if present else "none"
        return CheckError(
            f"check must have exactly one of {', '.join(CHECK_SHAPES)} (found {found})"
        )
    shape = present[0]
    if shape == "predicate":
        return evaluate_predicate(check["predicate"], ctx)
    if runtime is None:
        return CheckError(f"check.{shape} needs a runtime and none was given", unavailable=True)
    if runtime_ctx is None:
        runtime_ctx = _dispatch_context(ctx)
        if isinstance(runtime_ctx, CheckError):
            return runtime_ctx
    if shape == "query":
        return _evaluate_query(check["query"], runtime, runtime_ctx)
    return _evaluate_agent_verdict(check["agentVerdict"], runtime, runtime_ctx)


def evaluate_predicate(predicate: Any, ctx: CheckContext) -> CheckResult:
    """Evaluate a `check.predicate` (an object, or its JSON text) by its `kind`."""
    if isinstance(predicate, str):
        return evaluate_predicate_json(predicate, ctx)
    if not isinstance(predicate, Mapping):
        return CheckError(f"check.predicate must be an object, got {json_type_name(predicate)}")
    kind = predicate.get("kind")
    if not isinstance(kind, str) or not kind:
        return CheckError("check.predicate.kind must be a non-empty string")
    evaluator = _KINDS.get(kind)
    if evaluator is None:
        return CheckError(
            f"check.predicate.kind: unknown kind '{escape_untrusted(kind)}' "
            f"(known: {', '.join(PREDICATE_KINDS)})"
        )
    try:
        return evaluator(predicate, ctx)
    except _Malformed as exc:
        return CheckError(f"check.predicate ({kind}): {exc}")
    except RecursionError:  # comparing or printing a hostile, deeply nested value
        return CheckError(f"check.predicate ({kind}): a value is nested too deeply")


def evaluate_predicate_json(text: str, ctx: CheckContext) -> CheckResult:
    """`evaluate_predicate` for the predicate's JSON text (the CLI's `--predicate` value)."""
    from looprail.jsonload import loads_strict

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
    from pydantic import ValidationError

    from looprail.runtime.base import DispatchContext

    phase_dir = ctx.resolved_phase_dir()
    try:
        return DispatchContext(
            project=ctx.project,
            phase_number=ctx.phase_number,
            phase_dir=phase_dir.absolute() if phase_dir is not None else None,
        )
    except ValidationError as exc:
        reason = exc.errors()[0].get("msg", "invalid")
        return CheckError(f"cannot build the runtime context: {reason}")


def _evaluate_query(query: Any, runtime: CheckRuntime, target: Any) -> CheckResult:
    if not isinstance(query, str):
        return CheckError(f"check.query must be a string, got {json_type_name(query)}; not run")
    if not validate_query(query):
        return CheckError(
            f"check.query fails the grammar {GRAMMAR_TEXT} (lowercase words separated by "
            f"single spaces): '{escape_untrusted(query)}'; not run"
        )
    words = query.split(" ")
    try:
        outcome = runtime.run_query_check(words, target)
    except (LooprailError, OSError) as exc:
        return CheckError(f"check.query {query!r}: runtime failed: {escape_untrusted(str(exc))}")
    return verdict_from_outcome(outcome, f"check.query {query!r}")


def _evaluate_agent_verdict(spec: Any, runtime: CheckRuntime, target: Any) -> CheckResult:
    if hasattr(spec, "model_dump"):
        spec = spec.model_dump(exclude_none=True)
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
    from looprail.runtime.base import verdict_problem

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
    code = result.exit_code
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
    artifact = _relative_artifact(predicate)
    name = _required_str(predicate, "field")
    expected = _required_value(predicate, "equals")
    kind = "artifact-frontmatter-equals"
    base = ctx.resolved_phase_dir() or ctx.project
    path = _find_artifact(base, artifact, allow_prefix=True)
    if path is None or not _is_file(path):
        return Verdict(
            True,
            f"artifact matching {artifact} not found in {base}",
            {"kind": kind, "artifactNotFound": True},
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return Verdict(True, f"{path.name} is not UTF-8 text", {"kind": kind, "match": False})
    except OSError as exc:
        return CheckError(f"cannot read {path}: {exc.strerror or exc}", unavailable=True)
    frontmatter = read_frontmatter(text)
    if isinstance(frontmatter, str):  # fail closed: a broken artifact is not a passing one
        return Verdict(True, f"{path.name}: {frontmatter}", {"kind": kind, "match": False})
    actual = lookup(frontmatter, name)
    shown_expected = json.dumps(expected, ensure_ascii=False)
    if actual is MISSING:
        return Verdict(
            True,
            f'frontmatter field "{name}" is absent in {path.name}, expected {shown_expected}',
            {"kind": kind, "match": False, "expected": expected},
        )
    actual = _jsonable(actual)
    if json_equal(actual, expected):
        return Verdict(
            False,
            f'frontmatter field "{name}" matches expected value ({shown_expected})',
            {"kind": kind, "match": True},
        )
    shown_actual = json.dumps(actual, ensure_ascii=False)
    return Verdict(
        True,
        f'frontmatter field "{name}" in {path.name} is {shown_actual}, expected {shown_expected}',
        {"kind": kind, "match": False, "actual": actual, "expected": expected},
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


_KINDS: dict[str, Callable[[Mapping[str, Any], CheckContext], CheckResult]] = {
    "command-exit-zero": _command_exit_zero,
    "artifact-exists": _artifact_exists,
    "artifact-frontmatter-equals": _artifact_frontmatter_equals,
    "config-equals": _config_equals,
}


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


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def read_frontmatter(text: str) -> dict[str, Any] | str:
    """The YAML frontmatter of a markdown text as a dict (`{}` when there is none), or a reason
    (str) why it cannot be read."""
    import yaml  # lazy: `looprail check` is on hosts' hot path, most checks need no YAML

    from looprail.yamlload import safe_load

    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        return "frontmatter is not closed by '---'"
    try:
        value = safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or ""
        why = f": {problem}" if "alias" in problem else ""
        return f"frontmatter is not valid YAML{where}{why}"
    except RecursionError:
        return "frontmatter is nested too deeply"
    if value is None:
        return {}
    if not isinstance(value, dict):
        return "frontmatter is not a mapping"
    try:
        return _jsonable(value)
    except RecursionError:  # `a: &a [*a]` is a self-containing value: no JSON equivalent
        return "frontmatter is recursive or nested too deeply"


def _jsonable(value: Any) -> Any:
    """YAML values as JSON would see them: dates become ISO strings, keys become strings."""
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


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
