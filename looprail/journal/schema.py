"""The journal file itself: an SQLite file whose `meta` table holds `application_id =
looprail-journal`, schema version `PRAGMA user_version`, created and migrated here; anything
else at the journal path is refused with a one-line `JournalError` before anything is written.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from looprail.errors import JournalError
from looprail.errors import NoJournalError as NoJournalError  # re-exported

APPLICATION_ID = "looprail-journal"
BUSY_TIMEOUT_MS = 10_000
_SQLITE_MAGIC = b"SQLite format 3\x00"

# Migrations: MIGRATIONS[n] takes the schema from version n to n + 1. Each runs in one
# transaction together with the `user_version` bump. Append only; never edit a released step.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"INSERT INTO meta (key, value) VALUES ('application_id', '{APPLICATION_ID}')",
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            phase TEXT NOT NULL,
            status TEXT NOT NULL
                CHECK (status IN ('running', 'halted', 'shipped', 'failed', 'paused')),
            started_at TEXT NOT NULL,
            ended_at TEXT,
            state TEXT NOT NULL DEFAULT '[]',
            machine_config TEXT NOT NULL DEFAULT '{}',
            inputs_digest TEXT NOT NULL DEFAULT '{}',
            pid INTEGER,
            host TEXT,
            halt_reason TEXT
        )""",
        "CREATE INDEX runs_by_phase ON runs (phase, started_at)",
        """CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL REFERENCES runs (id),
            ts TEXT NOT NULL,
            kind TEXT NOT NULL,
            point TEXT,
            wave INTEGER,
            plan_id TEXT,
            task_id TEXT,
            cap_id TEXT,
            hook_kind TEXT,
            outcome TEXT,
            duration_ms INTEGER,
            message TEXT,
            data TEXT NOT NULL DEFAULT '{}'
        )""",
        "CREATE INDEX events_by_run ON events (run_id, seq)",
        """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
        """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
        """CREATE TABLE tasks (
            run_id TEXT NOT NULL REFERENCES runs (id),
            task_key TEXT NOT NULL,
            plan_id TEXT,
            wave INTEGER,
            status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
            attempt INTEGER NOT NULL DEFAULT 0,
            started_at TEXT,
            ended_at TEXT,
            PRIMARY KEY (run_id, task_key)
        )""",
    ),
]


def schema_version() -> int:
    """The schema version this code writes (the number of migrations)."""
    return len(MIGRATIONS)


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """SQLite errors met on the journal at `path` become one-line JournalErrors (`translate`)."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise translate(path, exc) from None


def check_links(path: Path) -> None:
    """Refuse a journal (or its `-wal`/`-shm` file) that is a symbolic link: `status` would write
    where it points, and `run` would create a dangling link's target."""
    for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if candidate.is_symlink():
            raise JournalError(
                f"{candidate}: is a symbolic link (to {os.readlink(candidate)}); refusing to "
                "use it as the journal (move it aside)"
            )


def check_header(path: Path) -> None:
    """Refuse a non-empty file that is not SQLite before SQLite touches it."""
    check_links(path)
    try:
        # Non-blocking: opening a FIFO for reading would otherwise wait for a writer forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise JournalError(f"{path}: cannot read the journal ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise JournalError(f"{path}: not a regular file; refusing to use it as the journal")
        header = os.pread(fd, len(_SQLITE_MAGIC), 0)
    except OSError as exc:
        raise JournalError(f"{path}: cannot read the journal ({exc.strerror})") from None
    finally:
        os.close(fd)
    if header and header != _SQLITE_MAGIC:
        raise JournalError(
            f"{path}: is corrupt (not an SQLite database: wrong file header); "
            "move it aside to start a new journal"
        )


def prepare(conn: sqlite3.Connection, path: Path) -> None:
    """Pragmas, identification, integrity check, migrations."""
    with reading(path):
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = FULL")
        version = _identify(conn, path)
        # Only now that the file is known to be ours (or empty) may it be changed.
        conn.execute("PRAGMA journal_mode = WAL")
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise JournalError(
                f"{path}: is corrupt ({problems[0]}); move it aside to start a new journal"
            )
        if version < schema_version():
            _migrate(conn, path)
        check_shape(conn, path)


