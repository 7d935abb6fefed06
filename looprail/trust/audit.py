"""Audit: the surfaces (`looprail.trust.surfaces`) of each capability and native hooks file, as
a user reads them before consenting (`trust`, `capability install`) and `capability audit`
prints them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from looprail.trust.surfaces import Surface, capability_surfaces, native_surfaces
from looprail.trust.surfaces import suspect_surfaces as suspect_surfaces

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet, LoadedCapability
    from looprail.hooks.native.models import HooksFile


@dataclass(frozen=True)
class CapabilityAudit:
    id: str
    origin: str
    source: str
    role: str
    active: bool
    reason: str | None
    surfaces: tuple[Surface, ...]

    @property
    def refused(self) -> tuple[Surface, ...]:
        """The surfaces looprail will never run."""
        return tuple(s for s in self.surfaces if s.refused)

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "origin": self.origin,
            "source": self.source,
            "file": f"{self.source}/capability.json",
            "role": self.role,
            "active": self.active,
            "reason": self.reason,
            "surfaces": [s.to_json() for s in self.surfaces],
        }


@dataclass(frozen=True)
class HooksFileAudit:
    file: str
    scope: str
    status: str  # valid | invalid | missing | untrusted (read anyway for the audit)
    trusted: bool | None
    surfaces: tuple[Surface, ...]
    issues: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """`trusted` and `issues` only when known and non-empty."""
        out: dict[str, object] = {
            "file": self.file,
            "scope": self.scope,
            "status": self.status,
            "surfaces": [s.to_json() for s in self.surfaces],
        }
        if self.trusted is not None:
            out["trusted"] = self.trusted
        if self.issues:
            out["issues"] = list(self.issues)
        return out


@dataclass(frozen=True)
class FailedAudit:
    """A capability that failed to load: nothing from it runs."""

    id: str
    origin: str
    file: str
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "origin": self.origin, "file": self.file, "reason": self.reason}


@dataclass(frozen=True)
class Audit:
    """A whole audit: capabilities, native hooks files and failed capabilities."""

    capabilities: tuple[CapabilityAudit, ...] = ()
    hooks_files: tuple[HooksFileAudit, ...] = ()
    failed: tuple[FailedAudit, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "capabilities": [c.to_json() for c in self.capabilities],
            "nativeHooks": [h.to_json() for h in self.hooks_files],
            "failed": [f.to_json() for f in self.failed],
        }


def audit_capability(
    lc: LoadedCapability, *, flavor: str = "gsd", reason: str | None = None
) -> CapabilityAudit:
    """The audit of one loaded capability; `reason`: why it is inactive (default: consent's,
    `lc.inactive_reason`; `CapabilitySet.why_inactive` adds its `activationKey`)."""
    reason = reason if reason is not None else lc.inactive_reason
    return CapabilityAudit(
        id=lc.id,
        origin=lc.origin,
        source=str(lc.source),
        role=lc.role,
        active=reason is None,
        reason=reason,
        surfaces=tuple(capability_surfaces(lc.data, flavor=flavor)),
    )


def audit_hooks_file(hooks_file: HooksFile, *, trusted: bool | None = None) -> HooksFileAudit:
    """The audit of one `native.models.HooksFile` (read with `read_hooks_file`)."""
    return HooksFileAudit(
        file=str(hooks_file.path),
        scope=hooks_file.scope,
        status=hooks_file.status,
        trusted=trusted,
        surfaces=tuple(native_surfaces(hooks_file.hooks)),
        issues=tuple(str(i) for i in hooks_file.issues),
    )


def audit_registry(
    registry: CapabilitySet,
    ids: Sequence[str] = (),
    *,
    hooks_files: Sequence[HooksFileAudit] = (),
    flavor: str = "gsd",
    config: Mapping[str, Any] | None = None,
) -> Audit:
    """The audit of a loaded capability set (all capabilities, or those in `ids`) plus native
    hooks files, each capability active or not under `config`. Failed capabilities are
    listed: nothing from them runs."""
    wanted = set(ids)
    caps = tuple(
        audit_capability(
            registry.capabilities[cid], flavor=flavor, reason=registry.why_inactive(cid, config)
        )
        for cid in sorted(registry.capabilities)
        if not wanted or cid in wanted
    )
    failed = tuple(
        FailedAudit(f.id, f.origin, f.file, str(f.issues[0]) if f.issues else "invalid")
        for f in registry.failed
        if not wanted or f.id in wanted
    )
    return Audit(caps, tuple(hooks_files), failed)


def render_text(audit: Audit) -> str:
    """The audit as people read it: one block per capability and hooks file."""
    lines: list[str] = []
    for cap in audit.capabilities:
        state = "active" if cap.active else f"INACTIVE: {cap.reason}"
        lines.append(f"capability {cap.id} ({cap.role}, {cap.origin}) — {state}")
        lines.append(f"  {cap.source}/capability.json")
        lines += _surface_lines(cap.surfaces, "  nothing that runs")
        lines.append("")
    for f in audit.failed:
        lines.append(f"capability {f.id} ({f.origin}) — FAILED TO LOAD, nothing from it runs")
        lines.append(f"  {f.reason}")
        lines.append("")
    for hf in audit.hooks_files:
        trust = ""
        if hf.trusted is not None:
            trust = ", trusted" if hf.trusted else ", NOT TRUSTED (run `looprail trust`)"
        lines.append(f"native hooks {hf.file} ({hf.scope}, {hf.status}{trust})")
        for issue in hf.issues:
            lines.append(f"  invalid, none of its hooks run: {issue}")
        lines += _surface_lines(hf.surfaces, "  no hooks")
        lines.append("")
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) if lines else "nothing to audit"


def _surface_lines(surfaces: Sequence[Surface], empty: str) -> list[str]:
    if not surfaces:
        return [empty]
    out = []
    for s in surfaces:
        timeout = None if s.timeout_s is None else f"timeout {s.timeout_s:g}s"
        tags = [
            t for t in (s.point, s.shell and "SHELL", timeout, s.host_only and "host only") if t
        ]
        head = f"  - {s.kind} [{', '.join(tags)}]" if tags else f"  - {s.kind}"
        out.append(f"{head} {s.where}")
        out.append(f"      {s.runs}")
        if s.refused:
            out.append(f"      REFUSED: {s.refused}")
        if s.note:
            out.append(f"      ({s.note})")
    return out
