"""Native hooks files as loaded: a named Hook or Preset (its validated `document` entry and where
it was found), a file, the enabled set, and the limits of a file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Generic, Literal, TypeVar

from looprail.errors import Issue
from looprail.hooks.native.document import HookEntry, PresetEntry

Scope = Literal["global", "project"]
FileStatus = Literal["missing", "valid", "invalid", "untrusted"]

MAX_FILE_BYTES = 1 << 20
MAX_JSON_DEPTH = 64
E = TypeVar("E", HookEntry, PresetEntry)


@dataclass(frozen=True)
class Named(Generic[E]):
    """An entry of a hooks file as validated (`entry`, the one declaration of its members),
    with where it was found: `section`/`name` in the file of `scope`."""

    section: str
    name: str
    entry: E
    scope: Scope = "global"
    file: Path | None = None

    @property
    def ref(self) -> str:
        return f"{self.section}/{self.name}"


class NativeHook(Named[HookEntry]):
    """One Hook as configured (`entry.shell` omitted in the file is the canonical `"true"`)."""

    kind: ClassVar[str] = "hook"


class Preset(Named[PresetEntry]):
    """A named list of Hook references (`entry.preset`) enabled together."""

    kind: ClassVar[str] = "preset"


CatalogEntry = NativeHook | Preset


@dataclass(frozen=True)
class HooksFile:
    """One hooks file as loaded: its entries when valid, every problem when not."""

    path: Path
    scope: Scope
    status: FileStatus
    entries: tuple[CatalogEntry, ...] = ()
    issues: tuple[Issue, ...] = ()

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
        return tuple(h for h in self.hooks if h.entry.event == event)
