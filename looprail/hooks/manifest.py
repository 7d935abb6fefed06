"""Capability manifests (`<id>/capability.json`): the pydantic models (the one declaration of
the format) and validation in three layers, each reporting *all* its problems: safe JSON
(`parse_manifest_bytes`), shapes (`Capability`), rules across fields (`manifest_rules`)."""

from __future__ import annotations

import difflib
import errno
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import ErrorDetails

from looprail.config import FORBIDDEN_SEGMENTS
from looprail.errors import Issue, json_path
from looprail.fsutil import read_bounded
from looprail.hooks.manifest_rules import (
    COMMAND_MAX_TIMEOUT_S,
    ID_WORD,
    rule_issues,
    validate_command,
    validate_query,
)
from looprail.hooks.manifest_rules import ID_PATTERN as ID_PATTERN
from looprail.jsonload import loads_file
from looprail.points import POINTS

# Id prefixes only a first-party set may use (an overlay claiming one is rejected).
RESERVED_PREFIXES = ("gsd-", "gsd-core-", "anthropic-", "looprail-")


MAX_MANIFEST_BYTES = 8 * 1024 * 1024
MAX_FRAGMENT_BYTES = 8 * 1024 * 1024
# All fragment text one capability materialises, each reference counted (the text is rendered,
# compiled and cached once per reference): one 8 MiB file named 50 times must not become 400 MiB.
MAX_CAPABILITY_FRAGMENT_BYTES = 16 * 1024 * 1024
_OVER_BUDGET = (
    f"fragments of this capability total more than {MAX_CAPABILITY_FRAGMENT_BYTES} bytes "
    "(each reference counts: its text is rendered once per reference)"
)
MAX_JSON_DEPTH = 64


def parse_manifest_bytes(raw: bytes, file: str) -> tuple[Any, list[Issue]]:
    """Parse JSON that may be hostile. Returns `(value, issues)`; value is None when unusable."""
    value, problems = loads_file(raw, MAX_MANIFEST_BYTES, MAX_JSON_DEPTH)
    issues = [Issue(file, "$", why) for why in problems] + _walk_forbidden(value, (), file)
    return (None, issues) if issues else (value, [])


def _walk_forbidden(value: Any, path: tuple[Any, ...], file: str, depth: int = 0) -> list[Issue]:
    if depth > MAX_JSON_DEPTH:
        return [Issue(file, json_path(path), f"nested deeper than {MAX_JSON_DEPTH} levels")]
    issues: list[Issue] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in FORBIDDEN_SEGMENTS:
                issues.append(Issue(file, json_path((*path, k)), "forbidden key"))
            else:
                issues += _walk_forbidden(v, (*path, k), file, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            issues += _walk_forbidden(v, (*path, i), file, depth + 1)
    return issues


def materialise_fragment(folder: Path, rel: str) -> tuple[str | None, str | None]:
    """Read `fragment.path` into `(text, error_reason)`: it must stay inside the capability
    folder (symlinks resolved), be a regular file and be at most 8 MiB of UTF-8."""
    base = folder.resolve()
    target = (folder / rel).resolve()
    if not target.is_relative_to(base):
        return None, "points outside the capability folder"
    try:
        data = read_bounded(target, MAX_FRAGMENT_BYTES)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            return None, f"{rel!r} is larger than {MAX_FRAGMENT_BYTES} bytes"
        if exc.errno == errno.EINVAL:
            return None, f"{rel!r} is not a regular file"
        return None, f"cannot read {rel!r}: {exc.strerror}"
    if data is None:
        return None, f"file {rel!r} does not exist"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, f"{rel!r} is not UTF-8"


def _materialise_fragments(data: dict[str, Any], folder: Path, file: str) -> list[Issue]:
    """Replace each `fragment.path` by its text (in `inline`, the path kept). A file named by
    several entries is read once and shared; the total over all references is bounded by
    `MAX_CAPABILITY_FRAGMENT_BYTES`, checked before each read."""
    read: dict[str, tuple[str | None, str | None, int]] = {}  # real path → (text, error, bytes)
    issues: list[Issue] = []
    total = 0
    for group in ("steps", "contributions"):
        for i, entry in enumerate(data.get(group) or ()):
            frag = entry.get("fragment")
            rel = frag.get("path") if isinstance(frag, dict) else None
            if not isinstance(rel, str) or "inline" in frag:
                continue
            where = f"$.{group}[{i}].fragment.path"
            key = os.path.realpath(folder / rel)
            if key not in read:
                try:
                    size = os.stat(key).st_size
                except OSError:
                    size = 0
                if total + min(size, MAX_FRAGMENT_BYTES + 1) > MAX_CAPABILITY_FRAGMENT_BYTES:
                    return [Issue(file, where, _OVER_BUDGET)]
                text, err = materialise_fragment(folder, rel)
                read[key] = (text, err, len(text.encode("utf-8")) if text is not None else 0)
            text, err, size = read[key]
            if err:
                issues.append(Issue(file, where, err))
                continue
            total += size
            if total > MAX_CAPABILITY_FRAGMENT_BYTES:
                return [Issue(file, where, _OVER_BUDGET)]
            entry["fragment"] = {"inline": text, "path": rel}
    return issues


SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$"
)


