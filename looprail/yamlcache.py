"""Parsed YAML frontmatter kept between runs, so an unchanged PLAN.md or artifact is not parsed
again (and `looprail check` need not import PyYAML).

An entry's name hashes the text and what decides how it parses (looprail's version, the rule
files, the installed PyYAML); it holds the text, compared in full on a hit. Only values JSON
gives back exactly are stored; a parser that raises stores nothing. A damaged or foreign entry
is a miss, an unwritable cache is no cache. Entries live in `cache_dir()/frontmatter/`, trusted
only as a regular file of this user's in a folder nobody else can write.
"""

from __future__ import annotations

# On the `render-hooks` start path (`ENTRY` in tests/cli/test_loop.py): what a call there does
# not need is imported in the function that needs it.
import hashlib
import json
import math
import os
from collections.abc import Callable
from functools import cache
from typing import Any

from looprail.fsutil import is_private, read_private
from looprail.layout import cache_dir

SUBDIR = "frontmatter"


def exact_json(value: Any, depth: int = 0) -> bool:
    """Whether `json.loads(json.dumps(value))` gives back `value` with the same types."""
    if depth > 200:
        return False
    if value is None or type(value) in (str, int, bool):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(exact_json(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and exact_json(v, depth + 1) for k, v in value.items())
    return False


@cache
def _stamp(rules: str) -> str:
    """Stat stamps of the rule files and of the installed PyYAML (found without importing it)."""
    from importlib.util import find_spec

    from looprail._version import __version__

    files = [os.path.join(os.path.dirname(__file__), "yamlload.py"), rules]
    try:
        spec = find_spec("yaml")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        files.append(spec.origin)
    parts = [__version__]
    for name in files:
        try:
            st = os.stat(name)
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{name}:-")
    return "\0".join(parts)


def _entry_path(kind: str, rules: str, text: str) -> str:
    digest = hashlib.sha256(f"{_stamp(rules)}\0{kind}\0{text}".encode("utf-8", "surrogatepass"))
    return os.path.join(cache_dir(), SUBDIR, f"{kind}-{digest.hexdigest()}.json")


MAX_ENTRY_BYTES = 4 << 20


def cached(kind: str, rules: str, text: str, parse: Callable[[str], Any]) -> Any:
    """`parse(text)`, from the cache when this text was parsed before under the same rules.

    `kind` names the parser (one per way of parsing), `rules` is the path of the module that
    holds its rules (its stat is part of the key). `parse` may raise: nothing is stored then.
    `LOOPRAIL_NO_CACHE=1` parses every time."""
    if os.environ.get("LOOPRAIL_NO_CACHE"):
        return parse(text)
    path = _entry_path(kind, rules, text)
    entry = _read(path)
    if type(entry) is dict and entry.get("text") == text and "value" in entry:
        return entry["value"]
    value = parse(text)
    if exact_json(value):
        _store(path, text, value)
    return value


def _read(path: str) -> Any:
    """The entry at `path`, or None unless it is private (`fsutil.read_private`) in a private
    folder."""
    import stat

    try:
        if not is_private(os.lstat(os.path.dirname(path)), stat.S_ISDIR):
            return None
    except OSError:
        return None
    raw = read_private(path, MAX_ENTRY_BYTES)
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):  # damaged, truncated: a miss
        return None


def _store(path: str, text: str, value: Any) -> None:
    import stat
    import tempfile

    folder = os.path.dirname(path)
    try:
        data = json.dumps({"text": text, "value": value}, ensure_ascii=False)
        raw = data.encode("utf-8", "surrogatepass")
        if len(raw) > MAX_ENTRY_BYTES:
            return
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        if not os.path.lexists(folder):
            os.mkdir(folder, 0o700)
        if not is_private(os.lstat(folder), stat.S_ISDIR):
            return  # not ours: never write where others can plant entries
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".entry-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError, UnicodeEncodeError, RecursionError):
        pass  # no cache: the next run parses again
