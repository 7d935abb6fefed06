"""The consent workflow as library calls (`looprail trust` asks a question between them):
`plan_consent()` audits what in a project still needs consent and hashes it; `commit_consent()`
hashes it again and records consent only when nothing changed since the plan (a change made
while the user read the audit is caught, never trusted).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from looprail.config import load_project_config
from looprail.errors import LooprailError
from looprail.hooks.compiled import PROJECT, capability_folders
from looprail.hooks.native.loading import project_hooks_path
from looprail.hooks.native.parsing import read_hooks_file
from looprail.hooks.registry import load_registry
from looprail.hooks.sources import project_overlays
from looprail.layout import LOOPRAIL_DIR, PROJECT_CONFIG_FILE
from looprail.runtime.agents import ADAPTERS, AgentSettings, describe
from looprail.trust import (
    CHANGED,
    TrustError,
    apply_consent,
    consent_state,
    folder_hash,
    grant,
    hooks_hash,
    hooks_state,
)
from looprail.trust.agents import EffectiveAgent, effective_agent
from looprail.trust.audit import (
    Audit,
    CapabilityAudit,
    HooksFileAudit,
    audit_capability,
    audit_hooks_file,
    suspect_surfaces,
)

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet


@dataclass(frozen=True)
class ConsentPlan:
    """What `commit_consent` would consent to, with the hashes taken before the audit."""

    project: Path
    capabilities: tuple[CapabilityAudit, ...] = ()
    hashes: dict[str, str] = field(default_factory=dict)  # capability id -> folder hash
    hooks: HooksFileAudit | None = None
    hooks_digest: str | None = None
    skipped: tuple[str, ...] = ()  # nothing to consent to (failed, shadowed)
    refused: tuple[str, ...] = ()  # cannot be consented to (unhashable, suspect, invalid)
    # agent settings of the project that change what runs or widen permissions, unconsented
    agents: tuple[EffectiveAgent, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.capabilities and self.hooks is None and not self.agents

    @property
    def names(self) -> list[str]:
        """What the question names: `capability <id>`… and `.looprail/hooks.json`."""
        names = [f"capability {c.id}" for c in self.capabilities]
        if self.hooks is not None:
            names.append(f"{LOOPRAIL_DIR}/hooks.json")
        names += [f"the {a.name} settings {', '.join(a.pending)}" for a in self.agents]
        return names

    @property
    def changed(self) -> list[str]:
        """Ids of the capabilities that were consented before and changed since."""
        return [c.id for c in self.capabilities if c.reason == CHANGED]

    @property
    def shells(self) -> list[str]:
        """Where the plan runs shell or interpreter code (said even with `--yes`)."""
        out = [
            f"{c.id} {s.where}"
            for c in self.capabilities
            for s in c.surfaces
            if s.shell and not s.refused
        ]
        if self.hooks is not None:
            out += [f"hooks.json {s.where}" for s in self.hooks.surfaces if s.shell]
        return out

    def audit(self) -> Audit:
        return Audit(self.capabilities, (self.hooks,) if self.hooks else ())

    def question(self) -> str:
        changed = self.changed
        reason_note = f" ({', '.join(changed)} changed since consent)" if changed else ""
        shells = self.shells
        shell_note = f" They run SHELL or interpreter code ({'; '.join(shells)})." if shells else ""
        return f"Allow {', '.join(self.names)}{reason_note} to run?{shell_note}"


def _project_folder_hashes(project: Path) -> dict[str, str]:
    """Folder hashes of the project overlay, taken before the manifests are read: consent must
    cover the content the audit was made from."""
    out = {}
    for folder in (f for root in project_overlays(project) for f in capability_folders(root)):
        if os.path.basename(folder) in out:
            continue  # the first of an id is the one loaded (registry merge)
        try:
            out[os.path.basename(folder)] = folder_hash(folder)
        except TrustError:
            continue
    return out


def plan_consent(
    project: str | os.PathLike[str], capability_dirs: Sequence[str | os.PathLike[str]] = ()
) -> ConsentPlan:
    """Audit every project capability and the project hooks.json that lack valid consent.
    Raises `LooprailError` when a capability folder changed between its hash and its audit."""
    project = Path(project)
    before = _project_folder_hashes(project)
    config, _ = load_project_config(project)
    registry = load_registry(project, [os.fspath(d) for d in capability_dirs])
    registry = apply_consent(registry)  # so the audit says why each one is inactive
    pending, hashes, refused = _pending_capabilities(project, registry, config, before)
    skipped = [
        f"capability {failed.id}: failed to load, nothing from it runs"
        for failed in registry.failed
        if failed.origin == PROJECT
    ]
    skipped += [  # consenting would change nothing: say so, never "trusted"
        f"{shadow.reason}; not reviewed, consent would not make it run"
        for shadow in registry.shadowed
        if shadow.origin == PROJECT
    ]
    hooks_pending, hooks_digest = _pending_hooks(project, refused)
    agents, agent_refused = _pending_agents(project, config)
    return ConsentPlan(
        project,
        tuple(pending),
        hashes,
        hooks_pending,
        hooks_digest,
        tuple(skipped),
        (*refused, *agent_refused),
        agents,
    )


def _pending_capabilities(
    project: Path,
    registry: CapabilitySet,
    config: Mapping[str, object] | None,
    before: Mapping[str, str],
) -> tuple[list[CapabilityAudit], dict[str, str], list[str]]:
    """The audits and folder hashes of the project capabilities that lack consent, and why
    others cannot be consented to."""
    pending: list[CapabilityAudit] = []
    hashes: dict[str, str] = {}
    refused: list[str] = []
    for cid in sorted(registry.capabilities):
        lc = registry.capabilities[cid]
        if lc.origin != PROJECT or consent_state(project, cid, lc.source) is None:
            continue
        cap_audit = audit_capability(lc, reason=registry.why_inactive(cid, config))
        try:
            digest = folder_hash(lc.source)
        except TrustError as exc:
            refused.append(f"capability {cid}: cannot be consented to: {exc}")
            continue
        if before.get(cid) != digest:
            raise LooprailError(f"{lc.source}: changed while it was being read; run trust again")
        suspects = suspect_surfaces(cap_audit.surfaces)
        if suspects:
            first = suspects[0]
            refused.append(
                f"capability {cid}: {lc.manifest_file}: {first.where}: "
                f"{first.runs}: {first.refused}; not consented (fix or remove it)"
            )
            continue
        pending.append(cap_audit)
        hashes[cid] = digest
    return pending, hashes, refused


def _pending_hooks(project: Path, refused: list[str]) -> tuple[HooksFileAudit | None, str | None]:
    """The audit and hash of the project hooks.json when it lacks consent; why it cannot be
    consented to goes to `refused`."""
    state = hooks_state(project)
    if state is None or state == "no project hooks file":
        return None, None
    if state.startswith("cannot be consented to"):
        refused.append(f"hooks.json: {state}")
        return None, None
    digest = hooks_hash(project)  # before reading: consent covers what the audit shows
    hooks_file = read_hooks_file(project_hooks_path(project), scope="project")
    if hooks_file.status != "valid":
        issue = hooks_file.issues[0] if hooks_file.issues else "invalid"
        refused.append(f"hooks.json: invalid, none of its hooks run ({issue}); fix it first")
        return None, None
    return audit_hooks_file(hooks_file, trusted=False), digest


def _pending_agents(
    project: Path, config: Mapping[str, object] | None
) -> tuple[tuple[EffectiveAgent, ...], list[str]]:
    """The agents whose project settings need consent and lack it, and why others cannot."""
    out, refused = [], []
    for name in sorted(ADAPTERS):
        try:
            effective = effective_agent(project, config, name)
        except LooprailError as exc:
            refused.append(f"agent settings of {name}: {exc}; fix them first")
            continue
        if effective.pending:
            out.append(effective)
    return tuple(out), refused


def agent_settings_text(agents: Sequence[EffectiveAgent]) -> list[str]:
    """What `trust` shows of each agent's project settings before asking (with every flag)."""
    lines = []
    for a in agents:
        wanted = AgentSettings.parse(a.name, {**a.section, **a.pending})
        lines.append(f"{PROJECT_CONFIG_FILE}: looprail.agents.{a.name}:")
        for key, value in a.pending.items():
            lines.append(f"  {key}: {json.dumps(value)}")
        lines.append(f"  with it: {describe(a.name, wanted)}")
    return lines


def commit_consent(plan: ConsentPlan) -> list[str]:
    """Record consent for exactly what `plan` showed; returns what was consented (its `names`).
    Everything is hashed again first: when anything changed since the plan, nothing is
    recorded and `LooprailError` names the file."""
    for cap in plan.capabilities:  # bind consent to what was shown, not to what is there now
        if folder_hash(cap.source) != plan.hashes[cap.id]:
            raise LooprailError(f"{cap.source}: changed while it was being reviewed; not trusted")
    if plan.hooks_digest is not None and hooks_hash(plan.project) != plan.hooks_digest:
        raise LooprailError(
            f"{project_hooks_path(plan.project)}: changed while it was being reviewed; not trusted"
        )

    agents = {}
    if plan.agents:
        config, _ = load_project_config(plan.project)
        for a in plan.agents:
            if effective_agent(plan.project, config, a.name).digest != a.digest:
                raise LooprailError(
                    f"{plan.project / PROJECT_CONFIG_FILE}: the {a.name} settings "
                    "changed while they were being reviewed; not trusted"
                )
            assert a.digest is not None
            agents[a.name] = a.digest
    if plan.empty:
        return []
    grant(plan.project, plan.hashes, hooks=plan.hooks_digest, agents=agents)
    return plan.names
