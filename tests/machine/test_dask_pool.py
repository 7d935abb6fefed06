"""A Dask worker's pooled project copy (looprail/machine/dask/worker.py): brought up to date
by stat instead of copied afresh, it must always end as a fresh copy would be; and a task's
change found by stat must be every file it wrote or removed, even one rewritten in place at
once to the same size. Real files; property tests over random edits on both sides."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("distributed")

from looprail.machine.dask.worker import changes_since, snapshot, sync_tree
from tests.support import examples

# Paths a project may hold; "t" and "t/u" make a file become a folder and back.
PATHS = [
    "a",
    "b/c",
    "b/d",
    "e/f/g",
    "t",
    "t/u",
    ".git/HEAD",
    ".looprail/agents/x",
    ".looprail/journal.sqlite",
    ".looprail/skills/s",
]
contents = st.binary(min_size=0, max_size=6)
trees = st.dictionaries(st.sampled_from(PATHS), contents, max_size=len(PATHS))


def consistent(tree: dict[str, bytes]) -> dict[str, bytes]:
    return {p: v for p, v in tree.items() if not (p == "t" and "t/u" in tree)}


def write_tree(root: Path, tree: dict[str, bytes], *, in_place: bool = False) -> None:
    """Make `root` hold exactly `tree`; with `in_place`, files that stay are rewritten in
    place (same inode, possibly same size and the same coarse mtime)."""
    have = {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()}
    for rel in have - tree.keys():
        (root / rel).unlink()
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(folder.iterdir()):
            folder.rmdir()
    for rel, data in tree.items():
        path = root / rel
        for parent in reversed(path.relative_to(root).parents[:-1]):
            where = root / parent
            if where.is_file():
                where.unlink()
        if path.is_dir():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if in_place and path.is_file():
            with open(path, "r+b") as fh:
                fh.write(data)
                fh.truncate()
        else:
            path.write_bytes(data)


def read_tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def fresh_copy(tree: dict[str, bytes]) -> dict[str, bytes]:
    """What a worker's copy holds: no .git, and of .looprail only the executables' folders."""
    keep = (".looprail/agents/", ".looprail/skills/", ".looprail/commands/", ".looprail/checks/")
    return {
        p: v
        for p, v in tree.items()
        if not p.startswith(".git/") and (not p.startswith(".looprail/") or p.startswith(keep))
    }


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rounds=st.lists(st.tuples(trees, trees, st.booleans()), min_size=1, max_size=4))
def test_a_synced_copy_is_always_what_a_fresh_copy_would_be(tmp_path_factory, rounds):
    root = tmp_path_factory.mktemp("sync")
    source, copy = root / "source", root / "copy"
    source.mkdir()
    manifest: dict = {}
    for project, task_did, in_place in rounds:
        write_tree(source, consistent(project), in_place=in_place)
        manifest = sync_tree(source, copy, manifest)
        assert read_tree(copy) == fresh_copy(consistent(project))
        # A task then changes the copy any way it likes (in place, same size, at once).
        write_tree(copy, consistent(task_did), in_place=True)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(start=trees, after=trees)
def test_a_task_change_is_every_file_written_or_removed(tmp_path_factory, start, after):
    project = tmp_path_factory.mktemp("task")
    start, after = consistent(start), consistent(after)
    write_tree(project, start)
    before = snapshot(project)
    write_tree(project, after, in_place=True)  # at once: same size, same coarse mtime
    changes, _ = changes_since(project, before)
    visible = fresh_copy(after)
    visible = {p: v for p, v in visible.items() if not p.startswith(".looprail/")}
    old = {p: v for p, v in start.items() if not p.startswith((".looprail/", ".git/"))}
    expected = {p: v for p, v in visible.items() if old.get(p) != v}
    expected |= {p: None for p in old.keys() - visible.keys()}
    # Every real change is there; a file rewritten with the same content may be too (a task
    # wrote it), with that content.
    assert {p: v for p, v in changes.items() if p in expected} == expected
    assert all(visible.get(p) == v for p, v in changes.items() if p not in expected)


def test_symlinks_are_copied_as_links(tmp_path):
    source, copy = tmp_path / "s", tmp_path / "c"
    (source / "dir").mkdir(parents=True)
    (source / "dir" / "f").write_text("x")
    os.symlink("dir", source / "link")
    manifest = sync_tree(source, copy, {})
    assert os.readlink(copy / "link") == "dir"
    os.unlink(source / "link")
    os.symlink("dir/f", source / "link")
    sync_tree(source, copy, manifest)
    assert os.readlink(copy / "link") == "dir/f"


def git(*args: str, cwd: Path) -> str:
    import subprocess

    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env
    ).stdout


def test_a_pooled_clone_is_fetched_and_reset_to_the_remote_not_cloned_again(tmp_path):
    from looprail.machine.dask.worker import refresh

    if shutil.which("git") is None:
        pytest.skip("no git")
    remote, work, copy = tmp_path / "remote.git", tmp_path / "work", tmp_path / "copy"
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    git("clone", "-q", str(remote), str(work), cwd=tmp_path)
    (work / "plan.md").write_text("one\n")
    git("add", "-A", cwd=work)
    git("commit", "-qm", "one", cwd=work)
    git("push", "-q", "origin", "HEAD", cwd=work)
    refresh(f"git+{remote}", copy, {})
    assert (copy / "plan.md").read_text() == "one\n"
    marker = (copy / ".git").stat().st_ino
    # A task ran in the copy: it edited, added and ignored-added files.
    (copy / "plan.md").write_text("edited by a task\n")
    (copy / "new.txt").write_text("x")
    (copy / "build").mkdir()
    (copy / "build" / "out.o").write_text("x")
    # Meanwhile the project moved on.
    (work / "plan.md").write_text("two\n")
    (work / "second.md").write_text("2\n")
    git("add", "-A", cwd=work)
    git("commit", "-qm", "two", cwd=work)
    git("push", "-q", "origin", "HEAD", cwd=work)
    refresh(f"git+{remote}", copy, {})
    assert (copy / ".git").stat().st_ino == marker  # the same clone, fetched, not a new one
    files = {k: v for k, v in read_tree(copy).items() if not k.startswith(".git/")}
    assert files == {"plan.md": b"two\n", "second.md": b"2\n"}


def test_a_file_gone_while_syncing_is_left_out(tmp_path, monkeypatch):
    """The orchestrator writes atomically (a temporary file, then a rename) while plans start:
    a file listed and then gone is what a copy made a moment later would lack."""
    import looprail.machine.dask.worker as worker

    source, copy = tmp_path / "s", tmp_path / "c"
    (source / "phase").mkdir(parents=True)
    (source / "phase" / "PLAN.md").write_text("plan")
    (source / "phase" / ".SUMMARY.md.tmp").write_text("half")
    real = shutil.copy2

    def vanishing(src, dst, **kw):
        if str(src).endswith(".tmp"):
            os.replace(src, Path(src).with_name("SUMMARY.md"))  # renamed as it is copied
        return real(src, dst, **kw)

    monkeypatch.setattr(worker.shutil, "copy2", vanishing)
    manifest = sync_tree(source, copy, {})
    assert read_tree(copy) == {"phase/PLAN.md": b"plan"}
    monkeypatch.setattr(worker.shutil, "copy2", real)
    sync_tree(source, copy, manifest)  # the next plan's sync has it
    assert read_tree(copy) == {"phase/PLAN.md": b"plan", "phase/SUMMARY.md": b"half"}


# --------------------------------------------------------------------------- orphaned folders


def test_a_pool_folder_is_removed_only_once_its_worker_is_gone(tmp_path):
    """A worker's pool folder is locked for as long as the worker lives; a sweep leaves it
    alone then, and removes it once the worker was killed outright (no teardown ran)."""
    import signal
    import subprocess
    import sys

    from looprail.machine.dask.worker import remove_orphaned_folders

    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from looprail.machine.dask.worker import _claim_folder\n"
            "root, _ = _claim_folder()\n"
            "print(root, flush=True)\n"
            "time.sleep(60)\n",
        ],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        folder = Path(owner.stdout.readline().strip())
        assert folder.parent == tmp_path and folder.name.startswith("looprail-worker-")
        (folder / "copy-1").mkdir()
        assert remove_orphaned_folders(tmp_path) == []  # alive: kept, copies and all
        assert (folder / "copy-1").is_dir()
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        assert remove_orphaned_folders(tmp_path) == [folder]
        assert list(tmp_path.iterdir()) == []
    finally:
        owner.kill()
        owner.wait(timeout=10)
