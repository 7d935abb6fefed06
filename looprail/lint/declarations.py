"""The gates and steps every capability declares, and whether each one runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from looprail.config import MISSING, effective_value, is_active
from looprail.hooks.resolve import cap_active
from looprail.lint.inputs import LintInput, _rel
from looprail.machine.spec import DEFAULT_LOOP

if TYPE_CHECKING:
    from looprail.hooks.capset import LoadedCapability

_KINDS = {"steps": "step", "contributions": "contribution", "gates": "gate"}


@dataclass(frozen=True)
class _Decl:
    """One step, contribution or gate of a loaded capability."""

    cap_id: str
    group: str  # steps | contributions | gates
    index: int
    entry: Mapping[str, Any]  # the manifest JSON of the entry
    file: str

    @property
    def path(self) -> str:
        return f"$.{self.group}[{self.index}]"

    @property
    def point(self) -> str:
        return str(self.entry["point"])

    @property
    def kind(self) -> str:
        return _KINDS[self.group]

    @property
    def name(self) -> str:
        return f"{self.kind} {self.path} of {self.cap_id!r} at {self.point}"


def _cap_file(data: LintInput, lc: LoadedCapability) -> str:
    return _rel(lc.manifest_file, data.project)


def _declarations(data: LintInput) -> list[_Decl]:
    return [
        _Decl(cid, group, i, entry, _cap_file(data, lc))
        for cid, lc in data.compiled.capabilities.items()
        for group in _KINDS
        for i, entry in enumerate(lc.data.get(group) or ())
    ]


def _cap_active(data: LintInput, cap_id: str) -> bool:
    return cap_active(data.compiled, cap_id, data.config)


def _when_true(data: LintInput, key: str) -> bool:
    return is_active(key, data.config, data.compiled.config)


def _runs(data: LintInput, decl: _Decl) -> bool:
    """Would this declaration be dispatched under the current config?"""
    when = decl.entry.get("when")
    if not _cap_active(data, decl.cap_id) or (when is not None and not _when_true(data, when)):
        return False
    point_from = decl.entry.get("pointFrom")
    if point_from is not None:
        value = effective_value(point_from, data.config, data.compiled.config)
        return value is not MISSING and value == decl.point
    return True


def _point_order() -> dict[str, int]:
    """Each point's position in the loop (the order the default loop first crosses them)."""
    crossed = dict.fromkeys(p for t in DEFAULT_LOOP.transitions() for p in t.points)
    return {p: i for i, p in enumerate(crossed)}
