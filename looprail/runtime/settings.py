"""The `looprail` section of `.planning/config.json`, one typed model (`looprail_settings`).
Not in `looprail.config`: that is on the `render-hooks` start path, which must not import
pydantic."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from looprail.errors import ConfigError
from looprail.layout import FLAVORS, PROJECT_CONFIG_FILE
from looprail.runtime.request import Flavor

CHECKPOINT_ROUNDS = 3  # the default of `looprail.checkpoint_rounds`


class Timeouts(BaseModel):
    """Default seconds per kind of work; a `DispatchContext.timeout_s` overrides them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skill: float = Field(1800, gt=0)
    agent: float = Field(3600, gt=0)
    command: float = Field(600, gt=0)
    query: float = Field(120, gt=0)
    verdict: float = Field(600, gt=0)
    phase: float = Field(3600, gt=0)
    task: float = Field(3600, gt=0)
    message: float = Field(60, gt=0)
    compact: float = Field(600, gt=0)
    # An interactive session on the user's terminal (`run --interactive`): a conversation
    # takes what it takes, so none unless set.
    interactive: float | None = Field(None, gt=0)

    def for_kind(self, kind: str) -> float:
        return float(getattr(self, kind))


class VerifySettings(BaseModel):
    """`looprail.verify`: how a task is held to its checks (docs/loop.md, "Verification")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    retries: StrictInt = Field(2, ge=0)
    unchecked: Literal["warn", "fail"] = "warn"
    timeout: float = Field(600, gt=0)


class LooprailSettings(BaseModel):
    """Unknown keys are ignored (a newer looprail's key is no error in an older one);
    `agents.<name>` is checked by the adapter that reads it, with `trust.agents`' consent."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    agent: StrictStr | None = Field(None, min_length=1)
    agents: dict[str, dict[str, Any]] = Field(default_factory=dict)
    worktrees: StrictBool | None = None
    # `run --interactive` by default: the discuss role talks with the user on the terminal.
    interactive: StrictBool | None = None
    timeouts: Timeouts | None = None
    # fix-up rounds of a human-verify checkpoint (docs/loop.md); None: `CHECKPOINT_ROUNDS`
    checkpoint_rounds: StrictInt | None = Field(None, ge=1)
    # what `--capabilities`, `--host-tool` and `--flavor` say (a flag wins; paths: project's)
    capabilities: list[StrictStr] | None = None
    host_tool: StrictStr | None = Field(None, min_length=1)
    flavor: Flavor | None = None
    verify: VerifySettings = VerifySettings()

    @field_validator("agents", mode="before")
    @classmethod
    def _no_agents(cls, value: Any) -> Any:
        return {} if value is None else value  # `"agents": null` is no agent settings


# The reason shown for a value of the wrong type, per key (the words users have read so far).
_TYPE_REASONS: dict[tuple[str, ...], str] = {
    ("agent",): "must be a runtime name",
    ("agents",): "must be an object",
    ("worktrees",): "must be true or false",
    ("interactive",): "must be true or false",
    ("timeouts",): "must be an object",
    ("checkpoint_rounds",): "must be a whole number of at least 1",
    ("capabilities",): "must be a list of folders",
    ("host_tool",): "must be a program name or path",
    ("flavor",): f"must be one of {', '.join(FLAVORS)}",
    ("verify",): "must be an object",
    ("verify", "retries"): "must be a whole number of at least 0",
    ("verify", "unchecked"): "must be warn or fail",
    ("verify", "timeout"): "must be a positive number of seconds",
}


def looprail_settings_of(config: Any, keys: tuple[str, ...]) -> LooprailSettings:
    """`looprail_settings` with only `keys` validated (the others default)."""
    section = config.get("looprail") if isinstance(config, dict) else None
    if isinstance(section, dict):
        section = {k: v for k, v in section.items() if k in keys}
    return looprail_settings({"looprail": section})


def looprail_settings(config: Any) -> LooprailSettings:
    """The `looprail` section of a loaded config, validated (`ConfigError` naming the key)."""
    section = config.get("looprail") if isinstance(config, dict) else None
    if section is None:
        return _DEFAULT
    if not isinstance(section, dict):
        raise ConfigError(PROJECT_CONFIG_FILE, "looprail: must be an object", field="looprail")
    try:
        return LooprailSettings.model_validate(section)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = tuple(str(p) for p in err["loc"])
        key = "looprail." + ".".join(loc)
        if loc[:1] == ("agents",) and len(loc) == 2:
            reason = "must be an object"
        elif loc[:1] == ("capabilities",):
            reason = _TYPE_REASONS[loc[:1]]
        else:
            reason = _TYPE_REASONS.get(loc, err["msg"])
        raise ConfigError(PROJECT_CONFIG_FILE, f"{key}: {reason}", field=key) from None


_DEFAULT = LooprailSettings()
