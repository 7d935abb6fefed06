"""Runtimes as plugins: every runtime is found by name through the `looprail.runtimes`
entry-point group, so a third party adds one by shipping a package, without touching looprail.

A plugin's entry point names a class (usually a `BaseRuntime` subclass: one method, `handle`)
with a `from_settings(settings)` classmethod. looprail registers its own the same way
(pyproject.toml); the built-in table below is only the fallback for a source checkout that was
never installed, so `local` and the agent adapters work from a bare clone too.

    [project.entry-points."looprail.runtimes"]
    mine = "my_package.runtime:MyRuntime"
"""

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
    """Everything a runtime may be built from. `agent` is the runtime's settings, already an
    object: for an agent CLI the effective ones (`looprail.trust.agents.effective_agent`: the
    project's `looprail.agents.<name>` with consent applied, under the user's own)."""

    project: Path
    host_tool: str | None = None
    timeouts: Timeouts | None = None
    progress: Callable[[str], None] | None = None
    # `-v`: each line a unit of work prints, as `output(label, stream, line)`; None: nothing
    output: Callable[[str, str, str], None] | None = None
    agent: dict[str, object] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # the project's `.planning/config.json`, loaded (None: none): an agent CLI reads GSD's
    # model keys from it (`looprail.runtime.models`)
    config: Mapping[str, Any] | None = None


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def available() -> list[str]:
    """Every runtime name: looprail's own and every installed plugin's, sorted."""
    return sorted({*BUILTIN, *_entry_points()})


def runtime_class(name: str) -> type:
    """The class registered as `name`; an unknown name is a usage error naming the choices.

    looprail's own names are resolved without scanning the installed distributions' entry
    points (the scan reads every package's metadata: ~10 ms at each start): they are
    registered by looprail itself, and an installed plugin cannot take one of them over."""
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
    """A runtime instance of `name`, built from `settings`. What it builds is checked here,
    once, against the `Runtime` protocol (a `BaseRuntime` subclass has all of it), so the
    machine calls the runtime's declared methods and never probes for one."""
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
