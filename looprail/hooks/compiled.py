"""The capability set, from the one on-disk cache or loaded.

The cache entry is the set's own plain-data form (`CapabilitySet.to_json`, written with
`marshal`). It records the stat signature (mtime, ctime, size, inode) of every folder, manifest
and fragment the set was built from, and looprail's code stamp (`code_stamp`: the version and
the stat of the code); any difference rebuilds it. A cache that cannot be read, is damaged or
cannot be written only costs speed, never correctness. This is looprail's only cache.
"""

from __future__ import annotations

import json
import marshal
import os
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from looprail._version import __version__
from looprail.fsutil import read_private, settled, stat_sig
from looprail.hooks.capset import CapabilitySet
from looprail.hooks.sources import (
    DEFERRED,
    PROJECT,
    capability_folders,
    read_checked,
    root_specs,
    write_checked,
)
from looprail.layout import cache_dir

# How a caller applies consent to the set: (caps, home, env) -> caps. The hooks layer
# never imports the trust layer; `looprail.trust.load_compiled` passes `trust.apply_consent`.
ConsentFn = Callable[[CapabilitySet, Any, Mapping[str, str]], CapabilitySet]

# Bump whenever the set's JSON form or the rules that produce it change.
CACHE_FORMAT = "looprail-registry-13"
# Far above any set the fragment limits admit (64 MiB of fragment text over a search path).
MAX_ENTRY_BYTES = 256 << 20
# The looprail package: its modules are the code the set is built by.
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def code_stamp() -> list[object]:
    """looprail's version and the stat of its code: an upgrade, a reinstall or an edit in a
    development checkout is a new stamp.

    Installed by a package manager (the package sits in a `site-packages` folder), the code
    changes only by a reinstall, which replaces the package's files and so changes its folder's
    stat. Anywhere else (a checkout, a folder on PYTHONPATH) a module may be edited in place,
    so every `.py` file counts, and no list of "the files that matter" is kept by hand (one
    missing from it would serve a stale set)."""
    if os.path.basename(os.path.dirname(PACKAGE)) in ("site-packages", "dist-packages"):
        return [__version__, stat_sig(PACKAGE)]
    sigs: list[object] = []
    folders = [PACKAGE]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".py"):
                sigs.append((entry.path, stat_sig(entry.path)))
            elif entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
    return [__version__, zlib.crc32(repr(sigs).encode())]


def _dependencies(specs: list[tuple[str, str]]) -> dict[str, list[int] | None]:
    deps: dict[str, list[int] | None] = {}
    for root, _ in specs:
        deps[root] = stat_sig(root)
        for folder in capability_folders(root):
            deps[folder] = stat_sig(folder)
            manifest = os.path.join(folder, "capability.json")
            deps[manifest] = stat_sig(manifest)
    return deps


def load_compiled(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    *,
    env: Mapping[str, str] | None = None,
    home: str | Path | None = None,
    use_cache: bool = True,
    consent: ConsentFn | None = None,
) -> CapabilitySet:
    """The capability set of the search path (`registry.load_registry`), cached when nothing
    changed (`LOOPRAIL_NO_CACHE` or `use_cache=False`: always loaded, nothing written).

    `consent` decides which project-overlay capabilities the user agreed to; without one they
    all stay inactive (fail closed). `looprail.load_compiled` (= `looprail.trust.load_compiled`)
    is this with the user's consent store applied.

    Activation by `activationKey` is not part of the set: it depends on config, which the
    resolver reads per call."""
    env = os.environ if env is None else env
    key, cache_file, specs, deps = _locate(project, capability_dirs, env, home)
    use_cache = use_cache and not env.get("LOOPRAIL_NO_CACHE")
    stamp = code_stamp() if use_cache else None
    caps = _read_entry(cache_file, key, stamp, deps) if use_cache else None
    if caps is None:
        caps, cacheable = _build(project, specs, env, use_cache, deps)
        if cacheable:
            _write(cache_file, key, stamp, deps, caps)
    return _with_consent(caps, home, env, consent)