Point = Literal[POINTS]  # type: ignore[valid-type]  # the one vocabulary, as a Literal
Role = Literal["feature", "runtime", "reviewer"]
OnError = Literal["skip", "halt", "fail"]  # `fail` is the older spelling of `halt`
NonEmpty = Annotated[StrictStr, Field(min_length=1)]
KEBAB = f"^{ID_WORD}$"


class _Contract(BaseModel):
    """A shape that is part of the contract: unknown fields are errors."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class _Open(BaseModel):
    """A shape the reference lets grow (runtime metadata): unknown fields are kept."""

    model_config = ConfigDict(defer_build=True, extra="allow", frozen=True)


class Fragment(_Contract):
    inline: NonEmpty | None = None
    path: NonEmpty | None = None


class StepRef(_Contract):
    skill: NonEmpty | None = None
    agent: NonEmpty | None = None
    command: NonEmpty | None = None


class Step(_Contract):
    point: Point
    ref: StepRef
    produces: list[NonEmpty]
    consumes: list[NonEmpty]
    onError: OnError
    when: Any = None  # a non-string `when` is reported by check_capability with its path
    fragment: Fragment | None = None
    supportsReviewerLanes: StrictBool | None = None
    pointFrom: NonEmpty | None = None


class Contribution(_Contract):
    point: Point
    into: NonEmpty
    fragment: Fragment
    produces: list[NonEmpty]
    consumes: list[NonEmpty]
    when: Any = None
    onError: OnError | None = None
    configValues: dict[NonEmpty, NonEmpty] | None = None


class AgentVerdict(_Contract):
    ref: NonEmpty
    prompt: NonEmpty


# `check.predicate`: one shape per kind (`PREDICATE_KINDS`), so a typo in a kind or a
# field is a validation error naming it. (The reference validates only that `kind` is a string
# and fails at evaluation; a deliberate difference, docs/checks.md.)


class CommandExitZero(_Contract):
    """Blocks unless `/bin/sh -c command` exits 0 (timeout in seconds, default 30)."""

    kind: Literal["command-exit-zero"]
    command: NonEmpty
    timeout: Annotated[float, Field(gt=0, le=COMMAND_MAX_TIMEOUT_S, strict=True)] | None = None


class ArtifactExists(_Contract):
    """Blocks unless the artifact exists in the phase folder or the project."""

    kind: Literal["artifact-exists"]
    artifact: NonEmpty


class ArtifactFrontmatterEquals(_Contract):
    """Blocks unless the artifact's frontmatter `field` equals `equals`."""

    kind: Literal["artifact-frontmatter-equals"]
    artifact: NonEmpty
    field: NonEmpty
    equals: Any = Field(...)


class ConfigEquals(_Contract):
    """Blocks unless config key `key` (dotted) equals `equals`."""

    kind: Literal["config-equals"]
    key: NonEmpty
    equals: Any = Field(...)


