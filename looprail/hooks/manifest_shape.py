"""A pydantic-free proof that a parsed manifest has the shape `manifest.Capability` accepts.

`render-hooks` validates a manifest whose bytes changed since its verdict was cached. Importing
pydantic and building the `Capability` model costs more than the rest of that call together, yet
almost every changed manifest is valid. `shape_ok(data)` walks the JSON against a table that
mirrors the models field by field (required or not, strict types, lengths, patterns, literals,
unknown fields forbidden or kept). True means `Capability.model_validate(data)` succeeds; False
means "not proven": the caller validates with pydantic, so every problem is still reported in
pydantic's words. The answer is conservative where the two could differ (non-ASCII text in a
pattern field, a lone surrogate, a number a float cannot hold): False, never a wrong True.

`MODELS` is the table, keyed by the pydantic class names: a test checks that its fields,
required flags and extra-field behaviour are those of the models, and a property test that
`shape_ok` and pydantic accept the same manifests (the 44 real ones mutated, generated ones).
Only `re` here: this is on the `render-hooks` start path.
"""

from __future__ import annotations

import re

from looprail.points import POINTS

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing is not imported at run time on this path
    from collections.abc import Callable
    from typing import Any

    Check = Callable[[Any], bool]


def _text(x: Any) -> bool:
    """A str pydantic-core can read (a lone surrogate from a JSON escape is refused there)."""
    if type(x) is not str:
        return False
    if x.isascii():
        return True
    try:
        x.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _any(x: Any) -> bool:
    return True


def _non_empty(x: Any) -> bool:
    return _text(x) and len(x) >= 1


def _strict_bool(x: Any) -> bool:
    return type(x) is bool


def _pattern(body: str) -> Check:
    # pydantic-core matches with the Rust regex engine, where `$` is the end of the text only;
    # `fullmatch` on ASCII text is that (non-ASCII: not proven, pydantic decides).
    rx = re.compile(body, re.ASCII)
    return lambda x: _text(x) and x.isascii() and rx.fullmatch(x) is not None


def _prefix(prefix: str) -> Check:
    return lambda x: _text(x) and x.startswith(prefix)


def _literal(*values: str) -> Check:
    allowed = frozenset(values)
    return lambda x: type(x) is str and x in allowed


def _optional(check: Check) -> Check:
    return lambda x: x is None or check(x)


def _list(item: Check, min_length: int = 0) -> Check:
    return lambda x: type(x) is list and len(x) >= min_length and all(item(i) for i in x)


def _dict(key: Check, value: Check) -> Check:
    return lambda x: type(x) is dict and all(key(k) and value(v) for k, v in x.items())


def _strict_int(*, gt: int | None = None, ge: int | None = None, le: int | None = None) -> Check:
    def check(x: Any) -> bool:
        return (
            type(x) is int
            and (gt is None or x > gt)
            and (ge is None or x >= ge)
            and (le is None or x <= le)
        )

    return check


def _strict_float(*, gt: float, le: float) -> Check:
    # Strict float takes an int too (never a bool). Beyond 2**53 an int is not one float: not
    # proven. JSON's 1e999 parses to inf: not proven either.
    def check(x: Any) -> bool:
        if type(x) is int:
            return -(2**53) <= x <= 2**53 and gt < x <= le
        return type(x) is float and x == x and abs(x) != float("inf") and gt < x <= le

    return check


# name -> (fields: name -> (required, check), unknown fields allowed)
MODELS: dict[str, tuple[dict[str, tuple[bool, Check]], bool]] = {}


def _model(name: str, fields: dict[str, tuple[bool, Check]], *, extra: bool = False) -> Check:
    MODELS[name] = (fields, extra)
    required = [f for f, (req, _) in fields.items() if req]

    def check(x: Any) -> bool:
        if type(x) is not dict:
            return False
        for f in required:
            if f not in x:
                return False
        for k, v in x.items():
            spec = fields.get(k)
            if spec is None:
                if not (extra and _text(k)):
                    return False
            elif not spec[1](v):
                return False
        return True

    return check


