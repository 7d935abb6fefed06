"""The capability registry: load an ordered list of capability folders, merge them
(first-party wins), validate the merged set, and compile it into plain per-point data.

Two products:
- `load_registry(...) -> Registry`: the validated pydantic models (for `capability validate`,
  `list`, the task-content resolver, audit, lint).
- `load_compiled(...) -> dict`: the plain-JSON compilation the resolver reads. It is cached on
  disk, keyed by the exact stat of every manifest, fragment and folder it was built from, so the
  `render-hooks` hot path never imports pydantic when nothing changed.

Search order (first wins on id collisions): `--capabilities DIR…`, then `LOOPRAIL_CAPABILITIES`
(os.pathsep-separated) — both first-party — then the global overlay `~/.looprail/capabilities`,
then the project overlay `<project>/.looprail/capabilities`. An invalid capability is never
fatal for the loop: it is recorded as failed with its issues (and, if it declared gates, the
points where a gate could not be evaluated — fail open, loudly).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from looprail.errors import Issue
from looprail.hooks import sources
from looprail.hooks.manifest_io import ManifestFacts
from looprail.hooks.sources import FIRST_PARTY, GLOBAL, PROJECT

# No `typing` at run time (this module is on the `render-hooks` rebuild path): the TypedDict
# is for type checkers (at run time a compiled registry is a plain dict either way).
TYPE_CHECKING = False
if TYPE_CHECKING:  # manifest imports pydantic: loaded only when a model is asked for
    from typing import Any, TypedDict

    from looprail.hooks.manifest import Capability
    from looprail.hooks.verdicts import VerdictCache
else:
    TypedDict = dict


class CompiledRegistry(TypedDict):
    """The compiled registry (`compile_registry`): plain JSON, cached on disk by
    `hooks.compiled.load_compiled`, read by the resolver on the `render-hooks` hot path."""

    # capability id -> role, origin, source, active, activationKey, inactiveReason (and
    # `consent` once consent is applied)
    caps: dict[str, dict[str, Any]]
    defaults: dict[str, Any]  # config key -> its default
    config: dict[str, dict[str, Any]]  # config key -> its type and default
    points: dict[str, dict[str, list[dict[str, Any]]]]  # point -> steps/contributions/gates
    failed: list[dict[str, Any]]  # capabilities that failed to load: id, file, origin, issues
    warnings: list[str]


@dataclass(frozen=True)
class Root:
    """One folder of capability folders, with where it sits in the trust order."""

    path: Path
    origin: str  # first-party | global | project


@dataclass
class LoadedCapability:
    # The pydantic model, or None (as the registry loads it: validation never builds one,
    # see `VerdictCache.validate`): `manifest` then builds it from `raw` on first use.
    model: Capability | None = field(compare=False)
    data: dict[str, Any]  # the manifest JSON with fragments materialised
    source: Path
    origin: str
    active: bool = True
    inactive_reason: str | None = None
    raw: bytes | None = field(default=None, compare=False, repr=False)
    _facts: ManifestFacts | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def manifest(self) -> Capability:
        """The validated model (built from the manifest bytes on first use: the same model, paid
        for only by callers that need it)."""
        if self.model is None:
            from looprail.hooks.manifest import Capability, parse_manifest_bytes

            assert self.raw is not None, "a LoadedCapability needs its model or its bytes"
            declared, _ = parse_manifest_bytes(self.raw, str(self.source / "capability.json"))
            self.model = Capability.model_validate(declared)
        return self.model

    @property
    def facts(self) -> ManifestFacts:
        """The fields the registry merges and compiles by, without pydantic."""
        if self._facts is None:
            self._facts = ManifestFacts(self.data)
        return self._facts


@dataclass
class FailedCapability:
    id: str
    file: str
    origin: str
    issues: list[Issue]
    gate_points: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Shadowed:
    """A capability folder that is never loaded because another one has its id (earlier in the
    trust order: first-party, then global, then project)."""

    id: str
    source: Path
    origin: str
    winner: Path
    winner_origin: str

    @property
    def reason(self) -> str:
        """One sentence a user can act on: the copy has no effect, and why."""
        return (
            f"capability {self.id!r} in {self.source} has no effect: the {self.winner_origin} "
            f"{self.id!r} ({self.winner}) is loaded instead ({self.winner_origin} wins; a "
            f"{self.origin} copy never replaces it)"
        )


@dataclass
class Registry:
    """The merged, validated capability set."""

    capabilities: dict[str, LoadedCapability]
    failed: list[FailedCapability]
    warnings: list[str]
    roots: list[Root]
    # First-party folders that were named but do not exist (`looprail run` refuses to start).
    missing_roots: list[Root] = field(default_factory=list)
    shadowed: list[Shadowed] = field(default_factory=list)
    # `time.time_ns()` before the first manifest was read (`compiled.load_compiled`'s stat rule)
    loaded_ns: int = field(default=0, compare=False, repr=False)

    def task_content_resolvers(self) -> list[tuple[str, Any]]:
        """(cap id, TaskContentResolver) of every loaded feature capability that declares one."""
        return [
            (cid, lc.manifest.taskContentResolver)
            for cid, lc in self.capabilities.items()
            if lc.facts.tracker_prefix is not None  # the model only for those that have one
        ]

    @property
    def issues(self) -> list[Issue]:
        return [i for f in self.failed for i in f.issues]


def search_roots(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    absolute: bool = False,
) -> list[Root]:
    """The search path in trust order. `absolute`: its folders as the compiled cache keys them
    (`compiled.load_compiled`), so a registry loaded from them is what a cache miss compiles."""
    specs = sources.root_specs(project, capability_dirs, env=env, home=home)
    if absolute:
        specs = [(os.path.abspath(path), origin) for path, origin in specs]
    return [Root(Path(path), origin) for path, origin in specs]


def _capability_folders(root: Path) -> list[Path]:
    return [Path(p) for p in sources.capability_folders(str(root))]


# --------------------------------------------------------------------------- loading


def load_registry(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    config: Mapping[str, Any] | None = None,
    roots: Sequence[Root] | None = None,
    use_cache: bool = True,
) -> Registry:
    """Load, validate and merge every capability on the search path. Never raises for bad
    manifests: they are returned in `failed` with every issue.

    A manifest whose bytes (and folder name, and looprail's rules) were validated before takes
    its verdict from the validation cache (`hooks.verdicts`; off with `use_cache=False` or
    `LOOPRAIL_NO_CACHE`): only changed manifests are validated, and pydantic is imported only
    when one is."""
    from looprail.hooks.verdicts import VerdictCache

    loaded_ns = time.time_ns()  # before any read: `compiled.load_compiled`'s racy-stat rule
    verdicts = VerdictCache.for_env(env) if use_cache else VerdictCache(None)
    roots = (
        list(roots)
        if roots is not None
        else search_roots(project, capability_dirs, env=env, home=home)
    )
    failed: list[FailedCapability] = []
    warnings: list[str] = []
    candidates: list[LoadedCapability] = []
    missing: list[Root] = []
    fragment_total = 0
    for root in roots:
        if root.origin == FIRST_PARTY and not _exists(root.path, dir=True):
            warnings.append(f"{root.path}: capability folder does not exist")
            missing.append(root)
            continue
        for folder in _capability_folders(root.path):
            manifest_path = folder / "capability.json"
            if not _exists(manifest_path, dir=False):
                continue
            file = str(manifest_path)
            try:
                raw = manifest_path.read_bytes()
            except OSError as exc:
                failed.append(
                    FailedCapability(folder.name, file, root.origin, [Issue(file, "$", str(exc))])
                )
                continue
            data, issues = _validated(raw, file, folder, verdicts)
            if root.origin != FIRST_PARTY and data is not None:
                for prefix in _reserved_prefixes():
                    if data["id"].startswith(prefix):
                        issues = [
                            Issue(file, "$.id", f"prefix {prefix!r} is reserved for first-party")
                        ]
                        data = None
                        break
            if data is None:
                failed.append(
                    FailedCapability(folder.name, file, root.origin, issues, _gate_points(raw))
                )
                continue
            size = _fragment_bytes(data)
            if fragment_total + size > MAX_REGISTRY_FRAGMENT_BYTES:
                reason = (
                    f"fragments of all capabilities would exceed {MAX_REGISTRY_FRAGMENT_BYTES} "
                    "bytes with this one; not loaded"
                )
                failed.append(
                    FailedCapability(
                        data["id"], file, root.origin, [Issue(file, "$", reason)], _gate_points(raw)
                    )
                )
                continue
            fragment_total += size
            candidates.append(LoadedCapability(None, data, folder, root.origin, raw=raw))
    shadowed: list[Shadowed] = []
    accepted = _merge(candidates, failed, warnings, shadowed)
    registry = Registry(
        accepted,
        failed,
        warnings,
        list(roots),
        missing_roots=missing,
        shadowed=shadowed,
        loaded_ns=loaded_ns,
    )
    _check_points(registry)
    apply_activation(registry, config)
    return registry


def _validated(
    raw: bytes, file: str, folder: Path, verdicts: VerdictCache
) -> tuple[dict[str, Any] | None, list[Issue]]:
    """`manifest.validate_manifest` without the model (built on demand, `LoadedCapability`),
    with the verdict taken from the cache when these bytes were validated before."""
    from looprail.hooks.manifest_io import _materialise_fragments, parse_manifest_bytes

    key = cached = None
    if verdicts.directory is not None:
        from looprail.hooks.verdicts import verdict_key

        key = verdict_key(raw, folder.name)
        cached = verdicts.get(file, key)
    data = None
    if cached:
        return None, cached
    if cached is not None:
        # A verdict is only recorded for bytes that passed the hostile-safe parse (and its
        # key is these bytes): the plain C parser gives the same value, several times faster.
        try:
            data = json.loads(raw.decode("utf-8").removeprefix("\ufeff"))
        except (ValueError, RecursionError):  # cannot happen for a verdict we wrote
            data = None
    if not isinstance(data, dict):
        data, issues = parse_manifest_bytes(raw, file)
        if issues:
            return None, issues
        if not isinstance(data, dict):
            return None, [Issue(file, "$", "top level must be a JSON object")]
        # pydantic only for a manifest whose shape is not proven right (`VerdictCache.validate`)
        issues = verdicts.validate(data, file, folder.name)
        if key is not None:
            verdicts.put(file, key, issues)
        if issues:
            return None, issues
    issues = _materialise_fragments(data, folder, file)
    if issues:
        return None, issues
    return data, []


# All fragment text of the whole search path, in search order (first-party first): a capability
# that would push it past this fails to load (each one is already at most 16 MiB).
MAX_REGISTRY_FRAGMENT_BYTES = 64 * 1024 * 1024


def _fragment_bytes(data: dict[str, Any] | None) -> int:
    total = 0
    for group in ("steps", "contributions"):
        for entry in (data or {}).get(group) or ():
            frag = entry.get("fragment") if isinstance(entry, dict) else None
            if isinstance(frag, dict) and isinstance(frag.get("inline"), str):
                total += len(frag["inline"])
    return total


def _exists(path: Path, *, dir: bool) -> bool:
    """`is_dir()`/`is_file()` that answers False for a path the OS refuses (too long, say)."""
    try:
        return path.is_dir() if dir else path.is_file()
    except OSError:
        return False


def _reserved_prefixes() -> tuple[str, ...]:
    from looprail.hooks.manifest_io import RESERVED_PREFIXES

    return RESERVED_PREFIXES


def _gate_points(raw: bytes) -> list[str]:
    """Points where a (failed) manifest declared gates, read as leniently as possible."""
    try:
        data = json.loads(raw)
        gates = data.get("gates") if isinstance(data, dict) else None
        return sorted(
            {
                g["point"]
                for g in gates or ()
                if isinstance(g, dict) and isinstance(g.get("point"), str)
            }
        )
    except (ValueError, TypeError, RecursionError):
        return []


def _fail(lc: LoadedCapability, failed: list[FailedCapability], path: str, reason: str) -> None:
    failed.append(
        FailedCapability(
            lc.facts.id,
            str(lc.source / "capability.json"),
            lc.origin,
            [Issue(str(lc.source / "capability.json"), path, reason)],
            lc.facts.gate_points,
        )
    )


def _merge(
    candidates: list[LoadedCapability],
    failed: list[FailedCapability],
    warnings: list[str],
    shadowed: list[Shadowed] | None = None,
) -> dict[str, LoadedCapability]:
    accepted: dict[str, LoadedCapability] = {}
    owners: dict[tuple[str, str], str] = {}
    for lc in candidates:
        m = lc.facts
        if m.id in accepted:
            first = accepted[m.id]
            if shadowed is not None:
                shadowed.append(Shadowed(m.id, lc.source, lc.origin, first.source, first.origin))
            warnings.append(
                f"{lc.source}: capability {m.id!r} is shadowed by the one in {first.source} "
                f"({first.origin} wins)"
            )
            continue
        claims = [("skill", s, f"$.skills[{i}]") for i, s in enumerate(m.skills or ())]
        claims += [("agent", a, f"$.agents[{i}]") for i, a in enumerate(m.agents or ())]
        claims += [("config key", k, f"$.config[{json.dumps(k)}]") for k in (m.config or {})]
        claims += [
            ("command family", family, f"$.commands[{i}].family")
            for i, family in enumerate(m.command_families)
        ]
        if m.tracker_prefix is not None:
            claims.append(
                ("trackerPrefix", m.tracker_prefix, "$.taskContentResolver.trackerPrefix")
            )
        if m.reviewer is not None:
            # One flag selecting two lanes, or two lanes writing one section, is ambiguous.
            claims.append(("reviewer slug", m.reviewer["slug"], "$.reviewer.slug"))
            claims += [
                ("reviewer flag", f, f"$.reviewer.flags[{i}]")
                for i, f in enumerate(dict.fromkeys(m.reviewer["flags"]))
            ]
            claims.append(
                ("reviewsSection", m.reviewer["reviewsSection"], "$.reviewer.reviewsSection")
            )
        clash = next(((k, v, p) for k, v, p in claims if (k, v) in owners), None)
        if clash:
            kind, value, path = clash
            _fail(
                lc,
                failed,
                path,
                f"{kind} {value!r} is already owned by capability {owners[(kind, value)]!r}",
            )
            continue
        for kind, value, _ in claims:
            owners[(kind, value)] = m.id
        accepted[m.id] = lc
    _check_requires(accepted, failed)
    return accepted


_TIER_RANK = {"core": 0, "standard": 1, "full": 2}


def _check_requires(accepted: dict[str, LoadedCapability], failed: list[FailedCapability]) -> None:
    changed = True
    while changed:  # dropping one capability can break another's `requires`
        changed = False
        for cid in list(accepted):
            lc = accepted[cid]
            m = lc.facts
            for i, req in enumerate(m.requires):
                target = accepted.get(req)
                reason = None
                if target is None:
                    reason = f"requires {req!r}, which is not loaded"
                elif _TIER_RANK[target.facts.tier] > _TIER_RANK[m.tier]:
                    reason = (
                        f"tier {m.tier!r} may not require {req!r} of tier {target.facts.tier!r}"
                    )
                if reason:
                    _fail(lc, failed, f"$.requires[{i}]", reason)
                    del accepted[cid]
                    changed = True
                    break
            else:
                rc = m.runtime_compat
                for group in ("supported", "unsupported"):
                    for i, rid in enumerate(rc[group] if rc else ()):
                        t = accepted.get(rid)
                        if rid != "*" and t is not None and t.facts.role != "runtime":
                            _fail(
                                lc,
                                failed,
                                f"$.runtimeCompat.{group}[{i}]",
                                f"{rid!r} is not a runtime capability",
                            )
                            del accepted[cid]
                            changed = True
                            break
                    if changed:
                        break
            if changed:
                break
    cycle = _find_cycle({cid: lc.facts.requires for cid, lc in accepted.items()})
    while cycle:
        victim = accepted.pop(cycle[-1])
        _fail(victim, failed, "$.requires", "requires cycle: " + " -> ".join([*cycle, cycle[0]]))
        cycle = _find_cycle({cid: lc.facts.requires for cid, lc in accepted.items()})


def _find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        color[n] = 1
        stack.append(n)
        for m in graph.get(n, ()):
            if m not in graph:
                continue
            if color.get(m) == 1:
                return stack[stack.index(m) :]
            if color.get(m) is None:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        color[n] = 2
        return None

    for n in sorted(graph):
        if color.get(n) is None:
            found = visit(n)
            if found:
                return found
    return None


# --------------------------------------------------------------------------- per point


def _entries(registry: Registry, point: str, group: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for cid in sorted(registry.capabilities):
        for entry in registry.capabilities[cid].data.get(group) or ():
            if entry.get("point") == point:
                out.append((cid, entry))
    return out


def order_entries(entries: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Kahn's topological sort on produces→consumes, ties broken by capId.

    The ready queue starts sorted by capId; entries that become ready later are appended in
    the order they are released (FIFO, not re-sorted). This is the reference's behaviour and the
    conformance goldens pin it (`ui` before `pattern-mapper` at plan:pre)."""
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
        stuck = sorted({entries[i][0] for i in range(n) if i not in set(out)})
        raise _OrderCycle(stuck)
    return [entries[i] for i in out]


class _OrderCycle(Exception):
    def __init__(self, cap_ids: list[str]):
        super().__init__(", ".join(cap_ids))
        self.cap_ids = cap_ids


def _check_points(registry: Registry) -> None:
    """Duplicate producers and produces/consumes cycles at one point. The offending capability
    that was loaded last (an overlay before first-party) is dropped, and the check repeats."""
    from looprail.points import POINTS

    rank = {FIRST_PARTY: 0, GLOBAL: 1, PROJECT: 2}
    while True:
        problem = None
        for point in POINTS:
            for group in ("steps", "contributions"):
                entries = _entries(registry, point, group)
                # artifact → (capId, entry index): two entries, even of one capability, may not
                # produce the same artifact at one point.
                producers: dict[str, tuple[str, int]] = {}
                for n, (cid, e) in enumerate(entries):
                    for art in e.get("produces") or ():
                        if art in producers and producers[art][1] != n:
                            first = producers[art][0]
                            problem = (
                                [first, cid],
                                f"$.{group}",
                                f"{art!r} at {point} is also produced by {first!r}",
                            )
                            break
                        producers[art] = (cid, n)
                    if problem:
                        break
                if problem:
                    break
                try:
                    order_entries(entries)
                except _OrderCycle as exc:
                    problem = (
                        exc.cap_ids,
                        f"$.{group}",
                        f"produces/consumes cycle at {point} among {', '.join(exc.cap_ids)}",
                    )
                    break
            if problem:
                break
        if problem is None:
            return
        ids, path, reason = problem
        victim_id = max(ids, key=lambda c: (rank[registry.capabilities[c].origin], ids.index(c)))
        victim = registry.capabilities.pop(victim_id)
        _fail(victim, registry.failed, path, reason)


def apply_activation(registry: Registry, config: Mapping[str, Any] | None) -> None:
    """Set `active` from each capability's `activationKey` (consent is applied by `trust`)."""
    from looprail.hooks.resolve import key_active

    schema = config_types_of(registry)
    for lc in registry.capabilities.values():
        key = lc.facts.activationKey
        if not key_active(key, config, schema):
            lc.active = False
            lc.inactive_reason = f"activationKey {key!r} is not truthy"


def config_schema_of(registry: Registry) -> dict[str, Any]:
    """Declared defaults of every federated config key: {key: default}."""
    return {k: spec["default"] for k, spec in config_types_of(registry).items()}


def config_types_of(registry: Registry) -> dict[str, dict[str, Any]]:
    """Every federated config key as the resolver types it: {key: {type, default, values?}}."""
    out: dict[str, dict[str, Any]] = {}
    for lc in registry.capabilities.values():
        for k, spec in lc.facts.config.items():
            entry: dict[str, Any] = {"type": spec["type"], "default": spec.get("default")}
            if spec.get("values") is not None:
                entry["values"] = list(spec["values"])
            out[k] = entry
    return out


def resolve_key(key: str, config: Mapping[str, Any] | None, schema: Mapping[str, Any]) -> Any:
    """The effective value of `key` (see `config.effective_value`), false when absent. `schema`
    is `config_types_of(registry)`."""
    from looprail.config import MISSING, effective_value

    value = effective_value(key, config, schema)
    return False if value is MISSING else value


# --------------------------------------------------------------------------- compilation


_STEP_FIELDS = ("ref", "fragment", "when", "produces", "consumes", "onError")
_CONTRIBUTION_FIELDS = ("into", "fragment", "when", "produces", "consumes", "onError")
_GATE_FIELDS = ("when", "check", "blocking", "onError")
_ONLY_IF_NON_EMPTY = ("produces", "consumes")


def _project(cid: str, kind: str, entry: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The envelope form of one declaration: capId, kind, then only the fields present."""
    hook: dict[str, Any] = {"capId": cid, "kind": kind}
    for f in fields:
        if entry.get(f) is None:  # absent, or null: the reference emits only what is set
            continue
        if f in _ONLY_IF_NON_EMPTY and not entry[f]:
            continue
        hook[f] = entry[f]
    return hook


def compile_registry(registry: Registry) -> CompiledRegistry:
    """Plain-JSON form of the merged registry: what the resolver needs and nothing else."""
    from looprail.points import POINTS

    caps = {
        cid: {
            "role": lc.facts.role,
            "origin": lc.origin,
            "source": str(lc.source),
            # Loaded: only consent switches a compiled capability off (`trust.compiled_consent`);
            # its `activationKey` is the resolver's, per call (`resolve.cap_active`), so the
            # compiled form is the same under any config.
            "active": True,
            "activationKey": lc.facts.activationKey,
            "inactiveReason": None,
        }
        for cid, lc in registry.capabilities.items()
    }
    points: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for point in POINTS:
        steps = []
        for cid, e in order_entries(_entries(registry, point, "steps")):
            hook = _project(cid, "step", e, _STEP_FIELDS)
            if e.get("supportsReviewerLanes") is True:
                hook["supportsReviewerLanes"] = True
            if "pointFrom" in e:
                hook["$pointFrom"] = e["pointFrom"]
            steps.append(hook)
        contributions = []
        for cid, e in order_entries(_entries(registry, point, "contributions")):
            hook = _project(cid, "contribution", e, _CONTRIBUTION_FIELDS)
            if e.get("configValues"):
                hook["configValues"] = dict(e["configValues"])
            contributions.append(hook)
        gates = [
            _project(cid, "gate", e, _GATE_FIELDS)
            for cid, e in sorted(_entries(registry, point, "gates"), key=lambda ce: ce[0])
        ]
        points[point] = {"steps": steps, "contributions": contributions, "gates": gates}
    return {
        "caps": caps,
        "defaults": config_schema_of(registry),
        "config": config_types_of(registry),
        "points": points,
        "failed": [
            {
                "id": f.id,
                "file": f.file,
                "origin": f.origin,
                "issues": [str(i) for i in f.issues],
                "gatePoints": f.gate_points,
            }
            for f in registry.failed
        ],
        "warnings": list(registry.warnings),
    }


def fragment_dependencies(registry: Registry) -> list[str]:
    """Paths whose change can change a compiled fragment (the cache watches them).

    For every `fragment.path` declared by a loaded *or failed* capability: each folder on the way
    to it and the path itself (so a retargeted symlink or a fragment that appears later is seen;
    a missing path is watched as missing), then the real file behind symlinks and its folder."""
    import os

    sources = [(lc.source, lc.data) for lc in registry.capabilities.values()]
    for failed in registry.failed:
        try:
            data = json.loads(Path(failed.file).read_bytes())
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict):
            sources.append((Path(failed.file).parent, data))
    out: dict[str, None] = {}
    for folder, data in sources:
        base = os.path.abspath(folder)
        for group in ("steps", "contributions"):
            entries = data.get(group)
            for e in entries if isinstance(entries, list) else ():
                frag = e.get("fragment") if isinstance(e, dict) else None
                rel = frag.get("path") if isinstance(frag, dict) else None
                if not isinstance(rel, str) or not rel or "\0" in rel:
                    continue
                target = os.path.normpath(os.path.join(base, rel))
                if os.path.commonpath([base, target]) != base or target == base:
                    continue  # refused by validation, never read
                current = base
                for part in os.path.relpath(target, base).split(os.sep):
                    current = os.path.join(current, part)
                    out[current] = None
                real = os.path.realpath(target)
                out[real] = None
                out[os.path.dirname(real)] = None
    return list(out)
