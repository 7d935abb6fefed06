"""The light half of manifest handling: hostile-safe JSON parsing, fragment materialisation and
the limits, with no pydantic (the `render-hooks` cache-miss path reads manifests whose
validation verdict is cached; `looprail.hooks.manifest` validates the ones that changed).
"""

from __future__ import annotations

import errno
import json
import os

from looprail.errors import Issue, json_path
from looprail.fsutil import read_bounded

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing is not imported at run time on this path
    from pathlib import Path
    from typing import Any

FORBIDDEN_KEYS = frozenset({"__proto__", "constructor", "prototype"})
# Id prefixes only a first-party set may use (an overlay claiming one is rejected).
RESERVED_PREFIXES = ("gsd-", "gsd-core-", "anthropic-", "looprail-")

# The version of the reference engine (open-gsd/gsd-core, its package.json) whose loop-hook
# contract looprail implements. A manifest's `engines.gsd` range is checked against it: a
# capability that requires another engine is not loaded (docs/checks.md, "Engine version").
GSD_ENGINE_VERSION = "1.10.0"


MAX_MANIFEST_BYTES = 8 * 1024 * 1024
MAX_FRAGMENT_BYTES = 8 * 1024 * 1024
# All fragment text one capability materialises, each reference counted (the text is rendered,
# compiled and cached once per reference): one 8 MiB file named 50 times must not become 400 MiB.
MAX_CAPABILITY_FRAGMENT_BYTES = 16 * 1024 * 1024
MAX_JSON_DEPTH = 64


# --------------------------------------------------------------------------- safe JSON


def parse_manifest_bytes(raw: bytes, file: str) -> tuple[Any, list[Issue]]:
    """Parse JSON that may be hostile. Returns `(value, issues)`; value is None when unusable."""
    if len(raw) > MAX_MANIFEST_BYTES:
        return None, [Issue(file, "$", f"file is larger than {MAX_MANIFEST_BYTES} bytes")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Issue(file, "$", f"not UTF-8 (byte {exc.start})")]
    if text.startswith("\ufeff"):
        text = text[1:]
    # not at the top: the render-hooks entry loads this module (its import budget)
    from looprail.jsonload import loads_strict

    try:
        value, dupes = loads_strict(text)
    except RecursionError:
        return None, [Issue(file, "$", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")]
    except json.JSONDecodeError as exc:
        return None, [Issue(file, "$", f"not valid JSON: {exc.msg} at line {exc.lineno}")]
    except ValueError as exc:  # NaN / Infinity
        return None, [Issue(file, "$", f"not valid JSON: {exc}")]
    issues = [Issue(file, "$", f"duplicate key {json.dumps(k)}") for k in dict.fromkeys(dupes)]
    issues += _walk_forbidden(value, (), file)
    if issues:
        return None, issues
    return value, []


def _walk_forbidden(value: Any, path: tuple[Any, ...], file: str, depth: int = 0) -> list[Issue]:
    if depth > MAX_JSON_DEPTH:
        return [Issue(file, json_path(path), f"nested deeper than {MAX_JSON_DEPTH} levels")]
    issues: list[Issue] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in FORBIDDEN_KEYS:
                issues.append(Issue(file, json_path((*path, k)), "forbidden key"))
            else:
                issues += _walk_forbidden(v, (*path, k), file, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            issues += _walk_forbidden(v, (*path, i), file, depth + 1)
    return issues


def materialise_fragment(folder: Path, rel: str) -> tuple[str | None, str | None]:
    """Read `fragment.path` into text. Returns `(text, error_reason)`.

    The path must stay inside the capability folder (symlinks resolved), be a regular file and
    be at most 8 MiB of UTF-8."""
    base = folder.resolve()
    target = (folder / rel).resolve()
    if not target.is_relative_to(base):
        return None, "points outside the capability folder"
    try:
        data = read_bounded(target, MAX_FRAGMENT_BYTES)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            return None, f"{rel!r} is larger than {MAX_FRAGMENT_BYTES} bytes"
        if exc.errno == errno.EINVAL:
            return None, f"{rel!r} is not a regular file"
        return None, f"cannot read {rel!r}: {exc.strerror}"
    if data is None:
        return None, f"file {rel!r} does not exist"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, f"{rel!r} is not UTF-8"


def _materialise_fragments(data: dict[str, Any], folder: Path, file: str) -> list[Issue]:
    """Replace each `fragment.path` by its text (in `inline`, the path kept). A file named by
    several entries is read once and shared; the total over all references is bounded by
    `MAX_CAPABILITY_FRAGMENT_BYTES`, checked before each read."""
    read: dict[str, tuple[str | None, str | None, int]] = {}  # real path → (text, error, bytes)
    issues: list[Issue] = []
    total = 0
    for group in ("steps", "contributions"):
        for i, entry in enumerate(data.get(group) or ()):
            frag = entry.get("fragment")
            if not (isinstance(frag, dict) and isinstance(frag.get("path"), str)):
                continue
            if "inline" in frag:
                continue
            where = f"$.{group}[{i}].fragment.path"
            key = os.path.realpath(folder / frag["path"])
            if key not in read:
                try:
                    size = os.stat(key).st_size
                except OSError:
                    size = 0
                if total + min(size, MAX_FRAGMENT_BYTES + 1) > MAX_CAPABILITY_FRAGMENT_BYTES:
                    return [_over_budget(file, where)]
                text, err = materialise_fragment(folder, frag["path"])
                read[key] = (text, err, len(text.encode("utf-8")) if text is not None else 0)
            text, err, size = read[key]
            if err:
                issues.append(Issue(file, where, err))
                continue
            total += size
            if total > MAX_CAPABILITY_FRAGMENT_BYTES:
                return [_over_budget(file, where)]
            entry["fragment"] = {"inline": text, "path": frag["path"]}
    return issues


def _over_budget(file: str, where: str) -> Issue:
    return Issue(
        file,
        where,
        f"fragments of this capability total more than {MAX_CAPABILITY_FRAGMENT_BYTES} bytes "
        "(each reference counts: its text is rendered once per reference)",
    )
