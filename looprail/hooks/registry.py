"""The capability registry: load the capability folders of the search path (`sources.root_specs`,
in trust order: the first of an id wins), merge and validate them into one `CapabilitySet`. An
invalid capability is never fatal for the loop: it is recorded as failed with its issues (and
the points of the gates it declared: fail open, loudly)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from looprail.errors import Issue
from looprail.hooks.capset import (
    CapabilitySet,
    FailedCapability,
    LoadedCapability,
    Root,
    Shadowed,
    _OrderCycle,
    entries_at,
    order_entries,
)
from looprail.hooks.manifest import RESERVED_PREFIXES, validate_manifest
from looprail.hooks.sources import FIRST_PARTY, ORIGIN_RANK, capability_folders, root_specs
from looprail.points import POINTS

# All fragment text of the whole search path, in search order (first-party first): a capability
# that would push it past this fails to load (each one is already at most 16 MiB).
MAX_REGISTRY_FRAGMENT_BYTES = 64 * 1024 * 1024
_OVER_BUDGET = (
    f"fragments of all capabilities would exceed {MAX_REGISTRY_FRAGMENT_BYTES} bytes with this "
    "one; not loaded"
)

_TIER_RANK = {"core": 0, "standard": 1, "full": 2}

# (what is claimed, the value, the JSON path of the claim)
_Claim = tuple[str, str, str]
# (the capabilities involved, the JSON path, the reason)
_Problem = tuple[list[str], str, str]


def search_roots(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[Root]:
    return [Root(*spec) for spec in root_specs(project, capability_dirs, env=env, home=home)]


def load_registry(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    roots: Sequence[Root] | None = None,
) -> CapabilitySet:
    """Load, validate and merge every capability on the search path. Never raises for bad
    manifests: they are returned in `failed` with every issue."""
    if roots is None:
        roots = search_roots(project, capability_dirs, env=env, home=home)
    failed: list[FailedCapability] = []
    warnings: list[str] = []
    candidates: list[LoadedCapability] = []
    missing: list[Root] = []
    fragment_total = 0
    for root in roots:
        if root.origin == FIRST_PARTY and not _exists(Path(root.path), dir=True):
            warnings.append(f"{root.path}: capability folder does not exist")
            missing.append(root)
            continue
        for folder in capability_folders(str(root.path)):
            loaded = _load(Path(folder), root.origin)
            if isinstance(loaded, LoadedCapability):
                size = _fragment_bytes(loaded.data)
                if fragment_total + size <= MAX_REGISTRY_FRAGMENT_BYTES:
                    fragment_total += size
                    candidates.append(loaded)
                    continue
                loaded = _failure(loaded, "$", _OVER_BUDGET)
            if loaded is not None:
                failed.append(loaded)
    shadowed: list[Shadowed] = []
    accepted = _merge(candidates, failed, warnings, shadowed)
    _check_points(accepted, failed)
    return CapabilitySet(
        accepted,
        tuple(failed),
        tuple(warnings),
        tuple(roots),
        missing_roots=tuple(missing),
        shadowed=tuple(shadowed),
    )


def _load(folder: Path, origin: str) -> LoadedCapability | FailedCapability | None:
    """The capability in `folder`, why it failed, or None when the folder holds no manifest."""
    manifest_path = folder / "capability.json"
    if not _exists(manifest_path, dir=False):
        return None
    file = str(manifest_path)
    try:
        raw = manifest_path.read_bytes()
    except OSError as exc:
        return FailedCapability(folder.name, file, origin, (Issue(file, "$", str(exc)),))
    # the model is built again from `data` when asked for (`LoadedCapability.manifest`)
    _, data, issues = validate_manifest(raw, file, folder)
    if data is not None and origin != FIRST_PARTY:
        prefix = next((p for p in RESERVED_PREFIXES if data["id"].startswith(p)), None)
        if prefix is not None:
            data = None
            issues = [Issue(file, "$.id", f"prefix {prefix!r} is reserved for first-party")]
    if data is None:
        return FailedCapability(folder.name, file, origin, tuple(issues), _gate_points(raw))
    return LoadedCapability(data, str(folder), origin)


def _fragment_bytes(data: Mapping[str, Any]) -> int:
    frags = [e.get("fragment") or {} for g in ("steps", "contributions") for e in data.get(g) or ()]
    return sum(len(f["inline"]) for f in frags if isinstance(f.get("inline"), str))


def _exists(path: Path, *, dir: bool) -> bool:
    """`is_dir()`/`is_file()` that answers False for a path the OS refuses (too long, say)."""
    try:
        return path.is_dir() if dir else path.is_file()
    except OSError:
        return False


def _gate_points(raw: bytes) -> tuple[str, ...]:
    """Points where a (failed) manifest declared gates, read as leniently as possible."""
    try:
        data = json.loads(raw)
        gates = data.get("gates") if isinstance(data, dict) else None
        points = {g["point"] for g in gates or () if isinstance(g, dict)}
        return tuple(sorted(p for p in points if isinstance(p, str)))
    except (ValueError, TypeError, RecursionError):
        return ()


def _failure(lc: LoadedCapability, path: str, reason: str) -> FailedCapability:
    file = lc.manifest_file
    return FailedCapability(lc.id, file, lc.origin, (Issue(file, path, reason),), lc.gate_points)


def _merge(
    candidates: list[LoadedCapability],
    failed: list[FailedCapability],
    warnings: list[str],
    shadowed: list[Shadowed],
) -> dict[str, LoadedCapability]:
    """The first capability of each id, unless it claims what an earlier one owns."""
    accepted: dict[str, LoadedCapability] = {}
    owners: dict[tuple[str, str], str] = {}
    for lc in candidates:
        first = accepted.get(lc.id)
        if first is not None:
            shadowed.append(Shadowed(lc.id, lc.source, lc.origin, first.source, first.origin))
            warnings.append(
                f"{lc.source}: capability {lc.id!r} is shadowed by the one in {first.source} "
                f"({first.origin} wins)"
            )
            continue
        claims = _claims(lc)
        clash = next(((k, v, p) for k, v, p in claims if (k, v) in owners), None)
        if clash:
            kind, value, path = clash
            owner = owners[(kind, value)]
            reason = f"{kind} {value!r} is already owned by capability {owner!r}"
            failed.append(_failure(lc, path, reason))
            continue
        owners.update(((kind, value), lc.id) for kind, value, _ in claims)
        accepted[lc.id] = lc
    _check_requires(accepted, failed)
    return accepted


def _claims(lc: LoadedCapability) -> list[_Claim]:
    """What a capability owns: no two loaded capabilities may claim the same."""
    data = lc.data
    claims = [("skill", s, f"$.skills[{i}]") for i, s in enumerate(data.get("skills") or ())]
    claims += [("agent", a, f"$.agents[{i}]") for i, a in enumerate(data.get("agents") or ())]
    claims += [("config key", k, f"$.config[{json.dumps(k)}]") for k in lc.config]
    claims += [
        ("command family", family, f"$.commands[{i}].family")
        for i, family in enumerate(c["family"] for c in data.get("commands") or ())
    ]
    if lc.tracker_prefix is not None:
        claims.append(("trackerPrefix", lc.tracker_prefix, "$.taskContentResolver.trackerPrefix"))
    reviewer = lc.reviewer
    if reviewer is not None:
        # One flag selecting two lanes, or two lanes writing one section, is ambiguous.
        claims.append(("reviewer slug", reviewer["slug"], "$.reviewer.slug"))
        claims += [
            ("reviewer flag", f, f"$.reviewer.flags[{i}]")
            for i, f in enumerate(dict.fromkeys(reviewer["flags"]))
        ]
        claims.append(("reviewsSection", reviewer["reviewsSection"], "$.reviewer.reviewsSection"))
    return claims


def _check_requires(accepted: dict[str, LoadedCapability], failed: list[FailedCapability]) -> None:
    """Drop each capability whose `requires` or `runtimeCompat` names what is not there (one at
    a time: dropping one can break another's), then each `requires` cycle."""
    while (broken := _broken_requirement(accepted)) is not None:
        cid, path, reason = broken
        failed.append(_failure(accepted.pop(cid), path, reason))
    while cycle := _find_cycle({cid: lc.requires for cid, lc in accepted.items()}):
        victim = accepted.pop(cycle[-1])
        reason = "requires cycle: " + " -> ".join([*cycle, cycle[0]])
        failed.append(_failure(victim, "$.requires", reason))


def _broken_requirement(accepted: Mapping[str, LoadedCapability]) -> tuple[str, str, str] | None:
    """The first capability (in load order) with a requirement that does not hold: its id, the
    JSON path and the reason."""
    for cid, lc in accepted.items():
        for i, req in enumerate(lc.requires):
            target = accepted.get(req)
            if target is None:
                return cid, f"$.requires[{i}]", f"requires {req!r}, which is not loaded"
            if _TIER_RANK[target.tier] > _TIER_RANK[lc.tier]:
                reason = f"tier {lc.tier!r} may not require {req!r} of tier {target.tier!r}"
                return cid, f"$.requires[{i}]", reason
        compat = lc.data.get("runtimeCompat") or {}
        for group in ("supported", "unsupported"):
            for i, rid in enumerate(compat.get(group) or ()):
                other = accepted.get(rid)
                if rid != "*" and other is not None and other.role != "runtime":
                    path = f"$.runtimeCompat.{group}[{i}]"
                    return cid, path, f"{rid!r} is not a runtime capability"
    return None


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
            if color.get(m) is None and (found := visit(m)):
                return found
        stack.pop()
        color[n] = 2
        return None

    for n in sorted(graph):
        if color.get(n) is None and (found := visit(n)):
            return found
    return None


def _check_points(caps: dict[str, LoadedCapability], failed: list[FailedCapability]) -> None:
    """Duplicate producers and produces/consumes cycles at one point. The offending capability
    that was loaded last (an overlay before first-party) is dropped, and the check repeats."""
    while (problem := _point_problem(caps)) is not None:
        ids, path, reason = problem
        victim_id = max(ids, key=lambda c: (ORIGIN_RANK[caps[c].origin], ids.index(c)))
        failed.append(_failure(caps.pop(victim_id), path, reason))


def _point_problem(caps: Mapping[str, LoadedCapability]) -> _Problem | None:
    for point in POINTS:
        for group in ("steps", "contributions"):
            entries = entries_at(caps, point, group)
            # artifact → (capId, entry index): two entries, even of one capability, may not
            # produce the same artifact at one point.
            producers: dict[str, tuple[str, int]] = {}
            for n, (cid, e) in enumerate(entries):
                for art in e.get("produces") or ():
                    if art in producers and producers[art][1] != n:
                        first = producers[art][0]
                        reason = f"{art!r} at {point} is also produced by {first!r}"
                        return [first, cid], f"$.{group}", reason
                    producers[art] = (cid, n)
            try:
                order_entries(entries)
            except _OrderCycle as exc:
                among = ", ".join(exc.cap_ids)
                return (
                    exc.cap_ids,
                    f"$.{group}",
                    f"produces/consumes cycle at {point} among {among}",
                )
    return None


def fragment_dependencies(registry: CapabilitySet) -> list[str]:
    """Paths whose change can change a compiled fragment (the cache watches them): for each
    `fragment.path` of a loaded *or failed* capability, each folder on the way and the path (so a
    retargeted symlink or a fragment that appears later is seen), the real file and its folder."""
    sources: list[tuple[Path, object]] = [
        (Path(lc.source), lc.data) for lc in registry.capabilities.values()
    ]
    for failed in registry.failed:
        try:
            sources.append((Path(failed.file).parent, json.loads(Path(failed.file).read_bytes())))
        except (OSError, ValueError, RecursionError):
            continue
    out: dict[str, None] = {}
    for folder, data in sources:
        base = os.path.abspath(folder)
        for rel in _fragment_paths(data):
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


def _fragment_paths(data: object) -> list[str]:
    """Each `fragment.path` of a manifest's steps and contributions, read leniently."""
    out = []
    for group in ("steps", "contributions"):
        entries = data.get(group) if isinstance(data, dict) else None
        for e in entries if isinstance(entries, list) else ():
            frag = e.get("fragment") if isinstance(e, dict) else None
            rel = frag.get("path") if isinstance(frag, dict) else None
            if isinstance(rel, str) and rel and "\0" not in rel:
                out.append(rel)
    return out