Predicate = Annotated[
    CommandExitZero | ArtifactExists | ArtifactFrontmatterEquals | ConfigEquals,
    Field(discriminator="kind"),
]
# The kinds a manifest may name, read off the union; `gates.predicates.PREDICATES` evaluates
# each (tests/hooks/test_predicate_kinds.py holds the two to one list).
PREDICATE_KINDS: tuple[str, ...] = tuple(
    get_args(model.model_fields["kind"].annotation)[0] for model in get_args(get_args(Predicate)[0])
)


class Check(_Contract):
    query: NonEmpty | None = None
    predicate: Predicate | None = None
    agentVerdict: AgentVerdict | None = None


class Gate(_Contract):
    point: Point
    check: Check
    blocking: StrictBool
    onError: OnError
    when: Any = None


class ConfigKey(_Contract):
    type: Literal["boolean", "string", "number", "enum"]
    default: Any = None
    description: StrictStr | None = None
    values: list[Any] | None = None


class HostHook(_Contract):
    """A host lifecycle hook (settings.json style). Not a loop hook; listed by `audit`."""

    event: NonEmpty
    script: NonEmpty
    matcher: NonEmpty | None = None


class CommandFamily(_Contract):
    family: NonEmpty
    module: NonEmpty
    router: NonEmpty
    subcommands: list[NonEmpty] | None = None


class Invoke(_Contract):
    binary: NonEmpty
    args: list[StrictStr]
    timeoutMs: Annotated[StrictInt, Field(gt=0, le=120_000)]


class TaskContentResolver(_Contract):
    trackerPrefix: Annotated[StrictStr, Field(pattern=KEBAB)]
    invoke: Invoke


class RuntimeCompat(_Contract):
    supported: list[NonEmpty] = Field(min_length=1)
    unsupported: list[NonEmpty]
    notes: dict[str, StrictStr] | None = None


class ReviewerProbe(_Open):
    kind: Literal["command-exists", "command-capability", "http-reachable"]


class Reviewer(_Open):
    """A reviewer lane (reference §5). Unknown fields are only warnings there, so kept here."""

    slug: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_-]*$")]
    flags: list[NonEmpty]
    transport: Literal["spawn", "openai-http"]
    probe: ReviewerProbe
    invoke: dict[str, Any]
    timeoutFloorMs: Annotated[StrictInt, Field(ge=0)] | None = None
    timeoutConfigKey: NonEmpty | None = None
    emptyOutput: NonEmpty | None = None
    reviewsSection: NonEmpty
    evidenceClass: Literal["source-grounded", "diff-only"]
    requiresBinaries: list[NonEmpty] = []
    promptBudgetKey: NonEmpty | None = None
    modelConfigKey: NonEmpty | None = None
    handler: NonEmpty | None = None


class Provenance(_Contract):
    sourceRepo: NonEmpty
    commit: NonEmpty


class Capability(_Contract):
    """One `capability.json`: the envelope every role has, then the role's body."""

    id: Annotated[StrictStr, Field(pattern=KEBAB)]
    role: Role
    version: Annotated[StrictStr, Field(pattern=SEMVER.pattern)]
    title: NonEmpty
    description: NonEmpty
    tier: Literal["core", "standard", "full"]
    requires: list[Annotated[StrictStr, Field(pattern=KEBAB)]]
    engines: dict[str, StrictStr] | None = None
    runtimeCompat: RuntimeCompat | None = None
    # optional metadata
    compatVersions: Any = None
    integrity: Annotated[StrictStr, Field(pattern=r"^sha512-")] | None = None
    provenance: Provenance | None = None
    author: Any = None
    homepage: StrictStr | None = None
    repository: Any = None
    license: StrictStr | None = None
    keywords: list[StrictStr] | None = None
    # feature body (those only a feature may declare: `manifest_rules.FEATURE_ONLY`)
    skills: list[NonEmpty] | None = None
    agents: list[NonEmpty] | None = None
    hooks: list[HostHook] | None = None
    config: dict[NonEmpty, ConfigKey] | None = None
    activationKey: NonEmpty | None = None
    commands: list[CommandFamily] | None = None
    steps: list[Step] | None = None
    contributions: list[Contribution] | None = None
    gates: list[Gate] | None = None
    taskContentResolver: TaskContentResolver | None = None
    # runtime / reviewer bodies
    runtime: dict[str, Any] | None = None
    reviewer: Reviewer | None = None


