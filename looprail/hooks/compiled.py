"""The compiled registry on the `render-hooks` hot path: find it in the on-disk cache or build it.

Only `os`, `json` and `time` here (no pathlib, dataclasses, typing, pydantic): a host calls
`render-hooks` many times per loop and process start-up is most of its cost. The cache entry
records the stat signature (mtime, ctime, size, inode) of every folder, manifest and fragment it
was built from (and of the modules that compile it); any difference rebuilds it. A fragment's
path is only known once its manifest is read, so it is stat'ed after the build: when its last
change is older than the build, that stat is the content's and one build is enough; otherwise
the entry is built twice around the stat and written only when both builds agree. The file
carries a checksum and its shape is checked on read. Writing is atomic (temp
file + rename), and a cache that cannot be read, is damaged or cannot be written only costs
speed, never correctness.
"""

from __future__ import annotations

import json
import os
import time
import zlib

from looprail.fsutil import read_bounded
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
    from typing import Any, TypeGuard

    from looprail.hooks.registry import CompiledRegistry, Registry

    # How a caller applies consent to the compiled form: (compiled, home, env) -> compiled.
    # The hooks layer never imports the trust layer; `looprail.trust.load_compiled` passes
    # `trust.compiled_consent` here.
    ConsentFn = Callable[[CompiledRegistry, Any, Mapping[str, str]], CompiledRegistry]

# Bump whenever the compiled form or the rules that produce it change.
CACHE_FORMAT = "looprail-registry-9"


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
    registry: Registry | None = None,
) -> CompiledRegistry:
    """The compiled registry (see `registry.compile_registry`), cached when nothing changed.

    `consent` decides which project-overlay capabilities the user agreed to; without one they
    all stay inactive (fail closed). `looprail.load_compiled` (= `looprail.trust.load_compiled`)
    is this with the user's consent store applied.

    `registry`: the caller's `load_registry` of this very search path (its roots the absolute
    folders `root_specs` names, under any config: the compiled form does not depend on it). On
    a cache miss it is compiled instead of loading every manifest again, so a run loads its
    capabilities once. A registry of other roots is not used.

    Activation by `activationKey` is not baked in: it depends on config, which the resolver
    reads per call. Only merge, validation, ordering and fragment materialisation are cached."""
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
    from pathlib import Path

    from looprail.hooks import registry as reg

    roots = [reg.Root(Path(p), o) for p, o in specs]
    if registry is None or registry.roots != roots:
        started_ns = time.time_ns()
        registry = reg.load_registry(project, roots=roots, env=env, use_cache=use_cache)
        read_first = False
    else:
        started_ns = registry.loaded_ns
        read_first = True  # the caller read the manifests before `deps` stat'ed them
    compiled = reg.compile_registry(registry)
    fresh = compiled
    compiled = _defer_project_fragments(compiled)
    if use_cache:
        fragments = reg.fragment_dependencies(registry)
        for path in fragments:
            deps[path] = _sig(path)
        # A fragment is stat'ed after it was read (and so is every file of a registry the
        # caller loaded). Its stat is that content's when the file's last change is older than
        # the read (git's "racy clean" rule, with a margin for coarse file clocks): then one
        # build is enough, the common case.
        stat_after_read = list(deps) if read_first else fragments
        if all(_settled(deps[path], started_ns) for path in stat_after_read):
            _write(cache_file, {"key": key, "deps": deps, "compiled": compiled})
            return _with_consent(compiled, home, env, consent)
        # Changed around the read: read again, so an edit between the first read and the
        # stat is never recorded with the old content and served until the next change.
        again = reg.load_registry(project, roots=roots, env=env, use_cache=use_cache)
        if reg.fragment_dependencies(again) == fragments and reg.compile_registry(again) == fresh:
            _write(cache_file, {"key": key, "deps": deps, "compiled": compiled})
    return _with_consent(compiled, home, env, consent)


# Why a project capability is inactive when the caller supplied no consent function.
CONSENT_NOT_CHECKED = "consent not checked (load it through looprail.load_compiled)"


def _with_consent(
    compiled: CompiledRegistry, home: Any, env: Mapping[str, str], consent: ConsentFn | None
) -> CompiledRegistry:
    """Consent is applied at read time, never cached: it changes without any manifest change
    (`looprail trust`/`revoke`, an edited file in a capability folder). Only project-overlay
    capabilities need consent, so `consent` is called only when there are some."""
    caps = compiled.get("caps") or {}
    if not any(c.get("origin") == PROJECT for c in caps.values()):
        return compiled
    if consent is None:
        for cap in caps.values():
            if cap.get("origin") == PROJECT:
                cap.update(consent=False, active=False, inactiveReason=CONSENT_NOT_CHECKED)
    else:
        compiled = consent(compiled, home, env)
    _materialise_deferred(compiled)
    return compiled


