"""The capability set on the `render-hooks` hot path: find it in the on-disk cache or load it.

Only `os`, `json` and `time` here (no typing, pydantic): a host calls
`render-hooks` many times per loop and process start-up is most of its cost. The cache entry
records the stat signature (mtime, ctime, size, inode) of every folder, manifest and fragment it
was built from (and of the modules that compile it); any difference rebuilds it. A fragment's
path is only known once its manifest is read, so it is stat'ed after the build: when its last
change is older than the build, that stat is the content's and one build is enough; otherwise
the entry is built twice around the stat and written only when both builds agree. The file
carries a checksum and holds the set's own JSON form (`CapabilitySet.to_json`), checked by
`CapabilitySet.from_json` on read. Writing is atomic (temp
file + rename), and a cache that cannot be read, is damaged or cannot be written only costs
speed, never correctness.
"""

from __future__ import annotations

import json
import os
import time
import zlib

from looprail.fsutil import read_bounded
from looprail.hooks.capset import DEFERRED, CapabilitySet
from looprail.hooks.sources import (
    PROJECT,
    RULE_FILES,
    capability_folders,
    new_temp_file,
    root_specs,
)
from looprail.layout import cache_dir

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing is not imported at run time on this path
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

    # How a caller applies consent to the set: (caps, home, env) -> caps. The hooks layer
    # never imports the trust layer; `looprail.trust.load_compiled` passes `trust.apply_consent`.
    ConsentFn = Callable[[CapabilitySet, Any, Mapping[str, str]], CapabilitySet]

# Bump whenever the set's JSON form or the rules that produce it change.
CACHE_FORMAT = "looprail-registry-10"


def _sig(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]


_RACY_NS = 50_000_000  # file times tick coarsely; a change this close to the read is suspect


def _settled(sig: list[int] | None, read_ns: int) -> bool:
    return sig is None or max(sig[0], sig[1]) < read_ns - _RACY_NS


def _dependencies(specs: list[tuple[str, str]]) -> dict[str, list[int] | None]:
    deps: dict[str, list[int] | None] = {path: _sig(path) for path in RULE_FILES}
    for root, _ in specs:
        deps[root] = _sig(root)
        for folder in capability_folders(root):
            deps[folder] = _sig(folder)
            manifest = os.path.join(folder, "capability.json")
            deps[manifest] = _sig(manifest)
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
    changed.

    `consent` decides which project-overlay capabilities the user agreed to; without one they
    all stay inactive (fail closed). `looprail.load_compiled` (= `looprail.trust.load_compiled`)
    is this with the user's consent store applied.

    Activation by `activationKey` is not part of the set: it depends on config, which the
    resolver reads per call."""
    env = os.environ if env is None else env
    specs = root_specs(project, capability_dirs, env=env, home=home)
    specs = [(os.path.abspath(p), origin) for p, origin in specs]
    if env.get("LOOPRAIL_NO_CACHE"):
        use_cache = False
    key = json.dumps([CACHE_FORMAT, specs])
    cache_file = os.path.join(cache_dir(env), f"registry-{zlib.crc32(key.encode()):08x}.json")
    deps = _dependencies(specs)
    if use_cache:
        cached = _read(cache_file, key, deps)
        if cached is not None:
            return _with_consent(cached, home, env, consent)
    # not at the top: the render-hooks entry loads this module (its import budget)
    from pathlib import Path

    from looprail.hooks import registry as reg

    roots = [reg.Root(Path(p), o) for p, o in specs]
    read_ns = time.time_ns()  # before any read: the racy-stat rule below
    fresh = reg.load_registry(project, roots=roots, env=env, use_cache=use_cache)
    caps = _defer_project_fragments(fresh)
    if use_cache:
        fragments = reg.fragment_dependencies(fresh)
        for path in fragments:
            deps[path] = _sig(path)
        # A fragment is stat'ed after it was read. Its stat is that content's when the file's
        # last change is older than the read (git's "racy clean" rule, with a margin for coarse
        # file clocks): then one build is enough, the common case.
        if all(_settled(deps[path], read_ns) for path in fragments):
            _write(cache_file, {"key": key, "deps": deps, "caps": caps.to_json()})
            return _with_consent(caps, home, env, consent)
        # Changed around the read: read again, so an edit between the first read and the
        # stat is never recorded with the old content and served until the next change.
        again = reg.load_registry(project, roots=roots, env=env, use_cache=use_cache)
        if reg.fragment_dependencies(again) == fragments and again == fresh:
            _write(cache_file, {"key": key, "deps": deps, "caps": caps.to_json()})
    return _with_consent(caps, home, env, consent)


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


def _deferred(frag: dict[str, Any]) -> dict[str, Any] | None:
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
    """Read the deferred fragments of consented project capabilities (as the manifest loader
    does: inside the folder after symlinks, a regular file, at most 8 MiB of UTF-8). A fragment
    that cannot be read keeps its path only (the envelope says it is not rendered)."""
    read: dict[str, str | None] = {}
    changed = {}
    for cid, lc in caps.capabilities.items():
        if lc.consent is not True:
            continue
        folder = os.path.realpath(lc.source)

        def materialised(frag: dict[str, Any], folder: str = folder) -> dict[str, Any] | None:
            if frag.get(DEFERRED) is not True:
                return None
            target = os.path.realpath(os.path.join(folder, frag["path"]))
            if target not in read:
                read[target] = _read_fragment(folder, target)
            text = read[target]
            return (
                {"path": frag["path"]} if text is None else {"inline": text, "path": frag["path"]}
            )

        data = _with_fragments(lc.data, materialised)
        if data is not lc.data:
            changed[cid] = lc._replace(data=data)
    return caps.replacing(changed)


def _read_fragment(folder: str, target: str) -> str | None:
    if os.path.commonpath([folder, target]) != folder or target == folder:
        return None
    try:
        data = read_bounded(target, 8 * 1024 * 1024)
        return None if data is None else data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _read(cache_file: str, key: str, deps: dict[str, list[int] | None]) -> CapabilitySet | None:
    try:
        with open(cache_file, "rb") as fh:
            raw = fh.read()
        header, sep, body = raw.partition(b"\n")
        if not sep or header != _header(body):
            return None  # damaged or written by another format: rebuild
        blob = json.loads(body)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(blob, dict) or blob.get("key") != key:
        return None
    stored = blob.get("deps")
    if not isinstance(stored, dict):
        return None
    for path, sig in deps.items():
        if stored.get(path, "absent") != sig:
            return None
    for path, sig in stored.items():
        if path not in deps and _sig(path) != sig:
            return None
    try:
        return CapabilitySet.from_json(blob.get("caps"))
    except ValueError:
        return None


def _header(body: bytes) -> bytes:
    return f"{CACHE_FORMAT} {zlib.crc32(body):08x}".encode()


def _write(cache_file: str, blob: dict[str, Any]) -> None:
    body = json.dumps(blob, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    try:
        os.makedirs(os.path.dirname(cache_file), exist_ok=True)
        fd, tmp = new_temp_file(os.path.dirname(cache_file), ".registry-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_header(body) + b"\n" + body)
            os.replace(tmp, cache_file)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a cache that cannot be written only costs speed