Loc = tuple[str | int, ...]
# A format's own place and words for one pydantic error (None: `plain_reason`).
Words = Callable[[Loc, ErrorDetails], tuple[Loc, str | None]]


def pydantic_issues(
    exc: PydanticValidationError, file: str, words: Words | None = None
) -> list[Issue]:
    """One `Issue` per pydantic error, where a person reads it: the one place pydantic's errors
    become looprail's words. `words` places and words the errors of a format (the manifest's
    by default; hooks.json's: `native.document.hooks_words`)."""
    issues = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        loc, reason = (words or _manifest_words)(loc, err)
        issues.append(Issue(file, json_path(loc), reason or plain_reason(err)))
    return issues


def _manifest_words(loc: Loc, err: ErrorDetails) -> tuple[Loc, str | None]:
    # A discriminated union puts the tag in the path (`predicate["config-equals"].key`).
    loc = tuple(p for i, p in enumerate(loc) if not (i and loc[i - 1] == "predicate"))
    if err["type"] == "union_tag_invalid":
        tag, known = str(err["ctx"]["tag"]), PREDICATE_KINDS
        close = difflib.get_close_matches(tag, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        return (*loc, "kind"), f"unknown kind {tag!r} ({hint}known: {', '.join(known)})"
    if err["type"] == "union_tag_not_found":
        return (*loc, "kind"), f"required: one of {', '.join(PREDICATE_KINDS)}"
    return loc, None


def plain_reason(err: ErrorDetails) -> str:
    """pydantic's reason, in looprail's words where they differ."""
    if err["type"] == "extra_forbidden":
        return "unknown field"
    if err["type"] == "missing":
        return "required field is missing"
    if err["type"] == "literal_error":
        return err["msg"].replace("Input should be", "must be")
    return err["msg"]


def validate_manifest(
    raw: bytes, file: str, folder: Path | None
) -> tuple[Capability | None, dict[str, Any] | None, list[Issue]]:
    """All three layers for one file: `(model, JSON dict, issues)`. The dict is the manifest as
    declared, each `fragment.path` materialised into `inline` (the path kept, as the reference
    does): the registry compiles from it, so the envelope echoes what the author wrote."""
    data, issues = parse_manifest_bytes(raw, file)
    if issues:
        return None, None, issues
    if not isinstance(data, dict):
        return None, None, [Issue(file, "$", "top level must be a JSON object")]
    try:
        cap = Capability.model_validate(data)
    except PydanticValidationError as exc:
        return None, None, pydantic_issues(exc, file)
    issues = rule_issues(data, file, folder.name if folder is not None else None)
    if folder is not None and not issues:
        issues = _materialise_fragments(data, folder, file)
    return (None, None, issues) if issues else (cap, data, [])


def grammar_warnings(cap: Capability, file: str) -> list[Issue]:
    """Each `ref.command` and `check.query` that fails its grammar (`manifest_rules`'
    `validate_command`, `validate_query`). Not an error: the reference accepts such a manifest,
    but looprail refuses the string at dispatch, so the author should hear now."""
    declared = [
        (f"$.steps[{i}].ref.command", s.ref.command, validate_command)
        for i, s in enumerate(cap.steps or ())
    ]
    declared += [
        (f"$.gates[{i}].check.query", g.check.query, validate_query)
        for i, g in enumerate(cap.gates or ())
    ]
    return [
        Issue(file, path, f"{text!r} fails the grammar; looprail refuses it at dispatch")
        for path, text, valid in declared
        if text is not None and not valid(text)
    ]


def capability_json_schema() -> dict[str, object]:
    schema = Capability.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "looprail capability.json"
    return schema