def _tagged(tag: str, variants: dict[str, Check]) -> Check:
    """A discriminated union: `x[tag]` names the variant, which must then validate."""

    def check(x: Any) -> bool:
        if type(x) is not dict:
            return False
        name = x.get(tag)
        variant = variants.get(name) if type(name) is str else None
        return variant is not None and variant(x)

    return check


REQ, OPT = True, False
_NE = _non_empty
_NE_OPT = _optional(_non_empty)
_ID = _pattern(r"[a-z][a-z0-9-]*")
_POINT = _literal(*POINTS)
_ON_ERROR = _literal("skip", "halt", "fail")
_STRS = _list(_NE)

_FRAGMENT = _model("Fragment", {"inline": (OPT, _NE_OPT), "path": (OPT, _NE_OPT)})
_STEP_REF = _model(
    "StepRef", {"skill": (OPT, _NE_OPT), "agent": (OPT, _NE_OPT), "command": (OPT, _NE_OPT)}
)
_STEP = _model(
    "Step",
    {
        "point": (REQ, _POINT),
        "ref": (REQ, _STEP_REF),
        "produces": (REQ, _STRS),
        "consumes": (REQ, _STRS),
        "onError": (REQ, _ON_ERROR),
        "when": (OPT, _any),
        "fragment": (OPT, _optional(_FRAGMENT)),
        "supportsReviewerLanes": (OPT, _optional(_strict_bool)),
        "pointFrom": (OPT, _NE_OPT),
    },
)
_CONTRIBUTION = _model(
    "Contribution",
    {
        "point": (REQ, _POINT),
        "into": (REQ, _NE),
        "fragment": (REQ, _FRAGMENT),
        "produces": (REQ, _STRS),
        "consumes": (REQ, _STRS),
        "when": (OPT, _any),
        "onError": (OPT, _optional(_ON_ERROR)),
        "configValues": (OPT, _optional(_dict(_NE, _NE))),
    },
)
_AGENT_VERDICT = _model("AgentVerdict", {"ref": (REQ, _NE), "prompt": (REQ, _NE)})
_PREDICATE = _tagged(
    "kind",
    {
        "command-exit-zero": _model(
            "CommandExitZero",
            {
                "kind": (REQ, _literal("command-exit-zero")),
                "command": (REQ, _NE),
                "timeout": (OPT, _optional(_strict_float(gt=0, le=3600))),
            },
        ),
        "artifact-exists": _model(
            "ArtifactExists",
            {"kind": (REQ, _literal("artifact-exists")), "artifact": (REQ, _NE)},
        ),
        "artifact-frontmatter-equals": _model(
            "ArtifactFrontmatterEquals",
            {
                "kind": (REQ, _literal("artifact-frontmatter-equals")),
                "artifact": (REQ, _NE),
                "field": (REQ, _NE),
                "equals": (REQ, _any),
            },
        ),
        "config-equals": _model(
            "ConfigEquals",
            {"kind": (REQ, _literal("config-equals")), "key": (REQ, _NE), "equals": (REQ, _any)},
        ),
    },
)
_CHECK = _model(
    "Check",
    {
        "query": (OPT, _NE_OPT),
        "predicate": (OPT, _optional(_PREDICATE)),
        "agentVerdict": (OPT, _optional(_AGENT_VERDICT)),
    },
)
_GATE = _model(
    "Gate",
    {
        "point": (REQ, _POINT),
        "check": (REQ, _CHECK),
        "blocking": (REQ, _strict_bool),
        "onError": (REQ, _ON_ERROR),
        "when": (OPT, _any),
    },
)
_CONFIG_KEY = _model(
    "ConfigKey",
    {
        "type": (REQ, _literal("boolean", "string", "number", "enum")),
        "default": (OPT, _any),
        "description": (OPT, _optional(_text)),
        "values": (OPT, _optional(_list(_any))),
    },
)
_HOST_HOOK = _model(
    "HostHook", {"event": (REQ, _NE), "script": (REQ, _NE), "matcher": (OPT, _NE_OPT)}
)
_COMMAND_FAMILY = _model(
    "CommandFamily",
    {
        "family": (REQ, _NE),
        "module": (REQ, _NE),
        "router": (REQ, _NE),
        "subcommands": (OPT, _optional(_STRS)),
    },
)
_INVOKE = _model(
    "Invoke",
    {
        "binary": (REQ, _NE),
        "args": (REQ, _list(_text)),
        "timeoutMs": (REQ, _strict_int(gt=0, le=120_000)),
    },
)
_TASK_CONTENT_RESOLVER = _model(
    "TaskContentResolver", {"trackerPrefix": (REQ, _ID), "invoke": (REQ, _INVOKE)}
)
_RUNTIME_COMPAT = _model(
    "RuntimeCompat",
    {
        "supported": (REQ, _list(_NE, min_length=1)),
        "unsupported": (REQ, _STRS),
        "notes": (OPT, _optional(_dict(_text, _text))),
    },
)
_REVIEWER_PROBE = _model(
    "ReviewerProbe",
    {"kind": (REQ, _literal("command-exists", "command-capability", "http-reachable"))},
    extra=True,
)
_REVIEWER = _model(
    "Reviewer",
    {
        "slug": (REQ, _pattern(r"[a-z][a-z0-9_-]*")),
        "flags": (REQ, _STRS),
        "transport": (REQ, _literal("spawn", "openai-http")),
        "probe": (REQ, _REVIEWER_PROBE),
        "invoke": (REQ, _dict(_text, _any)),
        "timeoutFloorMs": (OPT, _optional(_strict_int(ge=0))),
        "timeoutConfigKey": (OPT, _NE_OPT),
        "emptyOutput": (OPT, _NE_OPT),
        "reviewsSection": (REQ, _NE),
        "evidenceClass": (REQ, _literal("source-grounded", "diff-only")),
        "requiresBinaries": (OPT, _STRS),
        "promptBudgetKey": (OPT, _NE_OPT),
        "modelConfigKey": (OPT, _NE_OPT),
        "handler": (OPT, _NE_OPT),
    },
    extra=True,
)
_PROVENANCE = _model("Provenance", {"sourceRepo": (REQ, _NE), "commit": (REQ, _NE)})


