"""The capability set: what a search path loaded, one immutable, typed value. `registry` builds
it, `compiled` caches its JSON form (`to_json` / `from_json`) and applies consent; every reader
reads the same value. Activation by `activationKey` is decided per call (`key_active`)."""

# No `from __future__ import annotations`: the named tuples and typed dicts below read their
# field types at run time (a string annotation would be compiled into a `typing.ForwardRef`).
import os
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple, Self, TypedDict

from looprail.config import is_active
from looprail.errors import Issue
from looprail.hooks.sources import DEFERRED

if TYPE_CHECKING:  # the pydantic models: imported where a model is built (`manifest`)
    from looprail.hooks.manifest import Capability, TaskContentResolver


class ConfigKey(TypedDict, total=False):
    """A federated config key as the resolver types it (`config.effective_value`)."""

    type: str
    default: Any
    values: list[Any]


# A hook in envelope form (capId, kind, then the declared fields that are set): the
# contract shape of an envelope's `activeHooks`, so a mapping, not a model.
Hook = dict[str, Any]


class PointHooks(TypedDict):
    steps: list[Hook]
    contributions: list[Hook]
    gates: list[Hook]


def key_active(
    key: str | None, config: Mapping[str, Any] | None, schema: Mapping[str, Any]
) -> bool:
    """The one activation rule: no `activationKey`, or one whose effective value is truthy under
    `config` (`schema`: the typed config keys, `CapabilitySet.config`)."""
    return not key or is_active(key, config, schema)


class Root(NamedTuple):
    """One folder of capability folders, with where it sits in the trust order."""

    path: str
    origin: str  # first-party | global | project


class Shadowed(NamedTuple):
    """A capability folder that is never loaded because another one has its id (earlier in the
    trust order: first-party, then global, then project)."""

    id: str
    source: str
    origin: str
    winner: str
    winner_origin: str

    @property
    def reason(self) -> str:
        """One sentence a user can act on: the copy has no effect, and why."""
        return (
            f"capability {self.id!r} in {self.source} has no effect: the {self.winner_origin} "
            f"{self.id!r} ({self.winner}) is loaded instead ({self.winner_origin} wins; a "
            f"{self.origin} copy never replaces it)"
        )


class FailedCapability(NamedTuple):
    id: str
    file: str
    origin: str
    issues: tuple[Issue, ...]
    gate_points: tuple[str, ...] = ()


class _LoadedFields(NamedTuple):
    """The fields of `LoadedCapability` (its cached values live in the subclass's `__dict__`)."""

    data: dict[str, Any]
    source: str  # the capability's folder
    origin: str
    # Project capabilities only: the user's consent (None: not a project capability, or not
    # checked yet). `inactive_reason` says why it is off.
    consent: bool | None = None
    inactive_reason: str | None = None


class LoadedCapability(_LoadedFields):
    """One loaded capability: its validated manifest JSON (each `fragment.path` materialised
    into `inline`, the path kept) and where it came from. The fields the registry merges and
    orders by are read from `data` (the model's defaults: absent optional fields are None)."""

    @property
    def active(self) -> bool:
        """Not switched off by consent (`activationKey` is per config: `why_inactive`)."""
        return self.inactive_reason is None

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def role(self) -> str:
        return str(self.data["role"])

    @property
    def tier(self) -> str:
        return str(self.data["tier"])

    @property
    def requires(self) -> list[str]:
        return list(self.data["requires"])

    @property
    def activation_key(self) -> str | None:
        return self.data.get("activationKey")

    @property
    def config(self) -> dict[str, Mapping[str, Any]]:
        """key -> {type, default?, values?, description?}"""
        return dict(self.data.get("config") or {})

    @property
    def tracker_prefix(self) -> str | None:
        resolver = self.data.get("taskContentResolver")
        return resolver["trackerPrefix"] if resolver else None

    @property
    def reviewer(self) -> Mapping[str, Any] | None:
        return self.data.get("reviewer")

    @property
    def gate_points(self) -> tuple[str, ...]:
        return tuple(sorted({g["point"] for g in self.data.get("gates") or ()}))

    @property
    def manifest_file(self) -> str:
        return os.path.join(self.source, "capability.json")

    @cached_property
    def manifest(self) -> "Capability":
        """The pydantic model of the manifest, built from `data` on first use (paid for only by
        callers that need it; `data` was validated when it was loaded)."""
        # Here, not at the top: pydantic and the models cost a set read from the cache (every
        # `render-hooks` call) more than the rest of the call, and it never asks for one.
        from looprail.hooks.manifest import Capability

        return Capability.model_validate(_declared(self.data))


