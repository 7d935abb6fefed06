"""Where capabilities come from, and how the set's cache file is kept: the search path in
trust order (origins, roots, capability folders) and the checked, atomic file. Shared by
`registry` and `compiled`."""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from looprail.fsutil import atomic_write
from looprail.layout import CAPABILITIES_DIR, gsd_overlays, looprail_home, project_path

FIRST_PARTY = "first-party"
GLOBAL = "global"
PROJECT = "project"
ORIGIN_RANK = {FIRST_PARTY: 0, GLOBAL: 1, PROJECT: 2}  # the trust order, most trusted first

# A project capability's fragment text is held only once the user consented to it: until
# then (and in the cache) its fragment keeps only its path and this marker.
DEFERRED = "$deferred"


def root_specs(
    project: Any,
    capability_dirs: Sequence[Any] = (),
    *,
    env: Mapping[str, str] | None = None,
    home: Any = None,
) -> list[tuple[str, str]]:
    """The capability search path, in trust order: (folder, origin). GSD's own overlays
    (`~/.gsd/capabilities`, `<project>/.gsd/capabilities`) follow looprail's of the same trust."""
    env = os.environ if env is None else env
    specs = [(os.fspath(d), FIRST_PARTY) for d in capability_dirs]
    specs += [(d, FIRST_PARTY) for d in env.get("LOOPRAIL_CAPABILITIES", "").split(os.pathsep) if d]
    global_home = os.fspath(home) if home is not None else looprail_home(env)
    specs.append((os.path.join(global_home, CAPABILITIES_DIR), GLOBAL))
    specs.append((gsd_overlays(project, env)[0], GLOBAL))
    specs += [(folder, PROJECT) for folder in project_overlays(project, env)]
    return specs


def project_overlays(project: Any, env: Mapping[str, str] | None = None) -> list[str]:
    """The project's capability overlays (their capabilities need consent): looprail's, then
    GSD's."""
    return [project_path(project, CAPABILITIES_DIR), gsd_overlays(project, env)[1]]


def capability_folders(root: str) -> list[str]:
    try:
        with os.scandir(root) as it:
            entries = [e for e in it if not e.name.startswith(".") and e.is_dir()]
    except OSError:
        return []
    return [e.path for e in sorted(entries, key=lambda e: e.name)]


def write_checked(path: str, fmt: str, body: bytes) -> None:
    """Write `body` to `path` atomically and privately (0600) behind a header line: the cache
    format and a CRC-32 of the body. Raises OSError."""
    atomic_write(path, _header(fmt, body) + b"\n" + body, mode=0o600)


def read_checked(raw: bytes, fmt: str) -> bytes | None:
    """The body `write_checked` wrote, or None when `raw` is damaged or of another format."""
    header, sep, body = raw.partition(b"\n")
    return body if sep and header == _header(fmt, body) else None


def _header(fmt: str, body: bytes) -> bytes:
    return f"{fmt} {zlib.crc32(body):08x}".encode()