def _locate(
    project: str | Path,
    capability_dirs: Sequence[str | Path],
    env: Mapping[str, str],
    home: str | Path | None,
) -> tuple[str, str, list[tuple[str, str]], dict[str, list[int] | None]]:
    """(key, cache file, search path, the stat signatures of what it is built from now)."""
    specs = root_specs(project, capability_dirs, env=env, home=home)
    specs = [(os.path.abspath(p), origin) for p, origin in specs]
    key = json.dumps([CACHE_FORMAT, specs])
    cache_file = os.path.join(cache_dir(env), f"registry-{zlib.crc32(key.encode()):08x}.bin")
    return key, cache_file, specs, _dependencies(specs)


def _build(
    project: str | Path,
    specs: list[tuple[str, str]],
    env: Mapping[str, str],
    use_cache: bool,
    deps: dict[str, list[int] | None],
) -> tuple[CapabilitySet, bool]:
    """Load the set; with `use_cache`, add each fragment's stat to `deps` (taken before the
    read, like the rest) and say whether those stats are the content's (then it may be cached)."""
    # not at the top: the registry and the validation it runs are only needed on a miss
    from looprail.hooks import registry as reg

    roots = [reg.Root(p, o) for p, o in specs]
    read_ns = time.time_ns()  # before any read: the racy-stat rule below
    fresh = reg.load_registry(project, roots=roots, env=env)
    caps = _defer_project_fragments(fresh)
    if not use_cache:
        return caps, False
    fragments = reg.fragment_dependencies(fresh)
    deps.update((path, stat_sig(path)) for path in fragments)
    # A fragment is stat'ed after it was read. Its stat is that content's when the file's last
    # change is older than the read (git's "racy clean" rule, with a margin for coarse file
    # clocks): then one build is enough, the common case. Otherwise read again, so an edit
    # between the first read and the stat is never recorded with the old content.
    if all(settled(deps[path], read_ns) for path in fragments):
        return caps, True
    again = reg.load_registry(project, roots=roots, env=env)
    return caps, reg.fragment_dependencies(again) == fragments and again == fresh


# Why a project capability is inactive when the caller supplied no consent function.
CONSENT_NOT_CHECKED = "consent not checked (load it through looprail.load_compiled)"


def _with_consent(
    caps: CapabilitySet, home: Any, env: Mapping[str, str], consent: ConsentFn | None
) -> CapabilitySet:
    """Consent is applied at read time, never cached: it changes without any manifest change
    (`looprail trust`/`revoke`, an edited file in a capability folder). Only project-overlay
    capabilities need consent, so `consent` is called only when there are some."""
    project = {cid: lc for cid, lc in caps.capabilities.items() if lc.origin == PROJECT}
    if not project:
        return caps
    if consent is None:
        caps = caps.replacing(
            {
                cid: lc._replace(consent=False, inactive_reason=CONSENT_NOT_CHECKED)
                for cid, lc in project.items()
            }
        )
    else:
        caps = consent(caps, home, env)
    return _materialise_deferred(caps)


# A project capability's fragment text is neither cached nor held for one without consent:
# its data keeps only the fragment's path (`$deferred`), and the text is read at use time for
# a consented capability. An unconsented project can then not fill the cache or memory.


def _defer_project_fragments(caps: CapabilitySet) -> CapabilitySet:
    changed = {}
    for cid, lc in caps.capabilities.items():
        if lc.origin != PROJECT:
            continue
        data = _with_fragments(lc.data, _deferred)
        if data is not lc.data:
            changed[cid] = lc._replace(data=data)
    return caps.replacing(changed)


def _deferred(frag: Mapping[str, Any]) -> dict[str, object] | None:
    if "inline" in frag and isinstance(frag.get("path"), str):
        return {"path": frag["path"], DEFERRED: True}
    return None


