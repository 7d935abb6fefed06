"""Capability manifests (`<id>/capability.json`): the pydantic models, the one declaration of
the format, and validation in three layers, each reporting *all* its problems as `Issue`s:
safe JSON (`manifest_io`), shapes and types (`Capability`), and the rules across fields of one
manifest (`manifest_rules`). The registry comes here only for a manifest whose shape the check
derived from these models (`manifest_shape`) cannot prove, so shape errors are pydantic's.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from pydantic import ValidationError as PydanticValidationError

from looprail.errors import Issue
from looprail.hooks.checks import validate_command, validate_query

# Re-exported: the limits and the light parsers live in manifest_io (no pydantic there).
from looprail.hooks.manifest_io import MAX_FRAGMENT_BYTES as MAX_FRAGMENT_BYTES
from looprail.hooks.manifest_io import MAX_MANIFEST_BYTES as MAX_MANIFEST_BYTES
from looprail.hooks.manifest_io import _materialise_fragments, json_path
from looprail.hooks.manifest_io import materialise_fragment as materialise_fragment
from looprail.hooks.manifest_io import parse_manifest_bytes as parse_manifest_bytes
from looprail.hooks.manifest_rules import ID_PATTERN as ID_PATTERN
from looprail.hooks.manifest_rules import ID_WORD, engine_problem, rule_issues
from looprail.hooks.manifest_shape import derive
from looprail.hooks.predicates import COMMAND_MAX_TIMEOUT_S, PREDICATE_KINDS
from looprail.points import POINTS

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


# `check.predicate`: one shape per kind (`predicates.PREDICATE_KINDS`), so a typo in a kind or a
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


def pydantic_issues(exc: PydanticValidationError, file: str) -> list[Issue]:
    issues = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        # A discriminated union puts the tag in the path (`predicate["config-equals"].key`).
        loc = [p for i, p in enumerate(loc) if not (i and loc[i - 1] == "predicate")]
        msg = err["msg"]
        if err["type"] == "union_tag_invalid":
            tag, known = str(err["ctx"]["tag"]), PREDICATE_KINDS
            close = difflib.get_close_matches(tag, known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            loc, msg = [*loc, "kind"], f"unknown kind {tag!r} ({hint}known: {', '.join(known)})"
        elif err["type"] == "union_tag_not_found":
            loc, msg = [*loc, "kind"], f"required: one of {', '.join(PREDICATE_KINDS)}"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "literal_error":
            msg = msg.replace("Input should be", "must be")
        issues.append(Issue(file, json_path(*loc), msg))
    return issues


def validate_manifest(
    raw: bytes, file: str, folder: Path | None
) -> tuple[Capability | None, dict[str, Any] | None, list[Issue]]:
    """All three layers for one file. Returns `(model, materialised JSON dict, issues)`.

    The JSON dict is the manifest as declared with each `fragment.path` materialised into
    `inline` (the path kept, as the reference does); it is what the registry compiles from, so
    the envelope echoes exactly what the author wrote."""
    data, issues = parse_manifest_bytes(raw, file)
    if issues:
        return None, None, issues
    if not isinstance(data, dict):
        return None, None, [Issue(file, "$", "top level must be a JSON object")]
    cap, issues = validate_declared(data, file, folder.name if folder is not None else None)
    if folder is not None and not issues:
        issues += _materialise_fragments(data, folder, file)
    if issues:
        return None, None, issues
    return cap, data, []


def validate_declared(
    data: Mapping[str, Any],
    file: str,
    folder_name: str | None,
    engine: Callable[[Any], str | None] = engine_problem,
) -> tuple[Capability | None, list[Issue]]:
    """Layers 2 and 3 (shapes, cross-field rules, the engine range) of a parsed manifest: a
    function of the JSON and the folder name only, so its verdict can be cached by content
    (`looprail.hooks.verdicts`). Fragment files are not read here. `engine` is
    `engine_problem` or a memo of it (`VerdictCache.engine_problem`). The registry runs
    `VerdictCache.validate`, which gives the same issues, pydantic only if needed."""
    try:
        cap = Capability.model_validate(data)
    except PydanticValidationError as exc:
        return None, pydantic_issues(exc, file)
    issues = rule_issues(data, file, folder_name, engine)
    return (None, issues) if issues else (cap, [])


def grammar_warnings(cap: Capability, file: str) -> list[Issue]:
    """Each `ref.command` and `check.query` that fails its grammar: the rules the dispatcher
    and `lint` apply (`hooks.checks.validate_command`, `validate_query`: a query's words may be
    dotted, `ui.plan-gate`). Not an error: the reference accepts such a manifest; looprail
    refuses the string when it would dispatch it (the step fails by its onError, the gate's
    check errors), so the author should hear now."""
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


def shape_table() -> dict[str, Any]:
    """The table of the pydantic-free shape check (`manifest_shape`), derived from the schema
    pydantic validates `Capability` with."""
    Capability.model_rebuild()  # the models defer their build to first use
    return derive(Capability.__pydantic_core_schema__)


def capability_json_schema() -> dict[str, object]:
    """The JSON Schema of `capability.json`, from the models."""
    schema = Capability.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "looprail capability.json"
    return schema


__all__ = [
    "POINTS",
    "Capability",
    "Check",
    "Contribution",
    "Gate",
    "Step",
    "TaskContentResolver",
    "capability_json_schema",
    "grammar_warnings",
    "materialise_fragment",
    "parse_manifest_bytes",
    "shape_table",
    "validate_declared",
    "validate_manifest",
]
