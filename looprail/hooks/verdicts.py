"""Per-manifest validation verdicts, cached by content: validate only the manifests that changed.

Validating a manifest (pydantic shapes, the cross-field rules, the `engines.gsd` range) depends
only on its bytes, the name of its folder and looprail's rules. The verdict (valid, or the list
of issues) is stored under the looprail cache folder (`layout.cache_dir`), one small file per
manifest location, keyed by a SHA-256 of: this format, looprail's version, the GSD engine
version manifests are checked against, a digest of the rule modules' source, the folder name
and the manifest bytes. One edited manifest therefore costs one validation (and the pydantic
import); the others are read back without pydantic. Fragment files are read again every time
(they are not part of the key).

A verdict is only ever used when everything about it checks out: the file is a regular file
(never followed through a symlink) owned by this user in a folder owned by this user that
nobody else can write, its checksum matches, its shape is right and its key is exactly the one
computed for these bytes. Anything else (corrupt, truncated, symlinked, planted by another user,
copied from another manifest's entry) is a miss: the manifest is validated again. Like every
cache, a process running as this user is trusted (it could as well edit looprail itself).
"""

from __future__ import annotations

import json
import os
import stat
import zlib

from looprail.errors import Issue
from looprail.fsutil import is_private, read_private
from looprail.hooks.compiled import new_temp_file
from looprail.layout import cache_dir

try:  # CPython's built-in SHA-256: the same digest as hashlib's, ~3 ms less to import
    from _sha256 import sha256  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - another Python (3.12 renamed it _sha2)
    from hashlib import sha256

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing is not imported at run time on this path
    from collections.abc import Mapping
    from typing import Any

FORMAT = "looprail-verdict-1"
SUBDIR = "manifests"
MAX_ENTRY_BYTES = 1024 * 1024  # a verdict is small; anything bigger is not ours

_HERE = os.path.dirname(os.path.abspath(__file__))
# The code whose rules decide a verdict: an edit (a dev checkout, an upgrade) is a new key.
_RULE_FILES = tuple(
    os.path.join(_HERE, *parts)
    for parts in (
        ("verdicts.py",),
        ("manifest.py",),
        ("manifest_io.py",),
        ("manifest_rules.py",),
        ("manifest_shape.py",),
        ("checks.py",),
        ("..", "config.py"),
        ("..", "points.py"),
        ("..", "jsonload.py"),
    )
)
_rules_digest: str | None = None
_ENGINE_PREFIX = "engines.gsd:"


def rules_digest() -> str:
    """SHA-256 over looprail's version, the engine version and the rule modules' source."""
    global _rules_digest
    if _rules_digest is None:
        from looprail._version import __version__
        from looprail.hooks.manifest_io import GSD_ENGINE_VERSION

        h = sha256(f"{FORMAT}\0{__version__}\0{GSD_ENGINE_VERSION}\0".encode())
        for path in _RULE_FILES:
            try:
                with open(path, "rb") as fh:
                    h.update(fh.read())
            except OSError:
                h.update(b"\0missing\0")
            h.update(b"\0")
        _rules_digest = h.hexdigest()
    return _rules_digest


def verdict_key(raw: bytes, folder_name: str | None) -> str:
    """The key a verdict for these manifest bytes in a folder of this name is stored under."""
    h = sha256(rules_digest().encode())
    h.update(b"\0" + json.dumps(folder_name).encode() + b"\0")
    h.update(raw)
    return h.hexdigest()


class VerdictCache:
    """Read and write verdicts in `directory` (None: the cache is off, every lookup misses)."""

    def __init__(self, directory: str | None):
        self.directory = directory
        self._usable: bool | None = None

    @classmethod
    def for_env(cls, env: Mapping[str, str] | None = None) -> VerdictCache:
        env = os.environ if env is None else env
        if env.get("LOOPRAIL_NO_CACHE"):
            return cls(None)
        return cls(os.path.join(cache_dir(env), SUBDIR))

    def _entry(self, manifest_file: str) -> str:
        assert self.directory is not None
        if manifest_file.startswith(_ENGINE_PREFIX):  # a memo, not a file
            name = sha256(manifest_file.encode()).hexdigest()[:40]
        else:
            name = sha256(os.path.abspath(manifest_file).encode()).hexdigest()[:40]
        return os.path.join(self.directory, name + ".json")

    def engine_problem(self, engines: Any) -> str | None:
        """`manifest_rules.engine_problem`, memoised per `engines.gsd` range: manifests repeat a few
        ranges, and node-semver compiles ~80 regular expressions on import."""
        from looprail.hooks.manifest_rules import engine_problem

        rng = engines.get("gsd") if isinstance(engines, dict) else None
        if self.directory is None or not isinstance(rng, str) or not rng.strip():
            return engine_problem(engines)
        name = _ENGINE_PREFIX + rng
        key = sha256(f"{rules_digest()}\0engines.gsd\0{rng}".encode()).hexdigest()
        cached = self.get(name, key)
        if cached is not None and len(cached) <= 1:
            return cached[0].reason if cached else None
        problem = engine_problem(engines)
        self.put(name, key, [] if problem is None else [Issue(name, "$.engines.gsd", problem)])
        return problem

    def _folder_ok(self) -> bool:
        """The folder is ours: a real folder (not a symlink), owned by this user, writable by
        nobody else. Checked once per process."""
        if self._usable is None:
            self._usable = False
            if self.directory is not None:
                try:
                    st = os.lstat(self.directory)
                except OSError:
                    return False  # not there (yet): nothing to read; `put` creates it
                self._usable = is_private(st, stat.S_ISDIR)
        return self._usable

    def get(self, manifest_file: str, key: str) -> list[Issue] | None:
        """The cached issues for `key` ([] = valid), or None: validate it."""
        if self.directory is None or not self._folder_ok():
            return None
        raw = read_private(self._entry(manifest_file), MAX_ENTRY_BYTES)
        if raw is None:
            return None
        header, sep, body = raw.partition(b"\n")
        if not sep or header != _header(body):
            return None
        try:
            blob = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(blob, dict) or blob.get("key") != key:
            return None
        issues = blob.get("issues")
        if not isinstance(issues, list) or not all(
            isinstance(i, list) and len(i) == 2 and all(isinstance(p, str) for p in i)
            for i in issues
        ):
            return None
        return [Issue(manifest_file, path, reason) for path, reason in issues]

    def put(self, manifest_file: str, key: str, issues: list[Issue]) -> None:
        """Record the verdict; a cache that cannot be written only costs speed."""
        if self.directory is None:
            return
        body = json.dumps(
            {"key": key, "issues": [[i.path, i.reason] for i in issues]}, ensure_ascii=False
        ).encode("utf-8")
        try:
            os.makedirs(os.path.dirname(self.directory), exist_ok=True)
            if not os.path.lexists(self.directory):
                os.mkdir(self.directory, 0o700)  # a race with another looprail: OSError, no write
            self._usable = None
            if not self._folder_ok():
                return  # not ours: never write verdicts where others can plant them
            fd, tmp = new_temp_file(self.directory, ".verdict-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(_header(body) + b"\n" + body)
                os.replace(tmp, self._entry(manifest_file))
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass


def _header(body: bytes) -> bytes:
    return f"{FORMAT} {zlib.crc32(body):08x}".encode()
