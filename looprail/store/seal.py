"""Seals: a journal run is only resumed if this user wrote it on this machine.

A journal lives in the project, so it can arrive from elsewhere (committed to a repository,
copied from a colleague) or be edited with any SQLite tool. Resuming such a run would trust its
rows: which tasks are done, which checkpoints were approved, where the loop stands (past a
blocking `ship:pre` gate, say). So every run carries a seal, under a key that belongs to the
user and lives outside the project. Every part of it is updated incrementally, in the same
transaction as the write it covers, so a commit costs the same at 50 tasks as at 50,000:

- the event chain: each event row extends an HMAC-SHA256 chain (`chain_link`: the previous
  link and the new row), so order, gaps, insertions and a truncated tail all change its head;
- the task digest: the sum, modulo 2^256, of an HMAC-SHA256 of every task row (`task_mac`).
  Changing a row subtracts the old row's MAC and adds the new one's; it covers the rows as a
  set (their primary key is `(run_id, task_key)`), so an edited, added or removed row changes
  it. This is Clarke et al.'s MSet-Add-Hash keyed by the user's secret (incremental multiset
  hashing, ASIACRYPT 2003): without the key nobody can compute a row's MAC, so nobody can
  make another set of rows add up to the same digest;
- the seal (`run_seal`): an HMAC of the chain head, the task digest and the run row, written
  `v2:<hex>`. A seal without that prefix was written by an older looprail (which re-hashed
  every task row at every commit); such a run is refused like a tampered one, with its own
  reason, and `--new` starts over.

`Journal.verify_run` recomputes all three from the rows (one pass over the run's events and one
over its task rows) and a resume refuses a run whose seal is missing or wrong.

The key is 32 random bytes in `$LOOPRAIL_HOME/journal.key` (default `~/.looprail/journal.key`),
created on first use with mode 0600 in a 0700 folder. A key file that others can read or write,
or that is not a regular file, is refused: with it, anyone could forge a seal.
"""

from __future__ import annotations

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


# One encoder for every canonical form (json.dumps would build one per call). HMACs are
# one-shot (`hmac.digest`: OpenSSL's HMAC in one call, same bytes as `hmac.new(...).digest()`).
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical(row: Mapping[str, Any]) -> bytes:
    return _CANONICAL.encode(dict(row)).encode()


def chain_link(key: bytes, previous: str, event_row: Mapping[str, Any]) -> str:
    """The next link of a run's event chain."""
    return hmac.digest(key, previous.encode() + b"\n" + canonical(event_row), "sha256").hex()


SEAL_VERSION = "v2"
DIGEST_BITS = 256
_MODULUS = 1 << DIGEST_BITS
EMPTY_DIGEST = "0" * (DIGEST_BITS // 4)


def task_mac(key: bytes, task_row: Mapping[str, Any]) -> int:
    """A task row's MAC, as a number (its term in the run's task digest)."""
    return int.from_bytes(
        hmac.digest(key, b"looprail-task\n" + canonical(task_row), "sha256"), "big"
    )


def digest_update(
    digest: str,
    key: bytes,
    *,
    remove: Mapping[str, Any] | None = None,
    add: Mapping[str, Any] | None = None,
) -> str:
    """The task digest after one row changed: `remove` the old row (if any), `add` the new."""
    value = int(digest, 16) if digest else 0
    if remove is not None:
        value -= task_mac(key, remove)
    if add is not None:
        value += task_mac(key, add)
    return format(value % _MODULUS, f"0{DIGEST_BITS // 4}x")


def digest_add(digest: str, *, remove: int = 0, add: int = 0) -> str:
    """`digest_update` with the rows' MACs (`task_mac`) already computed."""
    value = (int(digest, 16) if digest else 0) - remove + add
    return format(value % _MODULUS, f"0{DIGEST_BITS // 4}x")


def task_digest(key: bytes, task_rows: Iterable[Mapping[str, Any]]) -> str:
    """The digest of a whole set of task rows (what verification recomputes)."""
    value = sum(task_mac(key, row) for row in task_rows)
    return format(value % _MODULUS, f"0{DIGEST_BITS // 4}x")


def run_seal(key: bytes, chain: str, digest: str, run_row: Mapping[str, Any] | bytes) -> str:
    """The seal over a run: its event chain head, its task digest and its run row (or the
    row's `canonical` bytes, which a writer keeps while the row does not change)."""
    row = run_row if isinstance(run_row, bytes) else canonical(run_row)
    msg = b"looprail-run-seal-v2\n" + chain.encode() + b"\n" + digest.encode() + b"\n" + row
    return f"{SEAL_VERSION}:{hmac.digest(key, msg, 'sha256').hex()}"
