"""A model per role (docs/agents.md, "Models"). `resolve_gsd` answers as the reference's
`gsd-tools resolve-model <agent type>` does from GSD's keys in `.planning/config.json`, with the
reference's own catalog (`model_catalog.json`, refreshed by scripts/model_catalog.py).
`role_models` says what each role passes its CLI (`--model`), and why."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

from looprail.errors import ConfigError
from looprail.layout import PROJECT_CONFIG_FILE
from looprail.runtime.adapter import AgentSettings

CATALOG_FILE = "model_catalog.json"
# The reference's agent type for each looprail role (each of `adapter.ROLES`). Discuss and
# ship run in the reference's own session, whose model GSD does not choose: none for them.
ROLE_AGENTS: Mapping[str, str | None] = {
    "orchestrator": None,
    "planner": "gsd-planner",
    "executor": "gsd-executor",
    "verifier": "gsd-verifier",
}
# Claude Code's model aliases; `fable` is no GSD tier, but the reference maps its id to it.
CLAUDE_ALIASES = frozenset({"opus", "sonnet", "haiku", "fable"})
_FABLE = {"claude-fable-5": "fable"}
_POLICY_KEYS = {"opus": "high", "sonnet": "medium", "haiku": "low"}  # provider generic/custom
_PROFILE_FALLBACK = {"quality": "opus", "budget": "haiku", "inherit": "inherit"}  # else sonnet


@cache
def catalog() -> dict[str, Any]:
    text = (files("looprail.runtime") / CATALOG_FILE).read_text(encoding="utf-8")
    return json.loads(text)


@dataclass(frozen=True)
class Resolved:
    """What `gsd-tools resolve-model <agent>` answers: `model` ("" for `resolve_model_ids:
    "omit"`), and the step that chose it (`model_overrides`, `model_policy`, `runtime`,
    `omit`, `profile`)."""

    model: str
    via: str
    agent: str
    runtime: str  # the config's `runtime`, "claude" when it names none
    profile: str
    tier: str | None = None


@dataclass(frozen=True)
class RoleModel:
    """The model one role's CLI call gets (None: no flag, the CLI's default), and why."""

    role: str
    model: str | None
    source: str


def role_models(
    config: Mapping[str, Any] | None, cli: str, settings: AgentSettings
) -> dict[str, RoleModel]:
    return {role: role_model(config, cli, settings, role) for role in ROLE_AGENTS}


def role_model(
    config: Mapping[str, Any] | None, cli: str, settings: AgentSettings, role: str
) -> RoleModel:
    """`looprail.agents.<cli>.models.<role>`, else `.model`, else GSD's resolution for the
    role's agent type with the runtime set to `cli`, else None (the CLI's default)."""
    if role in settings.models:
        return RoleModel(role, settings.models[role], f"looprail.agents.{cli}.models.{role}")
    if settings.model:
        return RoleModel(role, settings.model, f"looprail.agents.{cli}.model")
    agent = ROLE_AGENTS.get(role)
    if agent is None:
        return RoleModel(role, None, "CLI default (GSD runs this role in your own session)")
    r = resolve_gsd(config, agent)
    why = _unusable(r, cli)
    if why is not None:
        return RoleModel(role, None, f"CLI default ({why})")
    return RoleModel(role, r.model, _source(r))


def _unusable(r: Resolved, cli: str) -> str | None:
    """Why GSD's answer is no model for `cli`, or None. GSD resolves for its `runtime`: an
    answer for another runtime is not passed on, nor a Claude alias to another CLI; a
    `model_overrides` value is the user's own choice, whatever the runtime."""
    if r.model in ("", "inherit"):
        return f"GSD gives {r.model or 'no model'!r} for {r.agent}"
    if r.via != "model_overrides" and r.runtime != cli:
        return f"GSD resolves {r.agent} for runtime {r.runtime}, not {cli}"
    if cli != "claude" and (r.model in CLAUDE_ALIASES or r.via == "profile"):
        return f"GSD gives {r.model!r}, a Claude model, for {r.agent}"
    return None


