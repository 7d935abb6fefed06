"""Runtimes as plugins, found by name in the `looprail.runtimes` entry-point group: a class
with a `from_settings(settings)` classmethod (docs/agents.md, "Writing your own runtime")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprail.errors import LooprailError, UsageError
from looprail.runtime.base import Runtime
from looprail.runtime.settings import looprail_settings

if TYPE_CHECKING:
    from looprail.runtime.local import Timeouts

GROUP = "looprail.runtimes"
DEFAULT_RUNTIME = "local"

# name → "module:Class", what pyproject.toml registers (kept in step by a test).
BUILTIN: Mapping[str, str] = {
    "local": "looprail.runtime.local:LocalRuntime",
    "scripted": "looprail.runtime.scripted:ScriptedRuntime",
    "claude": "looprail.runtime.agents:ClaudeRuntime",
    "codex": "looprail.runtime.agents:CodexRuntime",
    "opencode": "looprail.runtime.agents:OpenCodeRuntime",
    "gemini": "looprail.runtime.agents:GeminiRuntime",
}


@dataclass
class RuntimeSettings:
    """What a runtime is built from; `agent`: `trust.agents.effective_agent`'s settings."""

    project: Path
    host_tool: str | None = None
    timeouts: Timeouts | None = None
    progress: Callable[[str], None] | None = None
    # `-v`: each line a unit of work prints, as `output(label, stream, line)`; None: nothing
    output: Callable[[str, str, str], None] | None = None
    agent: dict[str, object] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # `.planning/config.json`, loaded: an agent CLI reads GSD's model keys from it
    config: Mapping[str, Any] | None = None


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def available() -> list[str]:
    return sorted({*BUILTIN, *_entry_points()})


def runtime_class(name: str) -> type:
    """The class registered as `name` (a `UsageError` naming the choices). looprail's own are
    resolved without the entry-point scan (~10 ms), and no plugin can take one over."""
    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        return getattr(import_module(module), attr)
    found = _entry_points().get(name)
    if found is not None:
        try:
            return found.load()
        except Exception as exc:  # a broken plugin is one line, never a traceback
            raise LooprailError(
                f"runtime {name!r} ({found.value}) cannot be loaded: {type(exc).__name__}: {exc}"
            ) from None
    raise UsageError(f"unknown agent runtime {name!r}; choose one of: {', '.join(available())}")


def create_runtime(name: str, settings: RuntimeSettings) -> Runtime:
    """A runtime `name` built from `settings`, checked here once against `Runtime`."""
    cls = runtime_class(name)
    factory = getattr(cls, "from_settings", None)
    if factory is None:
        raise LooprailError(f"runtime {name!r} ({cls.__qualname__}) has no from_settings()")
    runtime = factory(settings)
    if not isinstance(runtime, Runtime):
        declared = {n for n, v in vars(Runtime).items() if callable(v) and n[0] != "_"}
        lacks = sorted(declared - set(dir(runtime)))
        raise LooprailError(
            f"runtime {name!r} ({cls.__qualname__}) is not a Runtime: it lacks "
            f"{', '.join(lacks)} (subclass looprail.runtime.base.BaseRuntime)"
        )
    return runtime


def agent_name(config: Mapping[str, Any] | None, override: str | None = None) -> str:
    """The runtime a run uses: `--agent`, else `looprail.agent` in the config, else `local`."""
    return override or looprail_settings(config).agent or DEFAULT_RUNTIME


def agent_section(config: Mapping[str, Any] | None, name: str) -> dict[str, object]:
    """`looprail.agents.<name>` from the config (permissions, model, extra args), or {}."""
    return dict(looprail_settings(config).agents.get(name, {}))