def _declared(data: dict[str, Any]) -> dict[str, Any]:
    """`data` without the deferred-fragment markers (the model has no such field)."""
    out = dict(data)
    for group in ("steps", "contributions"):
        entries = data.get(group) or ()
        if any(_is_deferred(e) for e in entries):
            out[group] = [
                {**e, "fragment": {"path": e["fragment"]["path"]}} if _is_deferred(e) else e
                for e in entries
            ]
    return out


def _is_deferred(entry: Any) -> bool:
    frag = entry.get("fragment") if isinstance(entry, dict) else None
    return isinstance(frag, dict) and frag.get(DEFERRED) is True


class _SetFields(NamedTuple):
    """The fields of `CapabilitySet` (its cached values live in the subclass's `__dict__`)."""

    capabilities: dict[str, LoadedCapability]
    failed: tuple[FailedCapability, ...] = ()
    warnings: tuple[str, ...] = ()
    roots: tuple[Root, ...] = ()
    # First-party folders that were named but do not exist (`looprail run` refuses to start).
    missing_roots: tuple[Root, ...] = ()
    shadowed: tuple[Shadowed, ...] = ()


class CapabilitySet(_SetFields):
    """The merged, validated capabilities of one search path (first-party wins), the ones that
    failed to load, and what the merge said."""

    @property
    def issues(self) -> list[Issue]:
        return [i for f in self.failed for i in f.issues]

    @cached_property
    def config(self) -> dict[str, ConfigKey]:
        """Every federated config key as the resolver types it: {key: {type, default, values?}}."""
        out: dict[str, ConfigKey] = {}
        for lc in self.capabilities.values():
            for k, spec in (lc.data.get("config") or {}).items():
                entry: ConfigKey = {"type": spec["type"], "default": spec.get("default")}
                if spec.get("values") is not None:
                    entry["values"] = list(spec["values"])
                out[k] = entry
        return out

    @property
    def defaults(self) -> dict[str, object]:
        """Declared defaults of every federated config key: {key: default}."""
        return {k: spec["default"] for k, spec in self.config.items()}

    def why_inactive(self, cap_id: str, config: Mapping[str, Any] | None) -> str | None:
        """Why a loaded capability is off under `config` (consent, then its `activationKey`,
        decided by the one rule `key_active`), or None when it is active."""
        lc = self.capabilities[cap_id]
        if lc.inactive_reason is not None:
            return lc.inactive_reason
        key = lc.activation_key
        if not key_active(key, config, self.config):
            return f"activationKey {key!r} is not truthy"
        return None

    def task_content_resolvers(self) -> list[tuple[str, "TaskContentResolver"]]:
        """(cap id, TaskContentResolver) of every loaded capability that declares one."""
        return [
            (cid, lc.manifest.taskContentResolver)  # type: ignore[misc]
            for cid, lc in self.capabilities.items()
            if lc.tracker_prefix is not None  # the model only for those that have one
        ]

    @cached_property
    def _tables(self) -> dict[str, PointHooks]:
        return {}

    def hooks_at(self, point: str) -> PointHooks:
        """The hooks declared at `point` in envelope form: steps and contributions ordered by
        produces→consumes (capId tie-break), gates by capId. Derived from the manifests on
        first use (the registry refused every set whose order has a cycle)."""
        table = self._tables.get(point)
        if table is None:
            caps = self.capabilities
            steps = order_entries(entries_at(caps, point, "steps"))
            contributions = order_entries(entries_at(caps, point, "contributions"))
            gates = entries_at(caps, point, "gates")
            table = self._tables[point] = {
                "steps": [_step(cid, e) for cid, e in steps],
                "contributions": [_contribution(cid, e) for cid, e in contributions],
                "gates": [_project(cid, "gate", e, _GATE_FIELDS) for cid, e in gates],
            }
        return table

    def replacing(self, changed: Mapping[str, LoadedCapability]) -> Self:
        """This set with some capabilities replaced (consent, deferred fragments)."""
        if not changed:
            return self
        return self._replace(capabilities={**self.capabilities, **changed})

    def to_json(self) -> dict[str, object]:
        """The JSON form `from_json` reads back (the compiled cache): a record is its fields."""
        return {
            "capabilities": [list(lc) for lc in self.capabilities.values()],
            "failed": [
                [f.id, f.file, f.origin, [list(i) for i in f.issues], list(f.gate_points)]
                for f in self.failed
            ],
            "warnings": list(self.warnings),
            "roots": [list(r) for r in self.roots],
            "missingRoots": [list(r) for r in self.missing_roots],
            "shadowed": [list(s) for s in self.shadowed],
        }

    @classmethod
    def from_json(cls, blob: Any) -> Self:
        """The set `to_json` wrote. Raises ValueError for anything else (a damaged cache is
        rebuilt, never a crash later)."""
        try:
            caps = {}
            for data, source, origin, consent, reason in blob["capabilities"]:
                if not _well_formed(data):
                    raise ValueError("capability")
                caps[data["id"]] = LoadedCapability(
                    data, _str(source), _str(origin), consent, reason
                )
            return cls(
                caps,
                tuple(
                    FailedCapability(
                        _str(cid),
                        _str(file),
                        _str(origin),
                        tuple(Issue(*map(_str, issue)) for issue in issues),
                        tuple(map(_str, points)),
                    )
                    for cid, file, origin, issues, points in blob["failed"]
                ),
                tuple(map(_str, blob["warnings"])),
                tuple(Root(*map(_str, r)) for r in blob["roots"]),
                tuple(Root(*map(_str, r)) for r in blob["missingRoots"]),
                tuple(Shadowed(*map(_str, s)) for s in blob["shadowed"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a capability set: {exc}") from None


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(repr(value))
    return value


def _well_formed(data: Any) -> bool:
    """The fields every reader of the set indexes into (the entries were checked when the set
    was built; the cache's checksum says these bytes are what was written)."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("id"), str)
        and isinstance(data.get("role"), str)
        and isinstance(data.get("tier"), str)
        and isinstance(data.get("requires"), list)
    )


def entries_at(
    caps: Mapping[str, LoadedCapability], point: str, group: str
) -> list[tuple[str, Mapping[str, Any]]]:
    """`(capId, entry)` of each `group` entry (steps, contributions, gates) declared at `point`,
    by capId."""
    return [
        (cid, entry)
        for cid in sorted(caps)
        for entry in caps[cid].data.get(group) or ()
        if entry.get("point") == point
    ]


def order_entries(
    entries: list[tuple[str, Mapping[str, Any]]],
) -> list[tuple[str, Mapping[str, Any]]]:
    """Kahn's topological sort on produces→consumes. The ready queue starts sorted by capId;
    entries that become ready later are appended as released (FIFO, not re-sorted), as the
    reference does and the conformance goldens pin (`ui` before `pattern-mapper` at plan:pre)."""
    n = len(entries)
    order = sorted(range(n), key=lambda i: entries[i][0])
    succ: dict[int, list[int]] = {i: [] for i in range(n)}
    indeg = [0] * n
    # artifact → consumers, so edges cost O(entries + edges), not O(entries²): a manifest may
    # be third-party and hold thousands of entries.
    rank = {i: r for r, i in enumerate(order)}
    consumers: dict[str, list[int]] = {}
    for b in order:
        for art in dict.fromkeys(entries[b][1].get("consumes") or ()):
            consumers.setdefault(art, []).append(b)
    for a in order:
        targets: dict[int, None] = {}
        for art in entries[a][1].get("produces") or ():
            for b in consumers.get(art, ()):
                if b != a:
                    targets[b] = None
        for b in sorted(targets, key=rank.__getitem__):
            succ[a].append(b)
            indeg[b] += 1
    queue = [i for i in order if indeg[i] == 0]
    out: list[int] = []
    head = 0
    while head < len(queue):
        i = queue[head]
        head += 1
        out.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                queue.append(j)
    if len(out) != n:
        done = set(out)
        raise _OrderCycle(sorted({entries[i][0] for i in range(n) if i not in done}))
    return [entries[i] for i in out]


class _OrderCycle(Exception):
    def __init__(self, cap_ids: list[str]):
        super().__init__(", ".join(cap_ids))
        self.cap_ids = cap_ids


_STEP_FIELDS = ("ref", "fragment", "when", "produces", "consumes", "onError")
_CONTRIBUTION_FIELDS = ("into", "fragment", "when", "produces", "consumes", "onError")
_GATE_FIELDS = ("when", "check", "blocking", "onError")
_ONLY_IF_NON_EMPTY = ("produces", "consumes")


def _project(cid: str, kind: str, entry: Mapping[str, Any], fields: tuple[str, ...]) -> Hook:
    """The envelope form of one declaration: capId, kind, then only the fields present."""
    hook: Hook = {"capId": cid, "kind": kind}
    for f in fields:
        if entry.get(f) is None:  # absent, or null: the reference emits only what is set
            continue
        if f in _ONLY_IF_NON_EMPTY and not entry[f]:
            continue
        hook[f] = entry[f]
    return hook


def _step(cid: str, entry: Mapping[str, Any]) -> Hook:
    hook = _project(cid, "step", entry, _STEP_FIELDS)
    if entry.get("supportsReviewerLanes") is True:
        hook["supportsReviewerLanes"] = True
    if "pointFrom" in entry:
        hook["$pointFrom"] = entry["pointFrom"]
    return hook


def _contribution(cid: str, entry: Mapping[str, Any]) -> Hook:
    hook = _project(cid, "contribution", entry, _CONTRIBUTION_FIELDS)
    if entry.get("configValues"):
        hook["configValues"] = dict(entry["configValues"])
    return hook