def _source(r: Resolved) -> str:
    agent = r.agent
    if r.via == "model_overrides":
        return f"GSD model_overrides.{agent}"
    if r.via == "model_policy":
        return f"GSD model_policy, tier {r.tier} of {agent}"
    if r.via == "runtime":
        return f"GSD runtime model for tier {r.tier} of {agent}, model_profile {r.profile}"
    return f"GSD model_profile {r.profile} for {agent}"


def models_line(models: Mapping[str, RoleModel]) -> str:
    return "models: " + ", ".join(f"{m.role} {m.model or 'CLI default'}" for m in models.values())


def resolve_gsd(config: Mapping[str, Any] | None, agent_type: str) -> Resolved:
    """The model the reference resolves for `agent_type` under the loaded `config` (None: none);
    a GSD key of the wrong JSON type is a `ConfigError` naming it."""
    g = _gsd_keys(config)
    rt = g["runtime"]

    def answer(model: str, via: str, tier: str | None = None) -> Resolved:
        return Resolved(model, via, agent_type, rt or "claude", g["profile"], tier)

    override = g["model_overrides"].get(agent_type)
    if override:
        mapped = _claude_override(override, rt)
        if mapped is not None:
            return answer(mapped, "model_overrides")
    agent = catalog()["agents"].get(agent_type)
    tier = _tier(g, agent)
    if tier is not None and tier != "inherit":
        chosen = _policy_or_runtime(g, rt, tier)
        if chosen is not None:
            return answer(*chosen, tier)
    if g["resolve_model_ids"] == "omit":
        return answer("", "omit", tier)
    if agent is None:
        return answer(_PROFILE_FALLBACK.get(g["profile"], "sonnet"), "profile")
    if tier is None or tier == "inherit":  # a known agent has a tier for every profile
        return answer("inherit", "profile", tier)
    if g["resolve_model_ids"] is True:  # full ids, only on the explicit opt-in
        return answer(_claude_ids().get(tier, tier), "profile", tier)
    return answer(tier, "profile", tier)


def _tier(g: Mapping[str, Any], agent: Mapping[str, str] | None) -> str | None:
    """The agent's tier: `models.<phaseType>` when it names one, else its profile's."""
    phase_tier = g["models"].get(agent["phaseType"]) if agent else None
    if phase_tier in {*catalog()["adaptiveTierMap"].values(), "inherit"}:
        return str(phase_tier)
    if g["profile"] == "inherit":
        return "inherit"
    if agent is None:
        return None
    by_profile = {
        "quality": agent["golden"],
        "balanced": agent["balanced"],
        "budget": agent["budget"],
        "adaptive": catalog()["adaptiveTierMap"][agent["routingTier"]],
    }
    return by_profile.get(g["profile"]) or agent["balanced"]


def _policy_or_runtime(g: Mapping[str, Any], rt: str | None, tier: str) -> tuple[str, str] | None:
    """`model_policy` for the tier, else the runtime's model for it (`model_profile_overrides`
    over the catalog's); None: neither has one (or only a Claude id with no alias)."""
    on_claude = rt in (None, "claude")
    policy = g["model_policy"]
    found = _policy_model(policy, rt or "claude", tier) if policy else None
    if found:
        if not on_claude:
            return found, "model_policy"
        alias = _claude_alias(found)
        if alias is not None:
            return alias, "model_policy"
    if not on_claude:
        model = _runtime_model(g["model_profile_overrides"], str(rt), tier)
        if model:
            return model, "runtime"
    return None


def _policy_model(policy: Mapping[str, Any], runtime: str, tier: str) -> str | None:
    entry = _entry(policy.get("runtime_tiers", {}).get(runtime, {}).get(tier))
    if entry.get("model"):
        return str(entry["model"])
    provider = policy.get("provider")
    if not provider:
        return None
    if provider in ("generic", "custom"):
        value = policy.get(_POLICY_KEYS.get(tier, ""))
        return value or None
    budgets = (catalog()["providerPresets"].get(provider) or {}).get(tier) or {}
    preset = budgets.get(policy.get("budget") or "medium") or {}
    return preset.get("model") or None


