"""The capability registry: load an ordered list of capability folders, merge them
(first-party wins) and validate the merged set into one `capset.CapabilitySet`.

`compiled.load_compiled` caches that set on disk (its JSON form), keyed by the exact stat of
every manifest, fragment and folder it was built from, so the `render-hooks` hot path reads one
file and never imports pydantic when nothing changed.

Search order (first wins on id collisions): `--capabilities DIR…`, then `LOOPRAIL_CAPABILITIES`
(os.pathsep-separated) — both first-party — then the global overlay `~/.looprail/capabilities`,
then the project overlay `<project>/.looprail/capabilities`. An invalid capability is never
fatal for the loop: it is recorded as failed with its issues (and, if it declared gates, the
points where a gate could not be evaluated — fail open, loudly).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from looprail.errors import Issue
from looprail.hooks import sources
from looprail.hooks.capset import (
    CapabilitySet,
    FailedCapability,
    LoadedCapability,
    Root,
    Shadowed,
    _OrderCycle,
    order_entries,
)
from looprail.hooks.sources import FIRST_PARTY, GLOBAL, PROJECT
from looprail.points import POINTS

# No `typing` at run time (this module is on the `render-hooks` rebuild path).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looprail.hooks.verdicts import VerdictCache


def search_roots(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[Root]:
    """The search path in trust order."""
    specs = sources.root_specs(project, capability_dirs, env=env, home=home)
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
    roots: Sequence[Root] | None = None,
    use_cache: bool = True,
) -> CapabilitySet:
    """Load, validate and merge every capability on the search path. Never raises for bad
    manifests: they are returned in `failed` with every issue.

    A manifest whose bytes (and folder name, and looprail's rules) were validated before takes
    its verdict from the validation cache (`hooks.verdicts`; off with `use_cache=False` or
    `LOOPRAIL_NO_CACHE`): only changed manifests are validated, and pydantic is imported only
    when one is."""
    # not at the top: the render-hooks entry loads this module (its import budget)
    from looprail.hooks.verdicts import VerdictCache

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
                    FailedCapability(folder.name, file, root.origin, (Issue(file, "$", str(exc)),))
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
                    FailedCapability(
                        folder.name, file, root.origin, tuple(issues), _gate_points(raw)
                    )
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
                        data["id"],
                        file,
                        root.origin,
                        (Issue(file, "$", reason),),
                        _gate_points(raw),
                    )
                )
                continue
            fragment_total += size
            candidates.append(LoadedCapability(data, folder, root.origin))
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


def _validated(
    raw: bytes, file: str, folder: Path, verdicts: VerdictCache
) -> tuple[dict[str, Any] | None, list[Issue]]:
    """`manifest.validate_manifest` without the model (built on demand, `LoadedCapability`),
    with the verdict taken from the cache when these bytes were validated before."""
    # not at the top: the render-hooks entry loads this module (its import budget)
    from looprail.hooks.manifest_io import _materialise_fragments, parse_manifest_bytes

    key = cached = None
    if verdicts.directory is not None:
        # not at the top: the render-hooks entry loads this module (its import budget)
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
    # not at the top: the render-hooks entry loads this module (its import budget)
    from looprail.hooks.manifest_io import RESERVED_PREFIXES

    return RESERVED_PREFIXES


def _gate_points(raw: bytes) -> tuple[str, ...]:
    """Points where a (failed) manifest declared gates, read as leniently as possible."""
    try:
        data = json.loads(raw)
        gates = data.get("gates") if isinstance(data, dict) else None
        return tuple(
            sorted(
                {
                    g["point"]
                    for g in gates or ()
                    if isinstance(g, dict) and isinstance(g.get("point"), str)
                }
            )
        )
    except (ValueError, TypeError, RecursionError):
        return ()


def _fail(lc: LoadedCapability, failed: list[FailedCapability], path: str, reason: str) -> None:
    failed.append(
        FailedCapability(
            lc.id,
            str(lc.manifest_file),
            lc.origin,
            (Issue(str(lc.manifest_file), path, reason),),
            lc.gate_points,
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
        m = lc
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
            m = lc
            for i, req in enumerate(m.requires):
                target = accepted.get(req)
                reason = None
                if target is None:
                    reason = f"requires {req!r}, which is not loaded"
                elif _TIER_RANK[target.tier] > _TIER_RANK[m.tier]:
                    reason = f"tier {m.tier!r} may not require {req!r} of tier {target.tier!r}"
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
                        if rid != "*" and t is not None and t.role != "runtime":
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
    cycle = _find_cycle({cid: lc.requires for cid, lc in accepted.items()})
    while cycle:
        victim = accepted.pop(cycle[-1])
        _fail(victim, failed, "$.requires", "requires cycle: " + " -> ".join([*cycle, cycle[0]]))
        cycle = _find_cycle({cid: lc.requires for cid, lc in accepted.items()})


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


def _entries(
    caps: Mapping[str, LoadedCapability], point: str, group: str
) -> list[tuple[str, dict[str, Any]]]:
    return [
        (cid, entry)
        for cid in sorted(caps)
        for entry in caps[cid].data.get(group) or ()
        if entry.get("point") == point
    ]


def _check_points(caps: dict[str, LoadedCapability], failed: list[FailedCapability]) -> None:
    """Duplicate producers and produces/consumes cycles at one point. The offending capability
    that was loaded last (an overlay before first-party) is dropped, and the check repeats."""
    rank = {FIRST_PARTY: 0, GLOBAL: 1, PROJECT: 2}
    while True:
        problem = None
        for point in POINTS:
            for group in ("steps", "contributions"):
                entries = _entries(caps, point, group)
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
        victim_id = max(ids, key=lambda c: (rank[caps[c].origin], ids.index(c)))
        _fail(caps.pop(victim_id), failed, path, reason)


def fragment_dependencies(registry: CapabilitySet) -> list[str]:
    """Paths whose change can change a compiled fragment (the cache watches them).

    For every `fragment.path` declared by a loaded *or failed* capability: each folder on the way
    to it and the path itself (so a retargeted symlink or a fragment that appears later is seen;
    a missing path is watched as missing), then the real file behind symlinks and its folder."""
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
