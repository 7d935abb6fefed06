"""Layer 3 of manifest validation: the rules across fields of one manifest and the engine
range, on the plain JSON of a manifest whose shape the models accept. `manifest.validate_declared`
runs them after pydantic, `verdicts.VerdictCache.validate` after the shape check derived from
the models (`manifest_shape`): the same code on the same JSON either way.

Only `json`, `re` and the light looprail modules here: this is on the `render-hooks` path.
"""

from __future__ import annotations

import json
import re

from looprail.errors import Issue
from looprail.hooks.manifest_io import FORBIDDEN_KEYS, GSD_ENGINE_VERSION
from looprail.points import POINT_ROLES

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing is not imported at run time on this path
    from collections.abc import Callable
    from typing import Any

ID_PATTERN = re.compile(r"^[a-z][a-z0-9-]*\Z")
SCRIPT_PATTERN = re.compile(r"^[A-Za-z0-9._/-]+\Z")

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
    """Why `engines` (a manifest's `engines` object) rules this engine out, or None.

    Ranges are npm's (`>=1.6.0`, `^1.2`, `~1.2`, `>=1.2.0 <2`, `1.x || >=2.1`), checked by
    node-semver, a port of npm's own implementation. A range it cannot parse matches no
    version, so such a capability is not loaded either (the reference fails closed too)."""
    rng = engines.get("gsd") if isinstance(engines, dict) else None
    if not isinstance(rng, str) or not rng.strip():
        return None
    # not at the top: the render-hooks entry loads this module (its import budget)
    import nodesemver

    try:
        ok = nodesemver.satisfies(GSD_ENGINE_VERSION, rng, loose=False)
    except (ValueError, TypeError):
        ok = False
    if ok:
        return None
    return f'incompatible with GSD {GSD_ENGINE_VERSION} (requires engines.gsd "{rng}")'


def engine_issues(
    data: dict[str, Any], file: str, engine: Callable[[Any], str | None]
) -> list[Issue]:
    problem = engine(data.get("engines"))
    return [] if problem is None else [Issue(file, "$.engines.gsd", problem)]