def _runtime_model(overrides: Mapping[str, Any], runtime: str, tier: str) -> str | None:
    builtin = (catalog()["runtimeTierDefaults"].get(runtime) or {}).get(tier) or {}
    user = _entry(overrides.get(runtime, {}).get(tier))
    return {**builtin, **user}.get("model") or None


def _entry(raw: Any) -> dict[str, Any]:
    return {"model": raw} if isinstance(raw, str) else dict(raw or {})


@cache
def _claude_ids() -> dict[str, str]:
    tiers = catalog()["runtimeTierDefaults"]["claude"]
    return {tier: entry["model"] for tier, entry in tiers.items() if entry}


def _claude_alias(model: str) -> str | None:
    aliases = {model_id: tier for tier, model_id in _claude_ids().items()} | _FABLE
    if model in aliases:
        return aliases[model]
    return model if model in CLAUDE_ALIASES else None


def _claude_override(override: str, runtime: str | None) -> str | None:
    """A `model_overrides` value as the reference passes it: on claude an id becomes its
    alias, and a Claude id with none falls through (None); elsewhere it stands."""
    if runtime not in (None, "claude"):
        return override
    alias = _claude_alias(override)
    if alias is not None:
        return alias
    return None if override.startswith("claude-") else override


def _gsd_keys(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The GSD keys model resolution reads, checked for their JSON type (what the reference
    tolerates beyond that, e.g. an unknown profile, falls back as it does there)."""
    c: Mapping[str, Any] = config if isinstance(config, Mapping) else {}
    ids = c.get("resolve_model_ids")
    if not (ids is None or isinstance(ids, bool) or ids == "omit"):
        _bad("resolve_model_ids", 'must be true, false or "omit"')
    policy = _object(c, "model_policy")
    for key in ("provider", "budget", *_POLICY_KEYS.values()):
        _string(policy, key, "model_policy.")
    return {
        "profile": (_string(c, "model_profile") or "balanced").lower(),
        "runtime": _string(c, "runtime") or None,
        "resolve_model_ids": ids,
        "model_overrides": _strings(c, "model_overrides"),
        "models": _strings(c, "models"),
        "model_profile_overrides": _tier_entries(c, "model_profile_overrides"),
        "model_policy": {**policy, "runtime_tiers": _tier_entries(policy, "runtime_tiers")},
    }


def _bad(key: str, why: str) -> None:
    raise ConfigError(PROJECT_CONFIG_FILE, f"{key}: {why}", field=key)


def _string(section: Mapping[str, Any], key: str, prefix: str = "") -> str | None:
    value = section.get(key)
    if value is not None and not isinstance(value, str):
        _bad(prefix + key, "must be a string")
    return value


def _object(section: Mapping[str, Any], key: str, prefix: str = "") -> dict[str, Any]:
    value = section.get(key)
    if value is not None and not isinstance(value, dict):
        _bad(prefix + key, "must be an object")
    return dict(value or {})


def _strings(section: Mapping[str, Any], key: str) -> dict[str, str]:
    found = _object(section, key)
    for name in found:
        _string(found, name, f"{key}.")
    return found


def _tier_entries(section: Mapping[str, Any], key: str) -> dict[str, dict[str, Any]]:
    """`<runtime>.<tier>` -> a model id or `{model, …}`."""
    where = "model_policy." if key == "runtime_tiers" else ""
    runtimes = _object(section, key, where)
    for runtime in runtimes:
        tiers = _object(runtimes, runtime, f"{where}{key}.")
        for tier, entry in tiers.items():
            dotted = f"{where}{key}.{runtime}.{tier}"
            if isinstance(entry, dict):
                _string(entry, "model", f"{dotted}.")
            elif entry is not None and not isinstance(entry, str):
                _bad(dotted, "must be a model id or an object with `model`")
        runtimes[runtime] = tiers
    return runtimes
