"""A journal is only resumed if this user's looprail wrote it on this machine (a seal keyed by a
per-user secret outside the project), and hostile journal files are refused in one line:
a symlinked journal (status must not write through it; run must not create a dangling link's
target) and a file with the right meta row but the wrong schema."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.loop import gated_project


def run(project: Path, caps: Path, home: Path, *extra: str):
    return run_cli(
        "run",
        str(project),
        "--phase",
        "1",
        "--capabilities",
        str(caps),
        *extra,
        env={"HOME": str(home)},
    )


def test_a_run_resumes_under_the_same_user_key(tmp_path):
    project, caps = gated_project(tmp_path)
    home = tmp_path / "home"
    first = run(project, caps, home)
    assert first.returncode == 1 and "not ready" in first.stdout + first.stderr
    key = home / ".looprail" / "journal.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    (project / ".ready").write_text("")
    again = run(project, caps, home)
    assert again.returncode == 0, again.stderr
    assert "resuming run" in again.stdout + again.stderr
    assert (project / "SHIPPED").exists()


def test_a_journal_planted_by_another_user_is_not_resumed(tmp_path):
    project, caps = gated_project(tmp_path)
    first = run(project, caps, tmp_path / "alice")
    assert first.returncode == 1
    # Someone else (another key) meets the journal, say committed to the repository.
    other = run(project, caps, tmp_path / "bob")
    assert other.returncode == 1
    err = other.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in other.stderr
    assert "was not written by this user's looprail on this machine" in err
    assert "--new" in err
    assert not (project / "SHIPPED").exists()


def test_a_journal_edited_outside_looprail_is_not_resumed(tmp_path):
    """The attack: mark the halted run as past the blocking ship:pre gate, then resume."""
    project, caps = gated_project(tmp_path)
    home = tmp_path / "home"
    assert run(project, caps, home).returncode == 1
    db = sqlite3.connect(project / ".looprail" / "journal.sqlite")
    db.execute("UPDATE runs SET state = ?", (json.dumps(["ship"]),))
    db.commit()
    db.close()
    resumed = run(project, caps, home)
    assert resumed.returncode == 1
    assert "its seal does not match its rows" in resumed.stderr
    assert not (project / "SHIPPED").exists()
    # Starting over is allowed, and the gate is asked again (it still blocks).
    fresh = run(project, caps, home, "--new")
    assert fresh.returncode == 1 and "not ready" in fresh.stdout + fresh.stderr
    assert not (project / "SHIPPED").exists()


def test_an_appended_event_breaks_the_seal_too(tmp_path):
    project, caps = gated_project(tmp_path)
    home = tmp_path / "home"
    assert run(project, caps, home).returncode == 1
    db = sqlite3.connect(project / ".looprail" / "journal.sqlite")
    run_id = db.execute("SELECT id FROM runs").fetchone()[0]
    db.execute(
        "INSERT INTO events (run_id, ts, kind, outcome) VALUES (?, 'x', 'task_finished', 'approved')",
        (run_id,),
    )
    db.commit()
    db.close()
    resumed = run(project, caps, home)
    assert resumed.returncode == 1 and "seal" in resumed.stderr


def test_a_key_readable_by_others_is_refused(tmp_path):
    project, caps = gated_project(tmp_path)
    home = tmp_path / "home"
    assert run(project, caps, home).returncode == 1
    key = home / ".looprail" / "journal.key"
    key.chmod(0o644)
    again = run(project, caps, home)
    assert again.returncode == 1
    assert "readable or writable by others" in again.stderr and "chmod 600" in again.stderr
    assert "Traceback" not in again.stderr


def test_looprail_home_holds_the_key(tmp_path):
    project, caps = gated_project(tmp_path)
    where = tmp_path / "lrhome"
    res = run_cli(
        "run",
        str(project),
        "--phase",
        "1",
        "--capabilities",
        str(caps),
        env={"HOME": str(tmp_path / "home"), "LOOPRAIL_HOME": str(where)},
    )
    assert res.returncode == 1
    assert (where / "journal.key").exists()
    assert not (tmp_path / "home" / ".looprail").exists()


# -- hostile journal files ----------------------------------------------------------------------


def test_status_does_not_write_through_a_symlinked_journal(tmp_path):
    project, caps = gated_project(tmp_path)
    home = tmp_path / "home"
    assert run(project, caps, home).returncode == 1
    journal = project / ".looprail" / "journal.sqlite"
    outside = tmp_path / "outside.sqlite"
    journal.rename(outside)
    for side in ("-wal", "-shm"):
        Path(str(journal) + side).unlink(missing_ok=True)
    journal.symlink_to(outside)
    before = outside.read_bytes()
    mtime = outside.stat().st_mtime_ns
    res = run_cli("status", "--project", str(project), env={"HOME": str(home)})
    assert res.returncode != 0
    assert "is a symbolic link" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert outside.read_bytes() == before and outside.stat().st_mtime_ns == mtime
    assert not Path(str(outside) + "-wal").exists()


def test_run_does_not_create_a_dangling_journal_links_target(tmp_path):
    project, caps = gated_project(tmp_path)
    target = tmp_path / "elsewhere" / "journal.sqlite"
    target.parent.mkdir()
    (project / ".looprail" / "journal.sqlite").symlink_to(target)
    res = run(project, caps, tmp_path / "home")
    assert res.returncode != 0 and "is a symbolic link" in res.stderr
    assert "Traceback" not in res.stderr
    assert not target.exists()
    assert not (project / "out").exists()  # nothing ran


@pytest.mark.parametrize(
    "runs_table",
    [
        "CREATE TABLE runs (id TEXT PRIMARY KEY)",
        "CREATE TABLE other (x)",
    ],
    ids=["runs-lacks-columns", "no-runs-table"],
)
def test_right_meta_row_wrong_schema_is_one_line(tmp_path, runs_table):
    project = tmp_path / "project"
    (project / ".planning").mkdir(parents=True)
    (project / ".looprail").mkdir()
    db = sqlite3.connect(project / ".looprail" / "journal.sqlite")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('application_id', 'looprail-journal')")
    db.execute(runs_table)
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    for args in (["status", "--project", str(project)], ["history", "--project", str(project)]):
        res = run_cli(*args, env={"HOME": str(tmp_path / "home")})
        assert res.returncode != 0
        assert "Traceback" not in res.stderr
        assert "is not a valid looprail journal" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1


def test_the_key_file_is_never_followed_as_a_symlink(tmp_path):
    from looprail.journal.seal import SealError, user_key

    real = tmp_path / "real.key"
    real.write_text("00" * 32)
    real.chmod(0o600)
    link = tmp_path / "home" / "journal.key"
    link.parent.mkdir()
    link.symlink_to(real)
    with pytest.raises(SealError, match="regular file"):
        user_key(link)
    assert os.path.islink(link)