# A project capability's fragment text is neither cached nor held for one without consent:
# the compiled form keeps only its path (`$deferred`), and the text is read at use time for a
# consented capability. An unconsented project can then not fill the cache or memory.
_DEFERRED = "$deferred"


def _defer_project_fragments(compiled: CompiledRegistry) -> CompiledRegistry:
    caps: dict[Any, dict[str, Any]] = compiled.get("caps") or {}  # looked up by any capId
    for table in (compiled.get("points") or {}).values():
        for group in ("steps", "contributions"):
            for i, hook in enumerate(table.get(group) or ()):
                frag = hook.get("fragment")
                if (
                    isinstance(frag, dict)
                    and "inline" in frag
                    and isinstance(frag.get("path"), str)
                    and (caps.get(hook.get("capId")) or {}).get("origin") == PROJECT
                ):
                    hook = dict(hook)
                    hook["fragment"] = {"path": frag["path"], _DEFERRED: True}
                    table[group][i] = hook
    return compiled


def _materialise_deferred(compiled: CompiledRegistry) -> None:
    """Read the deferred fragments of consented project capabilities (as the manifest loader
    does: inside the folder after symlinks, a regular file, at most 8 MiB of UTF-8)."""
    caps: dict[Any, dict[str, Any]] = compiled.get("caps") or {}  # looked up by any capId
    read: dict[str, str | None] = {}
    for table in (compiled.get("points") or {}).values():
        for group in ("steps", "contributions"):
            for i, hook in enumerate(table.get(group) or ()):
                frag = hook.get("fragment")
                if not (isinstance(frag, dict) and frag.get(_DEFERRED)):
                    continue
                cap = caps.get(hook.get("capId")) or {}
                if cap.get("consent") is not True:
                    continue
                folder = os.path.realpath(cap.get("source") or "")
                target = os.path.realpath(os.path.join(folder, frag["path"]))
                if target not in read:
                    read[target] = _read_fragment(folder, target)
                text = read[target]
                if text is not None:
                    hook = dict(hook)
                    hook["fragment"] = {"inline": text, "path": frag["path"]}
                    table[group][i] = hook


def _read_fragment(folder: str, target: str) -> str | None:
    if os.path.commonpath([folder, target]) != folder or target == folder:
        return None
    try:
        data = read_bounded(target, 8 * 1024 * 1024)
        return None if data is None else data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _read(cache_file: str, key: str, deps: dict[str, list[int] | None]) -> CompiledRegistry | None:
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
    compiled = blob.get("compiled")
    return compiled if _well_formed(compiled) else None


def _header(body: bytes) -> bytes:
    return f"{CACHE_FORMAT} {zlib.crc32(body):08x}".encode()


def _well_formed(compiled: Any) -> TypeGuard[CompiledRegistry]:
    """The shape `resolve` and the CLI index into, so a damaged entry is rebuilt, not a crash."""
    from looprail.points import POINTS

    if not isinstance(compiled, dict):
        return False
    caps, points = compiled.get("caps"), compiled.get("points")
    if not (
        isinstance(caps, dict)
        and all(isinstance(c, dict) for c in caps.values())
        and isinstance(compiled.get("defaults"), dict)
        and isinstance(compiled.get("config"), dict)
        and all(isinstance(s, dict) and "type" in s for s in compiled["config"].values())
        and isinstance(points, dict)
        and isinstance(compiled.get("failed"), list)
        and isinstance(compiled.get("warnings"), list)
    ):
        return False
    for point in POINTS:
        table = points.get(point)
        if not isinstance(table, dict):
            return False
        for group in ("steps", "contributions", "gates"):
            entries = table.get(group)
            if not isinstance(entries, list) or not all(
                isinstance(e, dict) and e.get("capId") in caps and isinstance(e.get("kind"), str)
                for e in entries
            ):
                return False
    return all(
        isinstance(f, dict)
        and isinstance(f.get("id"), str)
        and isinstance(f.get("origin"), str)
        and isinstance(f.get("issues"), list)
        and isinstance(f.get("gatePoints"), list)
        for f in compiled["failed"]
    )


def _write(cache_file: str, blob: dict[str, Any]) -> None:
    body = json.dumps(blob, ensure_ascii=False).encode("utf-8")
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
