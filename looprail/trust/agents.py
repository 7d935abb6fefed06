"""The settings an agent runs with (issue 27), the one function `run`, `doctor`, `capability
audit` and `trust` use: the project's guarded settings count only with consent, the user's own
`$LOOPRAIL_HOME/agents.json` wins (docs/agents.md, "Settings a cloned project cannot choose alone").
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from looprail.errors import ConfigError
from looprail.fsutil import read_bounded
from looprail.layout import PROJECT_CONFIG_FILE, USER_AGENTS_FILE, looprail_home
from looprail.runtime.agent_settings import GUARDED, guarded_digest, guarded_of
from looprail.runtime.agents import AgentSettings, describe
from looprail.runtime.registry import agent_section
from looprail.trust.store import agents_consent


def user_agents_path(env: Mapping[str, str] | None = None) -> str:
    return os.path.join(looprail_home(env), USER_AGENTS_FILE)


def user_section(name: str, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """`<name>` in the user's `agents.json`, or {}; a file that is not valid is a ConfigError."""
    path = user_agents_path(env)
    try:
        raw = read_bounded(path, 1 << 20)
    except OSError as exc:
        raise ConfigError(path, f"cannot read ({exc.strerror or exc})") from None
    if raw is None:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(path, f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(path, "must be an object of agent name -> settings")
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(path, f"{name}: must be an object", field=name)
    return dict(value)


@dataclass(frozen=True)
class EffectiveAgent:
    """The settings a run of agent `name` uses, checked, and where each came from."""

    name: str
    settings: AgentSettings
    section: dict[str, object]  # the merged raw settings (what the runtime is built from)
    origin: dict[str, str] = field(default_factory=dict)  # key -> where its value came from
    pending: dict[str, object] = field(default_factory=dict)  # project keys without consent
    digest: str | None = None  # of the project's guarded settings (None: there are none)
    user_file: str = ""  # the user's own agent settings file

    def refusal(self) -> str | None:
        """One line, when the project sets what needs consent and has none: file, field, fix."""
        if not self.pending:
            return None
        key = next(iter(self.pending))
        rest = list(self.pending)[1:]
        also = f" (so do {', '.join(rest)})" if rest else ""
        return (
            f"{PROJECT_CONFIG_FILE}: looprail.agents.{self.name}.{key}: "
            f"{json.dumps(self.pending[key])} comes from the project and changes what runs or "
            f"what the agent may do{also}; review it with `looprail trust`, or set it in your "
            f"own {self.user_file or user_agents_path()}"
        )

    def line(self) -> str:
        return describe(self.name, self.settings)

    def sources(self) -> str:
        """Where the guarded settings in effect came from, e.g. `args from …, consented`."""
        parts = [f"{k} from {self.origin[k]}" for k in GUARDED if k in self.origin]
        return "; ".join(parts)


def effective_agent(
    project: str | os.PathLike[str],
    config: Mapping[str, Any] | None,
    name: str,
    *,
    env: Mapping[str, str] | None = None,
) -> EffectiveAgent:
    """The settings agent `name` runs with in `project`: the project's section, minus what
    needs consent and lacks it (listed in `pending`), overridden by the user's `agents.json`.
    Raises ConfigError for a malformed setting (in either file)."""
    project_raw = agent_section(config, name)
    AgentSettings.parse(name, project_raw)  # a malformed project setting: its own error
    user_raw = user_section(name, env)
    try:
        AgentSettings.parse(name, user_raw)
    except ConfigError as exc:  # the same checks; the message names the user's file
        reason = exc.reason.removeprefix("looprail.agents.")
        raise ConfigError(user_agents_path(env), reason) from None
    guarded = guarded_of(name, project_raw)
    digest = guarded_digest(name, guarded) if guarded else None
    consented = digest is not None and agents_consent(project, env=env).get(name) == digest
    origin = {k: PROJECT_CONFIG_FILE for k in project_raw}
    merged = dict(project_raw)
    pending: dict[str, object] = {}
    for key in guarded:
        if consented:
            origin[key] = f"{PROJECT_CONFIG_FILE}, consented"
        elif key not in user_raw:
            pending[key] = guarded[key]
    for key, value in user_raw.items():
        merged[key] = value
        origin[key] = user_agents_path(env)
    for key in pending:  # never used without consent, whoever calls this
        merged.pop(key, None)
        origin.pop(key, None)
    settings = AgentSettings.parse(name, merged)
    return EffectiveAgent(
        name, settings, merged, origin, pending, digest, user_file=user_agents_path(env)
    )
