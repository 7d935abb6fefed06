"""A repeat of a `loop render-hooks` call whose inputs did not change, replayed.

A host calls `render-hooks` with the same arguments at every plan and task of a loop. When the
same argv in the same folder finds the same capability-set cache entry it rendered from
(`hooks.compiled.entry_id`: an id names one state of every file the set is built from, the
set's own code included), the same `.planning/config.json` (its stat signature) and the same
rendering code, its output is the output it had: stdout, stderr and the exit code are written
back from the memo, and the resolver, the config reader and the set's records are never
imported (a warm call costs 0.8-0.9 of what it did; `benchmarks/render_hooks.py`).

Never memoised: a call with `--phase` (it reads the phase folders), a set with project
capabilities (consent is checked at every call), LOOPRAIL_NO_CACHE, output over 1 MiB, a
config.json changed within 50 ms of its read (`fsutil.RACY_NS`), a set that could not be
cached. A memo that is damaged, stale or of another format is
ignored and rewritten; deleting the cache folder is always safe.
"""

from __future__ import annotations

import marshal
import os
import sys
import time
import zlib

from looprail.fsutil import read_private, settled, stat_sig
from looprail.hooks.compiled import entry_id
from looprail.hooks.sources import read_checked, write_checked
from looprail.layout import cache_dir, config_path

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: this is the render-hooks hot path
    from collections.abc import Mapping

MEMO_FORMAT = "looprail-render-1"
MAX_OUTPUT = 1 << 20  # characters of stdout and stderr together
MAX_MEMO_BYTES = 4 * MAX_OUTPUT + (1 << 20)  # UTF-8 takes at most 4 bytes a character

_HERE = os.path.dirname(os.path.abspath(__file__))
# The code that turns a set and a config into output, beyond the rules the entry id covers
# (`hooks.sources.RULE_FILES`): an edit (a dev checkout, an upgrade) is a new memo.
_CODE = tuple(
    os.path.join(_HERE, *parts)
    for parts in (
        ("render_hooks.py",),
        ("render_memo.py",),
        ("_common.py",),
        ("..", "hooks", "resolve.py"),
        ("..", "trust", "__init__.py"),
        ("..", "_version.py"),
    )
)


def _key(argv: list[str]) -> str:
    return repr((MEMO_FORMAT, os.getcwd(), argv))


def _file(key: str, env: Mapping[str, str]) -> str:
    return os.path.join(cache_dir(env), f"render-{zlib.crc32(key.encode()):08x}.bin")


def replay(argv: list[str], env: Mapping[str, str] | None = None) -> int | None:
    """Write the memoised output of `loop render-hooks ARGV` and return its exit code, or None
    when there is no memo for these inputs as they are now (then render)."""
    env = os.environ if env is None else env
    if env.get("LOOPRAIL_NO_CACHE"):
        return None
    key = _key(argv)
    # Only a regular file of this user's that nobody else can write: a memo is what a host is
    # told to run, so one planted in a shared cache folder is never replayed.
    raw = read_private(_file(key, env), MAX_MEMO_BYTES)
    body = None if raw is None else read_checked(raw, MEMO_FORMAT)
    if body is None:
        return None
    try:
        memo = marshal.loads(body)
    except (ValueError, EOFError, TypeError, RecursionError):
        return None
    if not (isinstance(memo, tuple) and len(memo) == 9 and memo[0] == key):
        return None
    _, project, capabilities, entry, config, code, out, err, status = memo
    if not (isinstance(out, str) and isinstance(err, str) and isinstance(status, int)):
        return None
    if stat_sig(config_path(project)) != config or [stat_sig(p) for p in _CODE] != code:
        return None
    if entry is None or entry_id(project, capabilities, env=env) != entry:
        return None
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


class Recorder:
    """Where a rendering call writes its output: passed through to stdout and stderr, and kept
    for the call's memo when the call can have one (`finish` writes it)."""

    def __init__(
        self,
        argv: list[str] | None,
        project: str,
        capabilities: list[str],
        env: Mapping[str, str] | None = None,
    ):
        self._env = os.environ if env is None else env
        self._argv = argv
        self._project = project
        self._capabilities = capabilities
        self._out: list[str] = []
        self._err: list[str] = []
        self._size = 0
        # What the output is rendered from is read after these: a config or code change
        # from here on is seen by the memo's next check.
        self._keep_memo = argv is not None and not self._env.get("LOOPRAIL_NO_CACHE")
        self._read_ns = time.time_ns()
        self._config = stat_sig(config_path(project)) if self._keep_memo else None
        self._code = [stat_sig(p) for p in _CODE] if self._keep_memo else []
        self._entry: str | None = None

    def rendering_from(self, entry: str | None) -> None:
        """The output comes from the set of cache entry `entry` (`trust.load_entry`); None (a
        set that is not cached, or has project capabilities): never memoised, nothing kept."""
        self._entry = entry
        if entry is None:
            self._keep_memo = False

    def out(self, text: str) -> None:
        sys.stdout.write(text)
        self._keep(self._out, text)

    def err(self, text: str) -> None:
        sys.stderr.write(text)
        self._keep(self._err, text)

    def _keep(self, parts: list[str], text: str) -> None:
        if not self._keep_memo:
            return
        self._size += len(text)
        if self._size > MAX_OUTPUT:
            self._keep_memo = False  # too big to memoise: the rest is only passed through
            self._out.clear()
            self._err.clear()
            return
        parts.append(text)

    def finish(self, status: int) -> int:
        """The call's exit code, after its memo is written (when it can have one)."""
        if not self._keep_memo or self._entry is None or not settled(self._config, self._read_ns):
            return status
        assert self._argv is not None
        key = _key(self._argv)
        memo = (
            key,
            self._project,
            self._capabilities,
            self._entry,
            self._config,
            self._code,
            "".join(self._out),
            "".join(self._err),
            status,
        )
        try:
            path = _file(key, self._env)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_checked(path, MEMO_FORMAT, marshal.dumps(memo), ".render-")
        except OSError:
            pass  # a memo that cannot be written only costs speed
        return status