def _with_fragments(data: dict[str, Any], change: Callable[..., Any]) -> dict[str, Any]:
    """`data` with each step's and contribution's fragment replaced by `change(fragment)` where
    that is not None (a new dict then; `data` itself when nothing changed)."""
    out = data
    for group in ("steps", "contributions"):
        entries = data.get(group) or ()
        for i, entry in enumerate(entries):
            frag = entry.get("fragment")
            new = change(frag) if isinstance(frag, dict) else None
            if new is None:
                continue
            if out is data:
                out = dict(data)
            if out[group] is entries:
                out[group] = list(entries)
            out[group][i] = {**entry, "fragment": new}
    return out


def _materialise_deferred(caps: CapabilitySet) -> CapabilitySet:
    """Read the deferred fragments of consented project capabilities, by the manifest loader's
    rule (`manifest.materialise_fragment`). A fragment that cannot be read keeps its path
    only (the envelope says it is not rendered)."""
    # Here, not at the top: the manifest module is pydantic's, which a set read from the cache
    # (every `render-hooks` call) needs only when it has consented project capabilities.
    from looprail.hooks.manifest import materialise_fragment

    read: dict[str, str | None] = {}
    changed = {}
    for cid, lc in caps.capabilities.items():
        if lc.consent is not True:
            continue

        def materialised(
            frag: Mapping[str, Any], folder: str = lc.source
        ) -> dict[str, object] | None:
            if frag.get(DEFERRED) is not True:
                return None
            target = os.path.realpath(os.path.join(folder, frag["path"]))
            if target not in read:
                read[target] = materialise_fragment(Path(folder), frag["path"])[0]
            text = read[target]
            return (
                {"path": frag["path"]} if text is None else {"inline": text, "path": frag["path"]}
            )

        data = _with_fragments(lc.data, materialised)
        if data is not lc.data:
            changed[cid] = lc._replace(data=data)
    return caps.replacing(changed)


def _read_entry(
    cache_file: str, key: str, stamp: list[object] | None, deps: dict[str, list[int] | None]
) -> CapabilitySet | None:
    """The set in `cache_file` when the entry is for `key`, was written by this code (`stamp`)
    and was built from the files as they are (`deps`, and the fragments it recorded); else None."""
    # Only a regular file of this user's that nobody else can write: an entry says which
    # hooks run, so one planted in a shared cache folder is never read.
    raw = read_private(cache_file, MAX_ENTRY_BYTES)
    body = None if raw is None else read_checked(raw, CACHE_FORMAT)
    if body is None:  # absent, not ours, damaged or another format
        return None
    try:
        # The CRC keeps damage away from `marshal` (which is not meant for damaged bytes); a
        # checksummed file of another shape is refused below.
        blob = marshal.loads(body)
    except (ValueError, EOFError, TypeError, RecursionError):
        return None
    if not (isinstance(blob, tuple) and len(blob) == 4 and blob[0] == key and blob[1] == stamp):
        return None
    _, _, stored, data = blob
    if not isinstance(stored, dict):
        return None
    for path, sig in deps.items():
        if stored.get(path, "absent") != sig:
            return None
    for path, sig in stored.items():
        if path not in deps and stat_sig(path) != sig:
            return None
    try:
        return CapabilitySet.from_json(data)
    except ValueError:  # not a set this looprail wrote
        return None


def _write(
    cache_file: str,
    key: str,
    stamp: list[object] | None,
    deps: dict[str, list[int] | None],
    caps: CapabilitySet,
) -> None:
    """Cache the set; a cache that cannot be written only costs speed."""
    body = marshal.dumps((key, stamp, deps, caps.to_json()))
    try:
        os.makedirs(os.path.dirname(cache_file), exist_ok=True)
        write_checked(cache_file, CACHE_FORMAT, body)
    except OSError:
        pass
