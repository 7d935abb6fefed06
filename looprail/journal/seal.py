"""Seals: a journal run is only resumed if this user wrote it on this machine. Each write keeps
the run's seal up to date in O(1): an HMAC chain of events (`chain_link`), an additive digest of
task-row MACs (`task_mac`) and the seal over both (`run_seal`, `v2:<hex>`), keyed by
`$LOOPRAIL_HOME/journal.key` (docs/journal.md, "Seals").
"""

from __future__ import annotations

import hmac
import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from looprail.errors import JournalError, SealError
from looprail.layout import JOURNAL_KEY_FILE, looprail_home

_KEY_BYTES = 32


def user_key(path: Path | None = None) -> bytes:
    """The user's journal key, created (0600) when there is none yet."""
    path = path or Path(looprail_home()) / JOURNAL_KEY_FILE
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


def task_mac(key: bytes, task_row: Mapping[str, Any]) -> int:
    """A task row's MAC, as a number (its term in the run's task digest)."""
    return int.from_bytes(
        hmac.digest(key, b"looprail-task\n" + canonical(task_row), "sha256"), "big"
    )


def digest_add(digest: str, *, remove: int = 0, add: int = 0) -> str:
    """The task digest after one row changed: `remove` the old row's MAC, `add` the new one's."""
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


class _Sealed(NamedTuple):
    """What a connection last sealed of a run, and what the seal covers."""

    seal: str
    digest: str
    chain: str
    run_bytes: bytes


@dataclass(slots=True)
class _RunTx:
    """A run the open transaction writes: its seal as this connection last wrote it (None when
    the file holds another), its working task digest (None until loaded) and chain head."""

    valid: _Sealed | None
    digest: str | None
    head: str
    run_changed: bool = False


class RunSeals:
    """The seals of one journal connection, kept up to date write by write and written at commit.
    While the file holds the seal this connection last wrote, it goes on from there (else the
    run's rows are read again once)."""

    def __init__(self, path: Path, sql: Callable[..., sqlite3.Cursor]):
        self._path = path
        self._sql = sql
        self._key: bytes | None = None
        self._sealed: dict[str, _Sealed] = {}
        self._tx: dict[str, _RunTx] = {}  # the runs the open transaction writes

    def key(self) -> bytes:
        if self._key is None:
            self._key = user_key()
        return self._key

    def touch(self, run_id: str) -> _RunTx:
        """What the open transaction writes of a run (a run that does not exist is refused)."""
        tx = self._tx.get(run_id)
        if tx is None:
            known = self._sealed.get(run_id)
            seal = self._meta(f"seal:{run_id}")
            if known is not None and seal is not None and hmac.compare_digest(known.seal, seal):
                tx = _RunTx(known, known.digest, known.chain)
            else:  # written elsewhere, or never sealed here: its rows are read again
                if self._sql("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                    raise JournalError(f"{self._path}: no run {run_id!r}")
                tx = _RunTx(None, None, self._meta(f"chain:{run_id}") or "")
            self._tx[run_id] = tx
        return tx

    def run_changed(self, run_id: str) -> None:
        """The run's row changes in the open transaction: its seal reads it again."""
        self.touch(run_id).run_changed = True

    def chain(self, run_id: str, row: sqlite3.Row) -> None:
        """Extend the run's event chain by the row just inserted (written at commit)."""
        tx = self.touch(run_id)
        tx.head = chain_link(self.key(), tx.head, dict(row))

    def digest(self, run_id: str) -> str:
        """The run's task digest as of now (recomputed from the rows when this connection did
        not seal the run last). Load it before a task row changes."""
        tx = self.touch(run_id)
        if tx.digest is None:
            tx.digest = self._task_digest(run_id)
        return tx.digest

    def digest_change(self, run_id: str, before: sqlite3.Row | None, after: sqlite3.Row) -> None:
        """A task row of `run_id` changed: update its digest (loaded before the change)."""
        tx = self._tx[run_id]
        assert tx.digest is not None
        key = self.key()
        tx.digest = digest_add(
            tx.digest,
            remove=task_mac(key, dict(before)) if before is not None else 0,
            add=task_mac(key, dict(after)),
        )

    def save(self) -> dict[str, _RunTx]:
        """What a rollback to a savepoint taken now restores (`restore`)."""
        return {run_id: replace(tx) for run_id, tx in self._tx.items()}

    def restore(self, saved: dict[str, _RunTx]) -> None:
        self._tx = saved

    def seal(self) -> dict[str, _Sealed]:
        """Write the seal of every run written in this transaction (O(1) each; the run row is
        read again only when it changed). Pass the result to `committed` after the commit."""
        sealed = {}
        for run_id in sorted(self._tx):
            digest = self.digest(run_id)
            tx = self._tx[run_id]
            if tx.valid is not None and not tx.run_changed:
                run_bytes = tx.valid.run_bytes
            else:
                run = self._sql("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
                run_bytes = canonical(dict(run))
            seal = run_seal(self.key(), tx.head, digest, run_bytes)
            self._sql(
                "INSERT INTO meta (key, value) VALUES (?, ?), (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (f"seal:{run_id}", seal, f"chain:{run_id}", tx.head),
            )
            sealed[run_id] = _Sealed(seal, digest, tx.head, run_bytes)
        self._tx = {}
        return sealed

    def committed(self, sealed: dict[str, _Sealed]) -> None:
        self._sealed.update(sealed)

    def abandon(self) -> None:
        self._tx = {}

    def verify(self, run_id: str) -> None:
        """Refuse (one-line `JournalError`) a run whose seal is missing or does not match its
        rows: one pass over its events and one over its task rows."""
        seal = self._meta(f"seal:{run_id}")
        key = self.key()
        chain = ""
        for row in self._sql("SELECT * FROM events WHERE run_id = ? ORDER BY seq", (run_id,)):
            chain = chain_link(key, chain, dict(row))
        digest = self._task_digest(run_id)
        run_row = self._sql("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        run_bytes = canonical(dict(run_row))
        if (
            seal is not None
            and hmac.compare_digest(chain, self._meta(f"chain:{run_id}") or "")
            and hmac.compare_digest(seal, run_seal(key, chain, digest, run_bytes))
        ):
            self._sealed[run_id] = _Sealed(seal, digest, chain, run_bytes)
            return
        if seal is not None and not seal.startswith(SEAL_VERSION + ":"):
            raise JournalError(
                f"{self._path}: run {run_id} was sealed by an older looprail (another seal "
                "format); this one cannot check it, so it is not resumed (start over with --new)"
            )
        why = "it carries no seal" if seal is None else "its seal does not match its rows"
        raise JournalError(
            f"{self._path}: run {run_id} was not written by this user's looprail on this "
            f"machine, or was changed outside looprail ({why}); refusing to resume it "
            "(start over with --new)"
        )

    def _meta(self, key: str) -> str | None:
        row = self._sql("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _task_digest(self, run_id: str) -> str:
        rows = self._sql("SELECT * FROM tasks WHERE run_id = ?", (run_id,))
        return task_digest(self.key(), (dict(row) for row in rows))