def connect(path: Path, *, create: bool = True, readonly: bool = False) -> sqlite3.Connection:
    """A connection to the journal at `path` (explicit transactions only), created or migrated
    with `create` (else NoJournalError when there is none). `readonly`: nothing written, no
    integrity scan (a reader meets damage in the pages it reads: `translate` says so)."""
    check_links(path)  # before anything else: a dangling link "does not exist"
    if not path.exists():
        if readonly or not create:
            raise NoJournalError(f"{path}: no journal yet (no run has been recorded)")
        path.parent.mkdir(parents=True, exist_ok=True)
    check_header(path)
    try:
        conn = sqlite3.connect(
            path.resolve().as_uri() + "?mode=ro" if readonly else path,
            uri=readonly,
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
    except sqlite3.Error as exc:
        raise JournalError(f"{path}: cannot open the journal ({exc})") from None
    try:
        (identify_readonly if readonly else prepare)(conn, path)
    except BaseException:
        conn.close()
        raise
    conn.row_factory = sqlite3.Row
    return conn


def identify_readonly(conn: sqlite3.Connection, path: Path) -> None:
    """Checks for a read-only connection: the file is a looprail journal at this schema
    version (nothing is migrated or changed). An empty file is 'no journal yet'."""
    with reading(path):
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only = ON")
        version = _identify(conn, path)
    if version == 0:
        raise NoJournalError(f"{path}: no journal yet (no run has been recorded)")
    if version < schema_version():
        raise JournalError(
            f"{path}: journal schema version {version} is older than this looprail's "
            f"({schema_version()}); run any looprail command that writes it to migrate"
        )
    with reading(path):
        check_shape(conn, path)


@functools.cache
def _expected_shape() -> dict[str, set[str]]:
    """Table → columns of a journal built by the migrations (built once, in memory)."""
    mem = sqlite3.connect(":memory:")
    try:
        for step in MIGRATIONS:
            for statement in step:
                mem.execute(statement)
        return _shape(mem)
    finally:
        mem.close()


def _shape(conn: sqlite3.Connection) -> dict[str, set[str]]:
    info = "SELECT name FROM pragma_table_info(?)"
    return {t: {row[0] for row in conn.execute(info, (t,))} for t in _tables(conn)}


def _tables(conn: sqlite3.Connection) -> list[str]:
    """The database's own tables (not SQLite's), by name."""
    sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
    return [row[0] for row in conn.execute(sql + "ORDER BY name")]


def check_shape(conn: sqlite3.Connection, path: Path) -> None:
    """A file with our meta row must also have our tables and columns (a hand-made or damaged
    journal would otherwise fail later with a bare SQLite error)."""
    actual = _shape(conn)
    for table, columns in sorted(_expected_shape().items()):
        if table not in actual:
            raise JournalError(
                f"{path}: is not a valid looprail journal (table {table} is missing); "
                "move it aside to start a new journal"
            )
        missing = sorted(columns - actual[table])
        if missing:
            raise JournalError(
                f"{path}: is not a valid looprail journal (table {table} lacks column "
                f"{missing[0]}); move it aside to start a new journal"
            )


def _identify(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version: 0 for an empty database, else it must carry our meta row."""
    tables = _tables(conn)
    version = conn.execute("PRAGMA user_version").fetchone()[0]

    def foreign(why: str) -> JournalError:
        return JournalError(f"{path}: not a looprail journal ({why}); refusing to touch it")

    if not tables:
        if version == 0:
            return 0
        raise foreign(f"schema version {version} but no tables")
    if "meta" not in tables:
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        raise foreign(f"it holds tables {shown} and no meta table")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'application_id'").fetchone()
    except sqlite3.OperationalError as exc:
        raise foreign(f"its meta table has another shape: {exc}") from None
    if row is None or row[0] != APPLICATION_ID:
        raise foreign("no application id" if row is None else f"application id {row[0]!r}")
    if version > schema_version():
        raise JournalError(
            f"{path}: journal schema version {version} is newer than this looprail understands "
            f"({schema_version()}); upgrade looprail to use it"
        )
    if version < 1:
        raise JournalError(
            f"{path}: is corrupt (meta table present but schema version {version}); "
            "move it aside to start a new journal"
        )
    return version


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    while True:
        conn.execute("BEGIN IMMEDIATE")
        # Re-read inside the write lock: another process may have migrated meanwhile.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version >= schema_version():
            conn.execute("COMMIT")
            return
        try:
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if conn.in_transaction:  # SQLite may have rolled back already (e.g. disk full)
                conn.execute("ROLLBACK")
            if exc.sqlite_errorname in _FILE_ERRORS:
                raise
            raise JournalError(
                f"{path}: migrating the journal to schema version {version + 1} failed ({exc}); "
                f"it is left at version {version}"
            ) from None


_FILE_ERRORS = frozenset(
    {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL"}
)


def translate(path: Path, exc: sqlite3.DatabaseError) -> Exception:
    """SQLite failures a person can act on become one-line JournalErrors; bugs stay bugs."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or name.startswith("SQLITE_CORRUPT"):
        return JournalError(f"{path}: is corrupt ({exc}); move it aside to start a new journal")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return JournalError(
            f"{path}: the journal stayed locked by another process for "
            f"{BUSY_TIMEOUT_MS // 1000}s ({exc})"
        )
    if name == "SQLITE_FULL":
        return JournalError(f"{path}: cannot write the journal: the disk is full")
    if name.startswith(("SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM")):
        return JournalError(f"{path}: cannot use the journal ({exc})")
    return exc
