"""Layer 3 of manifest validation: the rules across fields of one manifest and the engine
range, on the plain JSON of a manifest whose shape the models accept (`manifest` runs them
after pydantic)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import nodesemver

from looprail.config import FORBIDDEN_SEGMENTS, KNOWN_SETTINGS
from looprail.errors import Issue
from looprail.points import POINT_ROLES

# The version of the reference engine (open-gsd/gsd-core, its package.json) whose loop-hook
# contract looprail implements. A manifest's `engines.gsd` range is checked against it: a
# capability that requires another engine is not loaded (docs/checks.md, "Engine version").
GSD_ENGINE_VERSION = "1.10.0"

ID_WORD = "[a-z][a-z0-9-]*"  # a kebab-case id: capabilities, runtimes, command words
ID_PATTERN = re.compile(rf"^{ID_WORD}\Z")
CHECK_SHAPES = ("query", "predicate", "agentVerdict")  # exactly one per gate check
SCRIPT_PATTERN = re.compile(r"^[A-Za-z0-9._/-]+\Z")

# `\Z`, not `$`: Python's `$` also matches before a trailing newline, and a newline is exactly
# what must never slip through. The same grammar guards step `ref.command`.
COMMAND_GRAMMAR = re.compile(rf"^{ID_WORD}(?: {ID_WORD})*\Z")
GRAMMAR_TEXT = f"^{ID_WORD}( {ID_WORD})*$"  # as docs/contract.md writes it
# `check.query` words may be dotted handler names (`ui.plan-gate`): the reference's router reads
# a dot as a hyphen. A dot never starts or ends a word and never doubles, so `..` cannot occur.
_QUERY_WORD = rf"{ID_WORD}(?:\.{ID_WORD})*"
QUERY_GRAMMAR = re.compile(rf"^{_QUERY_WORD}(?: {_QUERY_WORD})*\Z")
QUERY_GRAMMAR_TEXT = f"words {ID_WORD}(\\.{ID_WORD})* separated by single spaces"


def validate_query(value: object) -> bool:
    """True when `value` is a `check.query`: lowercase (dotted) words that may be used as argv."""
    return isinstance(value, str) and QUERY_GRAMMAR.match(value) is not None


def validate_command(value: object) -> bool:
    """True when `value` is a step `ref.command`: lowercase words (no dots) for argv."""
    return isinstance(value, str) and COMMAND_GRAMMAR.match(value) is not None


COMMAND_MAX_TIMEOUT_S = 3600  # a `command-exit-zero` predicate's `timeout` bound, in seconds

# The bodies only role 'feature' may declare: the one declaration of this rule (the models say
# which fields exist, not which role may use them; they are pydantic, so not read from here on
# this path). tests/hooks/test_manifest.py checks each name is an optional `Capability` field.
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


def engine_problem(engines: Any) -> str | None:
    """Why `engines` (a manifest's `engines` object) rules this engine out, or None. Ranges are
    npm's (`^1.2`, `>=1.2.0 <2`, `1.x || >=2.1`), checked by node-semver; a range it cannot parse
    matches no version (the reference fails closed too)."""
    rng = engines.get("gsd") if isinstance(engines, dict) else None
    if not isinstance(rng, str) or not rng.strip():
        return None
    try:
        ok = nodesemver.satisfies(GSD_ENGINE_VERSION, rng, loose=False)
    except (ValueError, TypeError):
        ok = False
    if ok:
        return None
    return f'incompatible with GSD {GSD_ENGINE_VERSION} (requires engines.gsd "{rng}")'


def rule_issues(data: Mapping[str, Any], file: str, folder_name: str | None) -> list[Issue]:
    """The rules that span fields of one manifest (the reference's validator, manifest-local
    part), then, only when they hold, the engine range. A field the models default is absent or
    null here, and "set" means present as a key."""
    config = data.get("config") or {}
    found = [
        *_envelope(data, folder_name),
        *_config(data, config),
        *_steps(data, config),
        *_contributions(data, config),
        *_gates(data, config),
        *_hooks_and_commands(data),
        *_resolver(data),
    ]
    if found:
        return [Issue(file, path, reason) for path, reason in found]
    problem = engine_problem(data.get("engines"))
    return [] if problem is None else [Issue(file, "$.engines.gsd", problem)]


_Found = list[tuple[str, str]]  # (JSON path, reason)


def _envelope(data: Mapping[str, Any], folder_name: str | None) -> _Found:
    cid, role = data["id"], data["role"]
    out: _Found = []
    if folder_name is not None and cid != folder_name:
        out.append(("$.id", f"id {cid!r} does not match its folder name {folder_name!r}"))
    if cid in data["requires"]:
        out.append(("$.requires", "a capability cannot require itself"))
    reviewer, runtime = data.get("reviewer") is not None, data.get("runtime") is not None
    if role == "feature":
        if data.get("runtimeCompat") is None:
            out.append(("$.runtimeCompat", "required for role 'feature'"))
        if reviewer:
            out.append(
                ("$.reviewer", "a reviewer body is only allowed on runtime and reviewer roles")
            )
        if runtime:
            out.append(("$.runtime", "a runtime body is only allowed on role 'runtime'"))
    else:
        out += [
            (f"$.{name}", f"not allowed on role {role!r}") for name in FEATURE_ONLY if name in data
        ]
        if role == "reviewer" and not reviewer:
            out.append(("$.reviewer", "required for role 'reviewer'"))
        if role == "reviewer" and runtime:
            out.append(("$.runtime", "not allowed on role 'reviewer'"))
    compat = data.get("runtimeCompat")
    if compat is not None:
        sup = compat["supported"]
        if "*" in sup and len(sup) > 1:
            out.append(
                ("$.runtimeCompat.supported", 'either exactly ["*"] or a list of ids, not both')
            )
        for group in ("supported", "unsupported"):
            out += [
                (f"$.runtimeCompat.{group}[{i}]", f"{rid!r} is not a kebab-case id")
                for i, rid in enumerate(compat[group])
                if not (rid == "*" and group == "supported") and not ID_PATTERN.match(rid)
            ]
    return out


def _config(data: Mapping[str, Any], config: Mapping[str, Any]) -> _Found:
    out: _Found = []
    for key, spec in config.items():
        path = f"$.config[{json.dumps(key)}]"
        if any(seg in FORBIDDEN_SEGMENTS for seg in key.split(".")):
            out.append((path, "forbidden key segment"))
        setting = _central_setting(key)
        if setting is not None:
            out.append((path, f"{key!r} collides with the central setting {setting!r} (#2797)"))
        out += [(path + p, r) for p, r in _check_config_default(spec)]
    activation = data.get("activationKey")
    if activation is not None and activation not in config:
        out.append(("$.activationKey", _undeclared(activation)))
    return out


def _undeclared(key: object) -> str:
    return f"{key!r} is not declared in this capability's config"


def _when(entry: Mapping[str, Any], base: str, config: Mapping[str, Any]) -> _Found:
    when = entry.get("when")
    if when is None:
        return []
    if not isinstance(when, str) or not when:
        return [(f"{base}.when", "must be a non-empty string (a dotted config key)")]
    return [] if when in config else [(f"{base}.when", _undeclared(when))]


def _steps(data: Mapping[str, Any], config: Mapping[str, Any]) -> _Found:
    skills, agents = set(data.get("skills") or ()), set(data.get("agents") or ())
    out: _Found = []
    for i, step in enumerate(data.get("steps") or ()):
        base = f"$.steps[{i}]"
        ref = step["ref"]
        skill, agent = ref.get("skill"), ref.get("agent")
        if sum(ref.get(k) is not None for k in ("skill", "agent", "command")) != 1:
            out.append((f"{base}.ref", "must have exactly one of skill, agent, command"))
        if skill is not None and skill.startswith("gsd-"):
            out.append((f"{base}.ref.skill", "must not start with 'gsd-' (the dispatcher adds it)"))
        if skill is not None and skill not in skills:
            out.append((f"{base}.ref.skill", f"{skill!r} is not in this capability's skills"))
        if agent is not None and agent not in agents:
            out.append((f"{base}.ref.agent", f"{agent!r} is not in this capability's agents"))
        out += _when(step, base, config)
        point_from = step.get("pointFrom")
        if point_from is not None and point_from not in config:
            out.append((f"{base}.pointFrom", _undeclared(point_from)))
        out += _check_fragment(step.get("fragment"), f"{base}.fragment")
    return out


def _contributions(data: Mapping[str, Any], config: Mapping[str, Any]) -> _Found:
    out: _Found = []
    for i, con in enumerate(data.get("contributions") or ()):
        base = f"$.contributions[{i}]"
        point, into = con["point"], con["into"]
        if into not in POINT_ROLES[point]:
            roles = ", ".join(POINT_ROLES[point])
            out.append((f"{base}.into", f"{into!r} is not a role of {point} ({roles})"))
        out += _when(con, base, config)
        out += _check_fragment(con["fragment"], f"{base}.fragment")
    return out


def _gates(data: Mapping[str, Any], config: Mapping[str, Any]) -> _Found:
    out: _Found = []
    for i, gate in enumerate(data.get("gates") or ()):
        base = f"$.gates[{i}]"
        chk = gate["check"]
        if sum(chk.get(k) is not None for k in CHECK_SHAPES) != 1:
            out.append((f"{base}.check", f"must have exactly one of {', '.join(CHECK_SHAPES)}"))
        if chk.get("agentVerdict") is not None and gate["blocking"]:
            out.append(
                (f"{base}.blocking", "an agentVerdict gate is advisory: blocking must be false")
            )
        out += _when(gate, base, config)
    return out


def _hooks_and_commands(data: Mapping[str, Any]) -> _Found:
    out: _Found = []
    for i, hook in enumerate(data.get("hooks") or ()):
        s = hook["script"]
        if not SCRIPT_PATTERN.match(s) or s.startswith(("-", "/")) or ".." in s:
            reason = "must be a relative path of [A-Za-z0-9._/-], no '..', no leading '-'"
            out.append((f"$.hooks[{i}].script", reason))
        matcher = hook.get("matcher")
        if matcher is not None and any(ord(c) < 0x20 or ord(c) == 0x7F for c in matcher):
            out.append((f"$.hooks[{i}].matcher", "must not contain control characters"))
    for i, family in enumerate(data.get("commands") or ()):
        module = family["module"]
        if any(c in module for c in "/\\\0") or module in (".", "..") or module.startswith("-"):
            reason = "must be a bare file name (no folders, no leading '-')"
            out.append((f"$.commands[{i}].module", reason))
    return out


def _resolver(data: Mapping[str, Any]) -> _Found:
    tcr = data.get("taskContentResolver")
    if tcr is None:
        if "taskContentResolver" not in data:
            return []
        return [("$.taskContentResolver", "null is not allowed; leave the key out to declare none")]
    base, invoke = "$.taskContentResolver.invoke", tcr["invoke"]
    out: _Found = []
    if "{{id}}" not in invoke["args"]:
        out.append((f"{base}.args", 'needs at least one element exactly "{{id}}"'))
    if "\0" in invoke["binary"]:
        out.append((f"{base}.binary", "must not contain a NUL byte"))
    out += [
        (f"{base}.args[{i}]", "must not contain a NUL byte")
        for i, arg in enumerate(invoke["args"])
        if "\0" in arg
    ]
    return out


def _central_setting(key: str) -> str | None:
    """The host setting a federated key would shadow or live inside, if any: a capability may
    not redefine the central config schema, exactly or under one of its namespaces."""
    for setting in sorted(KNOWN_SETTINGS):
        if key == setting or key.startswith(setting + ".") or setting.startswith(key + "."):
            return setting
    return None


_TYPES: dict[str, type | tuple] = {"boolean": bool, "string": str, "number": (int, float)}


def _check_config_default(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    d, kind, values = spec.get("default"), spec["type"], spec.get("values")
    if kind == "enum":
        if not values:
            return [(".values", "an enum key needs a non-empty values list")]
        if d is not None and d not in values:
            return [(".default", f"{d!r} is not one of its values")]
        return []
    if values is not None:
        return [(".values", "only enum keys take values")]
    wrong = not isinstance(d, _TYPES[kind]) or (kind == "number" and isinstance(d, bool))
    return [(".default", f"must be a {kind}")] if d is not None and wrong else []


def _check_fragment(fragment: Mapping[str, Any] | None, path: str) -> _Found:
    if fragment is None:
        return []
    inline, p = fragment.get("inline"), fragment.get("path")
    if inline is None and p is None:
        return [(path, "must have inline or path")]
    if inline is not None and p is not None:
        return [(path, "must have inline or path, not both")]
    # `".." in p.split("/")` is `".." in PurePosixPath(p).parts` (empty and "." parts, which
    # pathlib drops, are never ".."); a backslash is refused before.
    if p is not None and (p.startswith("/") or "\\" in p or ".." in p.split("/") or "\0" in p):
        return [(f"{path}.path", "must be a relative path without '..'")]
    return []
