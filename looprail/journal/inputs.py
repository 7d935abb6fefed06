"""What a run depends on, as content hashes: every manifest, fragment, plan and config file.
Recorded at run start so `resume` can say exactly which inputs changed underneath a run."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


def digest_inputs(paths: Iterable[str | Path], root: str | Path) -> dict[str, str]:
    """`{path: sha256 hex}` for each file in `paths` (a directory stands for every file below
    it). Keys are POSIX paths relative to `root` when inside it, absolute otherwise, sorted.
    A path that does not exist is left out: if it appears later, `diff_inputs` calls it added."""
    root_path = Path(os.path.abspath(root))
    digests: dict[str, str] = {}
    for path in paths:
        for file in _files(Path(path) if Path(path).is_absolute() else root_path / path):
            with file.open("rb") as handle:
                digests[_key(file, root_path)] = hashlib.file_digest(handle, "sha256").hexdigest()
    return dict(sorted(digests.items()))


def diff_inputs(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Human lines, sorted by path: `changed: p`, `added: p`, `removed: p`. Empty when equal."""
    lines = []
    for key in sorted(old.keys() | new.keys()):
        if key not in new:
            lines.append(f"removed: {key}")
        elif key not in old:
            lines.append(f"added: {key}")
        elif old[key] != new[key]:
            lines.append(f"changed: {key}")
    return lines


def changes_text(changes: Sequence[str], shown: int = 3) -> str:
    """`diff_inputs` lines for one message: the first `shown`, then how many more (a resume
    after a checkout may change dozens of files; the journal keeps them all)."""
    more = len(changes) - shown
    head = "; ".join(changes[:shown] if more > 0 else changes)
    return f"{head}; and {more} more" if more > 0 else head


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():  # (order is the caller's: it sorts the digests)
        return [file for file in path.rglob("*") if file.is_file()]
    return []


def _key(file: Path, root: Path) -> str:
    # Lexical first (a symlinked file keeps its own name), then through symlinks of the root.
    for candidate, base in ((Path(os.path.abspath(file)), root), (file.resolve(), root.resolve())):
        if candidate.is_relative_to(base):
            return candidate.relative_to(base).as_posix()
    return Path(os.path.abspath(file)).as_posix()
