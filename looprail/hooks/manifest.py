"""Capability manifests (`<id>/capability.json`): pydantic models and validation.

Validation happens in three layers, and every layer reports *all* its problems as `Issue`s
(file, JSON path, reason), never only the first:

1. `parse_manifest_bytes`: safe JSON (size and depth limits, no duplicate keys, no
   `__proto__`/`constructor`/`prototype` keys).
2. `Capability.model_validate`: shapes and types (pydantic, `extra="forbid"` on contract shapes).
3. `check_capability`: rules across fields of one manifest (refs owned by the capability, `when`
   keys declared in its own `config`, `into` roles, role-forbidden bodies, reserved prefixes…).

Rules across the whole set (duplicate owners, `requires`, produces/consumes) live in
`registry.py`, which knows the merge order.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from pydantic import ValidationError as PydanticValidationError

from looprail.errors import Issue
from looprail.hooks.manifest_io import (
    FORBIDDEN_KEYS,
    GSD_ENGINE_VERSION,
    _json_path,
    _materialise_fragments,
)

# Re-exported: the limits and the light parsers live in manifest_io (no pydantic there).
from looprail.hooks.manifest_io import (
    MAX_CAPABILITY_FRAGMENT_BYTES as MAX_CAPABILITY_FRAGMENT_BYTES,
)
from looprail.hooks.manifest_io import MAX_FRAGMENT_BYTES as MAX_FRAGMENT_BYTES
from looprail.hooks.manifest_io import MAX_JSON_DEPTH as MAX_JSON_DEPTH
from looprail.hooks.manifest_io import MAX_MANIFEST_BYTES as MAX_MANIFEST_BYTES
from looprail.hooks.manifest_io import RESERVED_PREFIXES as RESERVED_PREFIXES
from looprail.hooks.manifest_io import json_path as json_path
from looprail.hooks.manifest_io import materialise_fragment as materialise_fragment
from looprail.hooks.manifest_io import parse_manifest_bytes as parse_manifest_bytes
from looprail.points import POINT_ROLES, POINTS, Point

ID_PATTERN = re.compile(r"^[a-z][a-z0-9-]*\Z")
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$"
)
SCRIPT_PATTERN = re.compile(r"^[A-Za-z0-9._/-]+\Z")


def engine_problem(engines: Any) -> str | None:
    """Why `engines` (a manifest's `engines` object) rules this engine out, or None.

    Ranges are npm's (`>=1.6.0`, `^1.2`, `~1.2`, `>=1.2.0 <2`, `1.x || >=2.1`), checked by
    node-semver, a port of npm's own implementation. A range it cannot parse matches no
    version, so such a capability is not loaded either (the reference fails closed too)."""
    rng = engines.get("gsd") if isinstance(engines, dict) else None
    if not isinstance(rng, str) or not rng.strip():
        return None
    import nodesemver

    try:
        ok = nodesemver.satisfies(GSD_ENGINE_VERSION, rng, loose=False)
    except (ValueError, TypeError):
        ok = False
    if ok:
        return None
    return f'incompatible with GSD {GSD_ENGINE_VERSION} (requires engines.gsd "{rng}")'


Role = Literal["feature", "runtime", "reviewer"]
OnError = Literal["skip", "halt", "fail"]  # `fail` is the older spelling of `halt`
NonEmpty = Annotated[StrictStr, Field(min_length=1)]


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


# `check.predicate`: one shape per `kind` (looprail.hooks.checks.PREDICATE_KINDS), so a typo in a
# kind or a field is a validation error naming it, and editors complete both from the schema.
# (The reference validates only that `kind` is a string and fails at evaluation; a deliberate
# difference, docs/checks.md.) Values are checked again where they are evaluated.


class CommandExitZero(_Contract):
    """Blocks unless `/bin/sh -c command` exits 0 (timeout in seconds, default 30)."""

    kind: Literal["command-exit-zero"]
    command: NonEmpty
    timeout: Annotated[float, Field(gt=0, le=3600, strict=True)] | None = None


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
    trackerPrefix: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9-]*$")]
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

    id: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9-]*$")]
    role: Role
    version: Annotated[StrictStr, Field(pattern=SEMVER.pattern)]
    title: NonEmpty
    description: NonEmpty
    tier: Literal["core", "standard", "full"]
    requires: list[Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9-]*$")]]
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
    # feature body
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


FEATURE_ONLY = (
    "skills",
    "agents",
    "steps",
    "contributions",
    "gates",
    "hooks",
    "activationKey",
    "taskContentResolver",
)


def pydantic_issues(exc: PydanticValidationError, file: str) -> list[Issue]:
    from looprail.hooks.checks import PREDICATE_KINDS  # checks is heavy: only for such errors

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
        issues.append(Issue(file, _json_path(loc), msg))
    return issues


# --------------------------------------------------------------------------- per-manifest rules


def check_capability(cap: Capability, file: str, folder_name: str | None) -> list[Issue]:
    """Rules that span fields of one manifest (the reference's validator, manifest-local part)."""
    issues: list[Issue] = []

    def add(path: str, reason: str) -> None:
        issues.append(Issue(file, path, reason))

    if folder_name is not None and cap.id != folder_name:
        add("$.id", f"id {cap.id!r} does not match its folder name {folder_name!r}")
    if cap.id in cap.requires:
        add("$.requires", "a capability cannot require itself")

    if cap.role == "feature":
        if cap.runtimeCompat is None:
            add("$.runtimeCompat", "required for role 'feature'")
        if cap.reviewer is not None:
            add("$.reviewer", "a reviewer body is only allowed on runtime and reviewer roles")
        if cap.runtime is not None:
            add("$.runtime", "a runtime body is only allowed on role 'runtime'")
    else:
        for name in FEATURE_ONLY:
            if name in cap.model_fields_set:
                add(f"$.{name}", f"not allowed on role {cap.role!r}")
        if cap.role == "reviewer":
            if cap.reviewer is None:
                add("$.reviewer", "required for role 'reviewer'")
            if cap.runtime is not None:
                add("$.runtime", "not allowed on role 'reviewer'")
    if cap.runtimeCompat is not None:
        sup = cap.runtimeCompat.supported
        if "*" in sup and len(sup) > 1:
            add("$.runtimeCompat.supported", 'either exactly ["*"] or a list of ids, not both')
        for i, rid in enumerate(sup):
            if rid != "*" and not ID_PATTERN.match(rid):
                add(f"$.runtimeCompat.supported[{i}]", f"{rid!r} is not a kebab-case id")
        for i, rid in enumerate(cap.runtimeCompat.unsupported):
            if not ID_PATTERN.match(rid):
                add(f"$.runtimeCompat.unsupported[{i}]", f"{rid!r} is not a kebab-case id")

    config = cap.config or {}
    for key, spec in config.items():
        path = f"$.config[{json.dumps(key)}]"
        if any(seg in FORBIDDEN_KEYS for seg in key.split(".")):
            add(path, "forbidden key segment")
        setting = _central_setting(key)
        if setting is not None:
            add(path, f"{key!r} collides with the central setting {setting!r} (#2797)")
        issues += [Issue(file, path + p, r) for p, r in _check_config_default(spec)]
    if cap.activationKey is not None and cap.activationKey not in config:
        add("$.activationKey", f"{cap.activationKey!r} is not declared in this capability's config")

    skills = set(cap.skills or ())
    agents = set(cap.agents or ())

    def check_when(when: Any, path: str) -> None:
        if when is None:
            return
        if not isinstance(when, str) or not when:
            add(path, "must be a non-empty string (a dotted config key)")
        elif when not in config:
            add(path, f"{when!r} is not declared in this capability's config")

    for i, step in enumerate(cap.steps or ()):
        base = f"$.steps[{i}]"
        ref = step.ref
        set_keys = [k for k in ("skill", "agent", "command") if getattr(ref, k) is not None]
        if len(set_keys) != 1:
            add(f"{base}.ref", "must have exactly one of skill, agent, command")
        if ref.skill is not None:
            if ref.skill.startswith("gsd-"):
                add(f"{base}.ref.skill", "must not start with 'gsd-' (the dispatcher adds it)")
            if ref.skill not in skills:
                add(f"{base}.ref.skill", f"{ref.skill!r} is not in this capability's skills")
        if ref.agent is not None and ref.agent not in agents:
            add(f"{base}.ref.agent", f"{ref.agent!r} is not in this capability's agents")
        check_when(step.when, f"{base}.when")
        if step.pointFrom is not None and step.pointFrom not in config:
            add(
                f"{base}.pointFrom",
                f"{step.pointFrom!r} is not declared in this capability's config",
            )
        issues += _check_fragment(step.fragment, f"{base}.fragment", file)
    for i, con in enumerate(cap.contributions or ()):
        base = f"$.contributions[{i}]"
        roles = POINT_ROLES[con.point]
        if con.into not in roles:
            add(f"{base}.into", f"{con.into!r} is not a role of {con.point} ({', '.join(roles)})")
        check_when(con.when, f"{base}.when")
        issues += _check_fragment(con.fragment, f"{base}.fragment", file)
    for i, gate in enumerate(cap.gates or ()):
        base = f"$.gates[{i}]"
        chk = gate.check
        kinds = [k for k in ("query", "predicate", "agentVerdict") if getattr(chk, k) is not None]
        if len(kinds) != 1:
            add(f"{base}.check", "must have exactly one of query, predicate, agentVerdict")
        if chk.agentVerdict is not None and gate.blocking:
            add(f"{base}.blocking", "an agentVerdict gate is advisory: blocking must be false")
        check_when(gate.when, f"{base}.when")
    for i, hook in enumerate(cap.hooks or ()):
        base = f"$.hooks[{i}]"
        s = hook.script
        if not SCRIPT_PATTERN.match(s) or s.startswith("-") or s.startswith("/") or ".." in s:
            add(
                f"{base}.script",
                "must be a relative path of [A-Za-z0-9._/-], no '..', no leading '-'",
            )
        if hook.matcher is not None and any(ord(c) < 0x20 or ord(c) == 0x7F for c in hook.matcher):
            add(f"{base}.matcher", "must not contain control characters")
    for i, family in enumerate(cap.commands or ()):
        module = family.module
        if (
            "/" in module
            or "\\" in module
            or module in (".", "..")
            or module.startswith("-")
            or "\0" in module
        ):
            add(f"$.commands[{i}].module", "must be a bare file name (no folders, no leading '-')")
    tcr = cap.taskContentResolver
    if "taskContentResolver" in cap.model_fields_set and tcr is None:
        add("$.taskContentResolver", "null is not allowed; leave the key out to declare none")
    if tcr is not None and "{{id}}" not in tcr.invoke.args:
        add("$.taskContentResolver.invoke.args", 'needs at least one element exactly "{{id}}"')
    if tcr is not None and "\0" in tcr.invoke.binary:
        add("$.taskContentResolver.invoke.binary", "must not contain a NUL byte")
    for i, arg in enumerate(tcr.invoke.args if tcr is not None else ()):
        if "\0" in arg:
            add(f"$.taskContentResolver.invoke.args[{i}]", "must not contain a NUL byte")
    return issues


def _central_setting(key: str) -> str | None:
    """The host setting a federated key would shadow or live inside, if any: a capability may
    not redefine the central config schema, exactly or under one of its namespaces."""
    from looprail.config import KNOWN_SETTINGS

    for setting in sorted(KNOWN_SETTINGS):
        if key == setting or key.startswith(setting + ".") or setting.startswith(key + "."):
            return setting
    return None


def _check_config_default(spec: ConfigKey) -> list[tuple[str, str]]:
    d = spec.default
    if spec.type == "enum":
        if not spec.values:
            return [(".values", "an enum key needs a non-empty values list")]
        if d is not None and d not in spec.values:
            return [(".default", f"{d!r} is not one of its values")]
        return []
    if spec.values is not None:
        return [(".values", "only enum keys take values")]
    kinds: dict[str, type | tuple[type, ...]] = {
        "boolean": bool,
        "string": str,
        "number": (int, float),
    }
    expected = kinds[spec.type]
    if d is not None and (not isinstance(d, expected) or (spec.type == "number" and d is True)):
        return [(".default", f"must be a {spec.type}")]
    if spec.type == "number" and isinstance(d, bool):
        return [(".default", "must be a number")]
    return []


def _check_fragment(fragment: Fragment | None, path: str, file: str) -> list[Issue]:
    if fragment is None:
        return []
    if fragment.inline is None and fragment.path is None:
        return [Issue(file, path, "must have inline or path")]
    if fragment.inline is not None and fragment.path is not None:
        return [Issue(file, path, "must have inline or path, not both")]
    p = fragment.path
    if p is not None and (p.startswith("/") or "\\" in p or ".." in Path(p).parts or "\0" in p):
        return [Issue(file, f"{path}.path", "must be a relative path without '..'")]
    return []


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
    data: dict[str, Any],
    file: str,
    folder_name: str | None,
    engine: Callable[[Any], str | None] = engine_problem,
) -> tuple[Capability | None, list[Issue]]:
    """Layers 2 and 3 (shapes, cross-field rules, the engine range) of a parsed manifest: a
    function of the JSON and the folder name only, so its verdict can be cached by content
    (`looprail.hooks.verdicts`). Fragment files are not read here. `engine` is
    `engine_problem` or a memo of it (`VerdictCache.engine_problem`)."""
    try:
        cap = Capability.model_validate(data)
    except PydanticValidationError as exc:
        return None, pydantic_issues(exc, file)
    issues = check_capability(cap, file, folder_name)
    if not issues:
        problem = engine(data.get("engines"))
        if problem is not None:
            return None, [Issue(file, "$.engines.gsd", problem)]
    return (None, issues) if issues else (cap, [])


def grammar_warnings(cap: Capability, file: str) -> list[Issue]:
    """Each `ref.command` and `check.query` that fails the command grammar. Not an error: the
    reference accepts such a manifest; looprail refuses the string when it would dispatch it
    (the step fails by its onError, the gate's check errors), so the author should hear now."""
    from looprail.hooks.checks import COMMAND_GRAMMAR

    found = []
    what = "looprail refuses it at dispatch"
    for i, step in enumerate(cap.steps or ()):
        command = step.ref.command
        if command is not None and not COMMAND_GRAMMAR.match(command):
            found.append(
                Issue(file, f"$.steps[{i}].ref.command", f"{command!r} fails the grammar; {what}")
            )
    for i, gate in enumerate(cap.gates or ()):
        query = gate.check.query
        if query is not None and not COMMAND_GRAMMAR.match(query):
            found.append(
                Issue(file, f"$.gates[{i}].check.query", f"{query!r} fails the grammar; {what}")
            )
    return found


def capability_json_schema() -> dict[str, Any]:
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
    "check_capability",
    "grammar_warnings",
    "materialise_fragment",
    "parse_manifest_bytes",
    "validate_declared",
    "validate_manifest",
]