def _opt_list(item: Check) -> Check:
    return _optional(_list(item))


_CAPABILITY = _model(
    "Capability",
    {
        "id": (REQ, _ID),
        "role": (REQ, _literal("feature", "runtime", "reviewer")),
        "version": (
            REQ,
            _pattern(
                r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?"
            ),
        ),
        "title": (REQ, _NE),
        "description": (REQ, _NE),
        "tier": (REQ, _literal("core", "standard", "full")),
        "requires": (REQ, _list(_ID)),
        "engines": (OPT, _optional(_dict(_text, _text))),
        "runtimeCompat": (OPT, _optional(_RUNTIME_COMPAT)),
        "compatVersions": (OPT, _any),
        "integrity": (OPT, _optional(_prefix("sha512-"))),
        "provenance": (OPT, _optional(_PROVENANCE)),
        "author": (OPT, _any),
        "homepage": (OPT, _optional(_text)),
        "repository": (OPT, _any),
        "license": (OPT, _optional(_text)),
        "keywords": (OPT, _opt_list(_text)),
        "skills": (OPT, _opt_list(_NE)),
        "agents": (OPT, _opt_list(_NE)),
        "hooks": (OPT, _opt_list(_HOST_HOOK)),
        "config": (OPT, _optional(_dict(_NE, _CONFIG_KEY))),
        "activationKey": (OPT, _NE_OPT),
        "commands": (OPT, _opt_list(_COMMAND_FAMILY)),
        "steps": (OPT, _opt_list(_STEP)),
        "contributions": (OPT, _opt_list(_CONTRIBUTION)),
        "gates": (OPT, _opt_list(_GATE)),
        "taskContentResolver": (OPT, _optional(_TASK_CONTENT_RESOLVER)),
        "runtime": (OPT, _optional(_dict(_text, _any))),
        "reviewer": (OPT, _optional(_REVIEWER)),
    },
)


def shape_ok(data: Any) -> bool:
    """True only when `manifest.Capability.model_validate(data)` succeeds (see the module)."""
    try:
        return _CAPABILITY(data)
    except RecursionError:
        return False