def check_declared(data: dict[str, Any], file: str, folder_name: str | None) -> list[Issue]:
    """Rules that span fields of one manifest (the reference's validator, manifest-local part),
    on a manifest whose shape the models accept (the derived shape check, or pydantic): a
    field the models default is absent or null here, and "set" means present as a key."""
    issues: list[Issue] = []

    def add(path: str, reason: str) -> None:
        issues.append(Issue(file, path, reason))

    cid, role, requires = data["id"], data["role"], data["requires"]
    compat = data.get("runtimeCompat")
    if folder_name is not None and cid != folder_name:
        add("$.id", f"id {cid!r} does not match its folder name {folder_name!r}")
    if cid in requires:
        add("$.requires", "a capability cannot require itself")

    if role == "feature":
        if compat is None:
            add("$.runtimeCompat", "required for role 'feature'")
        if data.get("reviewer") is not None:
            add("$.reviewer", "a reviewer body is only allowed on runtime and reviewer roles")
        if data.get("runtime") is not None:
            add("$.runtime", "a runtime body is only allowed on role 'runtime'")
    else:
        for name in FEATURE_ONLY:
            if name in data:
                add(f"$.{name}", f"not allowed on role {role!r}")
        if role == "reviewer":
            if data.get("reviewer") is None:
                add("$.reviewer", "required for role 'reviewer'")
            if data.get("runtime") is not None:
                add("$.runtime", "not allowed on role 'reviewer'")
    if compat is not None:
        sup = compat["supported"]
        if "*" in sup and len(sup) > 1:
            add("$.runtimeCompat.supported", 'either exactly ["*"] or a list of ids, not both')
        for i, rid in enumerate(sup):
            if rid != "*" and not ID_PATTERN.match(rid):
                add(f"$.runtimeCompat.supported[{i}]", f"{rid!r} is not a kebab-case id")
        for i, rid in enumerate(compat["unsupported"]):
            if not ID_PATTERN.match(rid):
                add(f"$.runtimeCompat.unsupported[{i}]", f"{rid!r} is not a kebab-case id")

    config: dict[str, Any] = data.get("config") or {}
    for key, spec in config.items():
        path = f"$.config[{json.dumps(key)}]"
        if any(seg in FORBIDDEN_KEYS for seg in key.split(".")):
            add(path, "forbidden key segment")
        setting = _central_setting(key)
        if setting is not None:
            add(path, f"{key!r} collides with the central setting {setting!r} (#2797)")
        issues += [Issue(file, path + p, r) for p, r in _check_config_default(spec)]
    activation = data.get("activationKey")
    if activation is not None and activation not in config:
        add("$.activationKey", f"{activation!r} is not declared in this capability's config")

    skills = set(data.get("skills") or ())
    agents = set(data.get("agents") or ())

    def check_when(when: Any, path: str) -> None:
        if when is None:
            return
        if not isinstance(when, str) or not when:
            add(path, "must be a non-empty string (a dotted config key)")
        elif when not in config:
            add(path, f"{when!r} is not declared in this capability's config")

    for i, step in enumerate(data.get("steps") or ()):
        base = f"$.steps[{i}]"
        ref = step["ref"]
        skill, agent = ref.get("skill"), ref.get("agent")
        set_keys = [k for k in ("skill", "agent", "command") if ref.get(k) is not None]
        if len(set_keys) != 1:
            add(f"{base}.ref", "must have exactly one of skill, agent, command")
        if skill is not None:
            if skill.startswith("gsd-"):
                add(f"{base}.ref.skill", "must not start with 'gsd-' (the dispatcher adds it)")
            if skill not in skills:
                add(f"{base}.ref.skill", f"{skill!r} is not in this capability's skills")
        if agent is not None and agent not in agents:
            add(f"{base}.ref.agent", f"{agent!r} is not in this capability's agents")
        check_when(step.get("when"), f"{base}.when")
        point_from = step.get("pointFrom")
        if point_from is not None and point_from not in config:
            add(f"{base}.pointFrom", f"{point_from!r} is not declared in this capability's config")
        issues += _check_fragment(step.get("fragment"), f"{base}.fragment", file)
    for i, con in enumerate(data.get("contributions") or ()):
        base = f"$.contributions[{i}]"
        roles = POINT_ROLES[con["point"]]
        if con["into"] not in roles:
            add(
                f"{base}.into",
                f"{con['into']!r} is not a role of {con['point']} ({', '.join(roles)})",
            )
        check_when(con.get("when"), f"{base}.when")
        issues += _check_fragment(con["fragment"], f"{base}.fragment", file)
    for i, gate in enumerate(data.get("gates") or ()):
        base = f"$.gates[{i}]"
        chk = gate["check"]
        kinds = [k for k in ("query", "predicate", "agentVerdict") if chk.get(k) is not None]
        if len(kinds) != 1:
            add(f"{base}.check", "must have exactly one of query, predicate, agentVerdict")
        if chk.get("agentVerdict") is not None and gate["blocking"]:
            add(f"{base}.blocking", "an agentVerdict gate is advisory: blocking must be false")
        check_when(gate.get("when"), f"{base}.when")
    for i, hook in enumerate(data.get("hooks") or ()):
        base = f"$.hooks[{i}]"
        s = hook["script"]
        if not SCRIPT_PATTERN.match(s) or s.startswith("-") or s.startswith("/") or ".." in s:
            add(
                f"{base}.script",
                "must be a relative path of [A-Za-z0-9._/-], no '..', no leading '-'",
            )
        matcher = hook.get("matcher")
        if matcher is not None and any(ord(c) < 0x20 or ord(c) == 0x7F for c in matcher):
            add(f"{base}.matcher", "must not contain control characters")
    for i, family in enumerate(data.get("commands") or ()):
        module = family["module"]
        if (
            "/" in module
            or "\\" in module
            or module in (".", "..")
            or module.startswith("-")
            or "\0" in module
        ):
            add(f"$.commands[{i}].module", "must be a bare file name (no folders, no leading '-')")
    tcr = data.get("taskContentResolver")
    if "taskContentResolver" in data and tcr is None:
        add("$.taskContentResolver", "null is not allowed; leave the key out to declare none")
    if tcr is not None:
        invoke = tcr["invoke"]
        if "{{id}}" not in invoke["args"]:
            add("$.taskContentResolver.invoke.args", 'needs at least one element exactly "{{id}}"')
        if "\0" in invoke["binary"]:
            add("$.taskContentResolver.invoke.binary", "must not contain a NUL byte")
        for i, arg in enumerate(invoke["args"]):
            if "\0" in arg:
                add(f"$.taskContentResolver.invoke.args[{i}]", "must not contain a NUL byte")
    return issues


def _central_setting(key: str) -> str | None:
    """The host setting a federated key would shadow or live inside, if any: a capability may
    not redefine the central config schema, exactly or under one of its namespaces."""
    # not at the top: the render-hooks entry loads this module (its import budget)
    from looprail.config import KNOWN_SETTINGS

    for setting in sorted(KNOWN_SETTINGS):
        if key == setting or key.startswith(setting + ".") or setting.startswith(key + "."):
            return setting
    return None


def _check_config_default(spec: dict[str, Any]) -> list[tuple[str, str]]:
    d, kind, values = spec.get("default"), spec["type"], spec.get("values")
    if kind == "enum":
        if not values:
            return [(".values", "an enum key needs a non-empty values list")]
        if d is not None and d not in values:
            return [(".default", f"{d!r} is not one of its values")]
        return []
    if values is not None:
        return [(".values", "only enum keys take values")]
    kinds: dict[str, type | tuple[type, ...]] = {
        "boolean": bool,
        "string": str,
        "number": (int, float),
    }
    expected = kinds[kind]
    if d is not None and (not isinstance(d, expected) or (kind == "number" and d is True)):
        return [(".default", f"must be a {kind}")]
    if kind == "number" and isinstance(d, bool):
        return [(".default", "must be a number")]
    return []


def _check_fragment(fragment: dict[str, Any] | None, path: str, file: str) -> list[Issue]:
    if fragment is None:
        return []
    inline, p = fragment.get("inline"), fragment.get("path")
    if inline is None and p is None:
        return [Issue(file, path, "must have inline or path")]
    if inline is not None and p is not None:
        return [Issue(file, path, "must have inline or path, not both")]
    # `".." in p.split("/")` is `".." in PurePosixPath(p).parts` (empty and "." parts, which
    # pathlib drops, are never ".."); a backslash is refused before.
    if p is not None and (p.startswith("/") or "\\" in p or ".." in p.split("/") or "\0" in p):
        return [Issue(file, f"{path}.path", "must be a relative path without '..'")]
    return []
