"""Native hooks files: the models (a Hook, a Preset, a file, the enabled set) and their limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from looprail.errors import Issue
from looprail.hooks.native.actions import OwnedAction
from looprail.hooks.native.filters import Filter

Scope = Literal["global", "project"]
FileStatus = Literal["missing", "valid", "invalid", "untrusted"]

DEFAULT_TIMEOUT_MS = 5000
MAX_TIMEOUT_MS = 3_600_000
MAX_FILE_BYTES = 1 << 20
MAX_JSON_DEPTH = 64


@dataclass(frozen=True)
class NativeHook:
    """One Hook as configured. `shell` omitted in the file is the canonical `"true"`."""

    kind: ClassVar[str] = "hook"
    section: str
    name: str
    description: str
    event: str
    shell: str = "true"
    when: str | None = None
    filter: Filter = ()
    action: OwnedAction | None = None
    default: bool = True
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_selections: int | None = None
    scope: Scope = "global"
    file: Path | None = None

    @property
    def ref(self) -> str:
        return f"{self.section}/{self.name}"


@dataclass(frozen=True)
class Preset:
    """A named list of Hook references enabled together."""

    kind: ClassVar[str] = "preset"
    section: str
    name: str
    description: str
    refs: tuple[str, ...]
    default: bool = True
    scope: Scope = "global"
    file: Path | None = None

    @property
    def ref(self) -> str:
        return f"{self.section}/{self.name}"


CatalogEntry = NativeHook | Preset


@dataclass(frozen=True)
class HooksFile:
    """One hooks file as loaded: its entries when valid, every problem when not."""

    path: Path
    scope: Scope
    status: FileStatus
    entries: tuple[CatalogEntry, ...] = ()
    issues: tuple[Issue, ...] = ()
    repos: tuple[str, ...] = ()

    @property
    def hooks(self) -> tuple[NativeHook, ...]:
        return tuple(e for e in self.entries if isinstance(e, NativeHook))

    @property
    def presets(self) -> tuple[Preset, ...]:
        return tuple(e for e in self.entries if isinstance(e, Preset))


@dataclass(frozen=True)
class NativeHookSet:
    """The effective native hooks of one project: the merged catalog and, in evaluation order,
    the Enabled Hook Set. `enabled_via` maps each enabled hook's ref to why it is enabled:
    `"default"`, `"enabled"` (named explicitly) or the ref of the Preset that enabled it."""

    project: Path
    files: tuple[HooksFile, ...] = ()
    catalog: tuple[CatalogEntry, ...] = ()
    hooks: tuple[NativeHook, ...] = ()
    enabled_via: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def for_event(self, event: str) -> tuple[NativeHook, ...]:
        return tuple(h for h in self.hooks if h.event == event)

    def entry(self, ref: str) -> CatalogEntry | None:
        return next((e for e in self.catalog if e.ref == ref), None)
