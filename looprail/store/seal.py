"""Seals: a journal run is only resumed if this user wrote it on this machine.

A journal lives in the project, so it can arrive from elsewhere (committed to a repository,
copied from a colleague) or be edited with any SQLite tool. Resuming such a run would trust its
rows: which tasks are done, which checkpoints were approved, where the loop stands (past a
blocking `ship:pre` gate, say). So every run carries a seal: an HMAC-SHA256, under a key that
belongs to the user and lives outside the project, over the chain of its event rows (each link
covers the previous link and the next row) and the current run and task rows. looprail updates
the seal in the same transaction as every write; `Journal.verify_run` recomputes it and a
resume refuses a run whose seal is missing or wrong.

The key is 32 random bytes in `$LOOPRAIL_HOME/journal.key` (default `~/.looprail/journal.key`),
created on first use with mode 0600 in a 0700 folder. A key file that others can read or write,
or that is not a regular file, is refused: with it, anyone could forge a seal.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from looprail.errors import SealError
from looprail.layout import JOURNAL_KEY_FILE, looprail_home

KEY_NAME = JOURNAL_KEY_FILE
_KEY_BYTES = 32


def key_path() -> Path:
    return Path(looprail_home()) / KEY_NAME


def user_key(path: Path | None = None) -> bytes:
    """The user's journal key, created (0600) when there is none yet."""
    path = path or key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another looprail created it meanwhile
        return _read_key(path)
    except OSError as exc:
        raise SealError(f"{path}: cannot create the journal key ({exc.strerror})") from None
    try:
        os.write(fd, os.urandom(_KEY_BYTES).hex().encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise SealError(
            f"{path}: cannot read the journal key ({exc.strerror}); it must be a regular file"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SealError(f"{path}: the journal key is not a regular file; refusing it")
        if st.st_uid != os.getuid():
            raise SealError(f"{path}: the journal key belongs to another user; refusing it")
        if st.st_mode & 0o077:
            raise SealError(
                f"{path}: the journal key is readable or writable by others "
                f"(mode {stat.S_IMODE(st.st_mode):o}); run `chmod 600 {path}`"
            )
        text = os.read(fd, 4096).decode("ascii", errors="replace").strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise SealError(
            f"{path}: the journal key is damaged; move it aside (runs it sealed "
            "can then no longer be resumed)"
        )
    return key


def canonical(row: Mapping[str, Any]) -> bytes:
    return json.dumps(dict(row), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def chain_link(key: bytes, previous: str, event_row: Mapping[str, Any]) -> str:
    """The next link of a run's event chain."""
    return hmac.new(
        key, previous.encode() + b"\n" + canonical(event_row), hashlib.sha256
    ).hexdigest()


def run_seal(
    key: bytes, chain: str, run_row: Mapping[str, Any], task_rows: Iterable[Mapping[str, Any]]
) -> str:
    """The seal over a run: its event chain, its run row and its task rows."""
    mac = hmac.new(key, b"looprail-run-seal\n" + chain.encode() + b"\n", hashlib.sha256)
    mac.update(canonical(run_row) + b"\n")
    for task in task_rows:
        mac.update(canonical(task) + b"\n")
    return mac.hexdigest()
