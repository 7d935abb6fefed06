"""Per-manifest validation verdicts, cached by content: validate only the manifests that changed.

A verdict (valid, or the issues) depends only on the manifest's bytes, its folder's name and
looprail's rules, so it is stored under `layout.cache_dir`, one small file per manifest
location, keyed by a SHA-256 of this format, looprail's version, the GSD engine version, the
rule modules' source, the folder name and the bytes. Fragment files are not part of the key
(they are read again every time). A changed manifest is validated by `VerdictCache.validate`.

A verdict is used only when everything about it checks out: a regular file (never through a
symlink) owned by this user in a folder of this user's that nobody else can write, with a
matching checksum, shape and key. Anything else is a miss. Like every cache, a process running
as this user is trusted (it could as well edit looprail itself).
"""

from __future__ import annotations

# On the `render-hooks` start path (`ENTRY` in tests/cli/test_loop.py): what a call there does
# not need is imported in the function that needs it.
import functools
import json
import os
import stat

from looprail.errors import Issue
from looprail.fsutil import is_private, read_private
from looprail.hooks.manifest_rules import engine_problem, rule_issues
from looprail.hooks.manifest_shape import compile_shape
from looprail.hooks.sources import RULE_FILES, read_checked, write_checked
from looprail.layout import cache_dir

try:  # CPython's built-in SHA-256: the same digest as hashlib's, ~3 ms less to import
    from _sha256 import sha256  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - another Python (3.12 renamed it _sha2)
    from hashlib import sha256

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing is not imported at run time on this path
    from collections.abc import Callable, Mapping
    from typing import Any

FORMAT = "looprail-verdict-2"
SUBDIR = "manifests"
MAX_ENTRY_BYTES = 1024 * 1024  # a verdict is small; anything bigger is not ours

_ENGINE_PREFIX = "engines.gsd:"
_SHAPE = "shape:capability"  # the entry of the derived shape check's table (a memo, not a file)


@functools.cache
def rules_digest() -> str:
    """SHA-256 over looprail's version, the engine version and the rule modules' source."""
    # not at the top: the render-hooks entry loads this module (its import budget)
    from looprail._version import __version__
    from looprail.hooks.manifest_rules import GSD_ENGINE_VERSION

    h = sha256(f"{FORMAT}\0{__version__}\0{GSD_ENGINE_VERSION}\0".encode())
    for path in RULE_FILES:
        try:
            with open(path, "rb") as fh:
                h.update(fh.read())
        except OSError:
            h.update(b"\0missing\0")
        h.update(b"\0")
    return h.hexdigest()


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
        self._shape: Callable[[Any], bool] | None = None

    @classmethod
    def for_env(cls, env: Mapping[str, str] | None = None) -> VerdictCache:
        env = os.environ if env is None else env
        if env.get("LOOPRAIL_NO_CACHE"):
            return cls(None)
        return cls(os.path.join(cache_dir(env), SUBDIR))

    def validate(self, data: Mapping[str, Any], file: str, folder_name: str | None) -> list[Issue]:
        """The issues of layers 2 and 3 (shapes, cross-field rules, the engine range) of a parsed
        manifest ([] = valid): `manifest.validate_declared`'s verdict, with pydantic imported only
        when the shape check derived from the models cannot prove the shape right (or its table
        is not cached yet: then it is derived and cached). Fragment files are not read here."""
        shape = self._shape_check()
        if shape is not None and shape(data):
            return rule_issues(data, file, folder_name, self.engine_problem)
        # not at the top: the render-hooks entry loads this module (its import budget)
        from looprail.hooks import manifest

        if shape is None:
            table = manifest.shape_table()
            self._shape = compile_shape(table)
            if self.directory is not None:
                self._put(_SHAPE, self._shape_key(), table)
        return manifest.validate_declared(data, file, folder_name, self.engine_problem)[1]

    def _shape_key(self) -> str:
        return sha256(f"{rules_digest()}\0{_SHAPE}".encode()).hexdigest()

    def _shape_check(self) -> Callable[[Any], bool] | None:
        if self._shape is None and self.directory is not None:
            table = self._get(_SHAPE, self._shape_key())
            try:
                self._shape = compile_shape(table) if isinstance(table, dict) else None
            except (KeyError, TypeError, ValueError, AttributeError):
                self._shape = None  # not a table this looprail wrote: derive it again
        return self._shape

    def _entry(self, manifest_file: str) -> str:
        assert self.directory is not None
        if manifest_file.startswith((_ENGINE_PREFIX, _SHAPE)):  # a memo, not a file
            name = sha256(manifest_file.encode()).hexdigest()[:40]
        else:
            name = sha256(os.path.abspath(manifest_file).encode()).hexdigest()[:40]
        return os.path.join(self.directory, name + ".json")

    def engine_problem(self, engines: Any) -> str | None:
        """`manifest_rules.engine_problem`, memoised per `engines.gsd` range: manifests repeat a few
        ranges, and node-semver compiles ~80 regular expressions on import."""
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
        issues = self._get(manifest_file, key)
        if not isinstance(issues, list) or not all(
            isinstance(i, list) and len(i) == 2 and all(isinstance(p, str) for p in i)
            for i in issues
        ):
            return None
        return [Issue(manifest_file, path, reason) for path, reason in issues]

    def put(self, manifest_file: str, key: str, issues: list[Issue]) -> None:
        """Record the verdict; a cache that cannot be written only costs speed."""
        self._put(manifest_file, key, [[i.path, i.reason] for i in issues])

    def _get(self, name: str, key: str) -> Any:
        """The value stored under `key` for `name`, or None (absent, damaged, not ours)."""
        if self.directory is None or not self._folder_ok():
            return None
        raw = read_private(self._entry(name), MAX_ENTRY_BYTES)
        body = None if raw is None else read_checked(raw, FORMAT)
        if body is None:
            return None
        try:
            blob = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(blob, dict) or blob.get("key") != key:
            return None
        return blob.get("value")

    def _put(self, name: str, key: str, value: Any) -> None:
        if self.directory is None:
            return
        body = json.dumps({"key": key, "value": value}, ensure_ascii=False).encode("utf-8")
        try:
            os.makedirs(os.path.dirname(self.directory), exist_ok=True)
            if not os.path.lexists(self.directory):
                os.mkdir(self.directory, 0o700)  # a race with another looprail: OSError, no write
            self._usable = None
            if not self._folder_ok():
                return  # not ours: never write verdicts where others can plant them
            write_checked(self._entry(name), FORMAT, body, ".verdict-")
        except OSError:
            pass
