"""The kinds of `check.predicate` (one `PredicateKind` record each, `PREDICATES`), evaluated
here without a runtime, and the result and context types every check shares.
`command-exit-zero` is the one manifest surface that reaches `/bin/sh`: its phase values travel
only as environment variables."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import cast

from looprail.config import MISSING, js_dumps, lookup
from looprail.hooks.manifest_rules import COMMAND_MAX_TIMEOUT_S
from looprail.jsonload import json_type_name, loads_strict
from looprail.layout import PLANNING_DIR
from looprail.plans.frontmatter import reference_frontmatter
from looprail.runtime.base import EXIT_UNAVAILABLE  # "could not look": never a verdict
from looprail.runtime.process import escape_untrusted, run_bounded, tail

COMMAND_MAX_LENGTH = 4096
COMMAND_DEFAULT_TIMEOUT_S = 30.0
MESSAGE_TAIL_CHARS = 2000
INTERPOLATED_VARS = ("PHASE_NUMBER", "PHASE_DIR", "PHASE_REQ_IDS")

# A phase-dir artifact may carry the phase prefix: `SECURITY.md` also matches `01-SECURITY.md`,
# `02.1-SECURITY.md`, `01-02-SUMMARY.md`.
_PHASE_PREFIX = re.compile(r"^[0-9][0-9.]*(?:-[0-9][0-9.]*)*-")


@dataclass(frozen=True)
class Verdict:
    """A delivered verdict. `block` is read against the gate's `blocking`; `message` is shown."""

    block: bool
    message: str = ""
    details: dict[str, object] | None = None

    def to_json(self) -> dict[str, object]:
        """The `{block, message}` envelope hosts parse."""
        return {"block": self.block, "message": self.message}


@dataclass(frozen=True)
class CheckError:
    """The check itself failed; no verdict exists. Routed by the gate's `onError`. `unavailable`
    marks "could not look" (exit 69, a missing runtime or shell), not a malformed check."""

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
    config: dict[str, object] | None = None
    phase_req_ids: str = ""
    env: Mapping[str, str] | None = field(default=None, compare=False)  # None: inherit os.environ
    point: str | None = None  # the extension point; decides what the reference would pass
    cap_id: str | None = None

    def resolved_phase_dir(self) -> Path | None:
        return None if self.phase_dir is None else self.project / self.phase_dir  # kept if absolute


def evaluate_predicate(predicate: object, ctx: CheckContext) -> CheckResult:
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


class _Malformed(Exception):
    """A predicate field is missing or has the wrong type (→ `CheckError`)."""


def _required_str(predicate: Mapping[str, object], name: str) -> str:
    value = predicate.get(name)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if name not in predicate else json_type_name(value)
        raise _Malformed(f"{name!r} must be a non-empty string ({got})")
    return value


def _required_value(predicate: Mapping[str, object], name: str) -> object:
    if name not in predicate:
        raise _Malformed(f"{name!r} is required")
    return predicate[name]


def _command_exit_zero(predicate: Mapping[str, object], ctx: CheckContext) -> CheckResult:
    command = _required_str(predicate, "command")
    if len(command) > COMMAND_MAX_LENGTH:
        raise _Malformed(f"'command' is longer than {COMMAND_MAX_LENGTH} characters")
    if "\0" in command:  # no shell can receive it (and Popen would raise)
        raise _Malformed("'command' contains a NUL byte")
    timeout_s = COMMAND_DEFAULT_TIMEOUT_S
    if "timeout" in predicate:
        raw = predicate["timeout"]
        if not isinstance(raw, (int, float)) or isinstance(raw, bool) or not 0 < raw < math.inf:
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
    details: dict[str, object] = {"kind": "command-exit-zero", "exitCode": result.exit_code}
    if result.timed_out:
        details["timedOut"] = True
        return Verdict(True, f"command timed out after {timeout_s:g}s", details)
    if result.exit_code == 0:
        return Verdict(False, "command exited 0", details)
    code = cast(int, result.exit_code)  # it started and was not timed out: it exited
    said = tail((result.stderr or result.stdout).strip(), MESSAGE_TAIL_CHARS)
    head = f"command killed by signal {-code}" if code < 0 else f"command exited {code}"
    return Verdict(True, f"{head}: {escape_untrusted(said)}" if said else head, details)


def _artifact_exists(predicate: Mapping[str, object], ctx: CheckContext) -> CheckResult:
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


def _artifact_frontmatter_equals(predicate: Mapping[str, object], ctx: CheckContext) -> CheckResult:
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
    details: dict[str, object] = {"kind": kind, "match": False, "expected": expected}
    if actual is not None:
        details["actual"] = actual
    return Verdict(
        True,
        f'frontmatter field "{name}" in {escape_untrusted(path.name)} is '
        f"{escape_untrusted(shown_actual)}, expected {shown_expected}",
        details,
    )


def _config_equals(predicate: Mapping[str, object], ctx: CheckContext) -> CheckResult:
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


@dataclass(frozen=True)
class PredicateKind:
    """Everything looprail knows about one `check.predicate.kind` (like pluggy's HookSpec: the
    one declaration every layer reads). `evaluate` decides it; lint checks `fields` and
    `values`; audit shows `audit` (a template: each `{field}` is filled with that field of the
    predicate, the command of a `shell` kind shown as a command line)."""

    name: str
    fields: tuple[str, ...]  # required, each a non-empty string (a `shell` kind's command first)
    evaluate: Callable[[Mapping[str, object], CheckContext], CheckResult]
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


def _relative_artifact(predicate: Mapping[str, object]) -> str:
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
    return _first_ending(
        base, artifact, lambda name: _PHASE_PREFIX.fullmatch(name[: -len(artifact)]) is not None
    )


def _find_reference_artifact(base: Path, artifact: str) -> Path | None:
    """Where the reference's predicate looks: `base/artifact`, `base/.planning/artifact`, then
    the first file of `base` (in name order) ending in `-artifact`. Only a bare file name is
    looked up; anything else (`a/b`, `..`, a NUL) is "not found", as there."""
    if artifact in (".", "..") or "/" in artifact or "\\" in artifact or "\0" in artifact:
        return None
    for candidate in (base / artifact, base / PLANNING_DIR / artifact):
        if _is_file(candidate):
            return candidate
    return _first_ending(base, artifact, lambda name: _is_file(base / name))


def _first_ending(base: Path, artifact: str, ok: Callable[[str], bool]) -> Path | None:
    """The first entry of `base`, in name order, named `…-artifact` that is `ok`."""
    try:
        names = sorted(entry.name for entry in base.iterdir())
    except OSError:
        return None
    return next((base / n for n in names if n.endswith("-" + artifact) and ok(n)), None)


def js_string(value: object) -> str:
    """`String(value)` in JavaScript, `JSON.stringify` for arrays and objects: the text the
    reference compares a frontmatter field by."""
    return value if isinstance(value, str) else js_dumps(value)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def json_equal(a: object, b: object) -> bool:
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
