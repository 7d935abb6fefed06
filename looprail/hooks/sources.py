"""Where capabilities come from, and how their on-disk caches are kept: the search path in
trust order (origins, roots, capability folders), the code files whose rules decide a cached
form, and the caches' checked, atomic files. Shared by `registry`, `compiled` and `verdicts`;
only `os` and `zlib`, on the `render-hooks` hot path.
"""

from __future__ import annotations

import os
import zlib

from looprail.layout import CAPABILITIES_DIR, gsd_overlays, looprail_home, project_path

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing is not imported at run time on this path
    from collections.abc import Mapping, Sequence
    from typing import Any

FIRST_PARTY = "first-party"
GLOBAL = "global"
PROJECT = "project"
ORIGIN_RANK = {FIRST_PARTY: 0, GLOBAL: 1, PROJECT: 2}  # the trust order, most trusted first

# A project capability's fragment text is held only once the user consented to it: until
# then (and in the cache) its fragment keeps only its path and this marker.
DEFERRED = "$deferred"


_HERE = os.path.dirname(os.path.abspath(__file__))
# The code whose rules decide the compiled form and the validation verdicts (`verdicts` hashes
# the same files): an edit (a dev checkout, an upgrade that forgot to bump CACHE_FORMAT)
# invalidates both caches as a manifest edit would.
RULE_FILES = tuple(
    os.path.join(_HERE, *parts)
    for parts in (
        ("compiled.py",),
        ("capset.py",),
        ("sources.py",),
        ("registry.py",),
        ("verdicts.py",),
        ("manifest.py",),
        ("manifest_io.py",),
        ("manifest_rules.py",),
        ("manifest_shape.py",),
        ("checks.py",),
        ("predicates.py",),
        ("..", "config.py"),
        ("..", "points.py"),
        ("..", "jsonload.py"),
        ("..", "layout.py"),
        ("..", "fsutil.py"),
    )
)


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


def new_temp_file(folder: str, prefix: str) -> tuple[int, str]:
    """`tempfile.mkstemp` without importing tempfile (~9 ms on the rebuild path): a new file
    readable by this user only, never an existing file or a symlink. Returns (fd, path)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = os.path.join(folder, prefix + os.urandom(8).hex())
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def write_checked(path: str, fmt: str, body: bytes, prefix: str) -> None:
    """Write `body` to `path` atomically (a private temporary file, then a rename) behind a
    header line: the cache format and a CRC-32 of the body. Raises OSError."""
    fd, tmp = new_temp_file(os.path.dirname(path), prefix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_header(fmt, body) + b"\n" + body)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_checked(raw: bytes, fmt: str) -> bytes | None:
    """The body `write_checked` wrote, or None when `raw` is damaged or of another format."""
    header, sep, body = raw.partition(b"\n")
    return body if sep and header == _header(fmt, body) else None


def _header(fmt: str, body: bytes) -> bytes:
    return f"{fmt} {zlib.crc32(body):08x}".encode()
