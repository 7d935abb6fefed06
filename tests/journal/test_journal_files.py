"""What is at the journal path decides what happens: an empty database is migrated from version
0; a garbage, corrupt, foreign or newer file is refused with one line and left untouched."""

from __future__ import annotations

import sqlite3

import pytest

from looprail.journal import Journal, JournalError, journal_path, schema_version
from looprail.journal import schema as schema_module


def make_path(tmp_path):
    path = journal_path(tmp_path)
    path.parent.mkdir(parents=True)
    return path


def assert_one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_an_empty_version_0_database_is_migrated(tmp_path):
    path = make_path(tmp_path)
    sqlite3.connect(path).close()  # a valid, empty SQLite file at user_version 0
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (0,)
    conn.close()
    with Journal.open(tmp_path) as journal:
        assert journal.pragma("user_version") == schema_version()
        run_id = journal.start_run("01")
        assert journal.get_run(run_id) is not None


def test_a_newer_migration_is_applied_to_an_existing_journal(tmp_path, monkeypatch):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01", state=["plan"])
    extra = (
        "ALTER TABLE tasks ADD COLUMN note TEXT",
        "CREATE INDEX tasks_by_status ON tasks(status)",
    )
    monkeypatch.setattr(schema_module, "MIGRATIONS", [*schema_module.MIGRATIONS, extra])
    with Journal.open(tmp_path) as journal:
        assert journal.pragma("user_version") == 2
        run = journal.get_run(run_id)
        assert run is not None and run.state == ["plan"]
    columns = [
        row[1]
        for row in sqlite3.connect(journal_path(tmp_path)).execute("PRAGMA table_info(tasks)")
    ]
    assert "note" in columns


def test_a_failing_migration_leaves_the_journal_at_its_old_version(tmp_path, monkeypatch):
    with Journal.open(tmp_path) as journal:
        journal.start_run("01")
    broken = ("ALTER TABLE tasks ADD COLUMN note TEXT", "THIS IS NOT SQL")
    monkeypatch.setattr(schema_module, "MIGRATIONS", [*schema_module.MIGRATIONS, broken])
    with pytest.raises(JournalError) as exc:
        Journal.open(tmp_path)
    message = assert_one_line(exc)
    assert "migrating the journal to schema version 2 failed" in message
    assert "left at version 1" in message
    conn = sqlite3.connect(journal_path(tmp_path))
    assert conn.execute("PRAGMA user_version").fetchone() == (1,)
    # The first statement of the failed step was rolled back with it.
    assert "note" not in [row[1] for row in conn.execute("PRAGMA table_info(tasks)")]


def test_garbage_bytes_are_a_corrupt_journal_and_are_not_overwritten(tmp_path):
    path = make_path(tmp_path)
    garbage = bytes(range(256)) * 8
    path.write_bytes(garbage)
    with pytest.raises(JournalError) as exc:
        Journal.open(tmp_path)
    message = assert_one_line(exc)
    assert message.startswith(f"{path}: is corrupt (")
    assert message.endswith("move it aside to start a new journal")
    assert path.read_bytes() == garbage


def test_a_damaged_sqlite_journal_is_reported_corrupt(tmp_path):
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01")
        for n in range(200):
            journal.task_started(run_id, f"task-{n}", plan_id="p" * 200)
    path = journal_path(tmp_path)
    assert not path.with_name(path.name + "-wal").exists()  # checkpointed on close
    data = bytearray(path.read_bytes())
    page_size = 4096
    assert len(data) > 4 * page_size
    # Trash every page but the header page: the schema is intact, the tables are not.
    for offset in range(page_size, len(data)):
        data[offset] = 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(JournalError) as exc, Journal.open(tmp_path) as journal:
        journal.events(run_id)
    message = assert_one_line(exc)
    assert message.startswith(f"{path}: is corrupt (")
    assert "move it aside" in message


def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path):
    path = make_path(tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(JournalError) as exc:
        Journal.open(tmp_path)
    message = assert_one_line(exc)
    assert message.startswith(f"{path}: not a looprail journal (")
    assert "customers" in message
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # not switched to WAL
    assert conn.execute("SELECT name FROM customers").fetchall() == [("ada",)]


def test_a_database_with_another_application_id_is_refused(tmp_path):
    path = make_path(tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('application_id', 'someone-else')")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with pytest.raises(
        JournalError, match=r"not a looprail journal \(application id 'someone-else'\)"
    ):
        Journal.open(tmp_path)


def test_a_journal_from_a_newer_looprail_is_refused(tmp_path):
    with Journal.open(tmp_path) as journal:
        journal.start_run("01")
    path = journal_path(tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(JournalError) as exc:
        Journal.open(tmp_path)
    message = assert_one_line(exc)
    assert message == (
        f"{path}: journal schema version 99 is newer than this looprail understands "
        f"({schema_version()}); upgrade looprail to use it"
    )
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (99,)


def test_cli_reports_a_foreign_journal_in_one_line(tmp_path, capsys):
    from looprail.cli import main

    path = make_path(tmp_path)
    path.write_bytes(b"not a database at all, just text\n" * 10)
    assert main(["status", "--project", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"looprail: error: {path}: is corrupt (")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("create", [True, False])
def test_a_fifo_at_the_journal_path_is_refused_without_blocking(tmp_path, create):
    # Opening a FIFO for reading waits for a writer forever; `looprail status` must not hang.
    import os

    path = journal_path(tmp_path)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with pytest.raises(JournalError, match=r"journal\.sqlite: not a regular file"):
        Journal.open(tmp_path, create=create)
