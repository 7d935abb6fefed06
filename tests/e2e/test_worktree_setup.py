"""How a wave's worktrees are made and found again (machine/workspace.py), with the real git:
each plan's worktree is made in the background and its plan waits for its own; a worktree a
kill left registered but never checked out is checked out when found again (never used empty,
which would commit the deletion of every file); a worktree git cannot make halts its own plan
with git's reason; a plan's changes are committed when it finishes and merged with the rest,
ending where `git merge --no-ff` of each branch in plan order ends (a property test)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.errors import HaltError, MergeConflict
from looprail.machine.workspace import GitWorkspace
from looprail.runtime.base import DispatchContext

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is needed for plan worktrees",
)

IDENTITY = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **IDENTITY},
    ).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("hello\n")
    (root / "src" / "app.py").write_text("print('app')\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    return root


def workdir(ws: GitWorkspace, plan_id: str) -> Path:
    ctx = ws.bind(plan_id, DispatchContext(project=ws.project, phase_number="1"))
    assert ctx.workdir is not None
    return Path(ctx.workdir)


def test_each_plan_works_in_its_own_checked_out_worktree_and_is_merged_back(repo: Path) -> None:
    ws = GitWorkspace(repo, "r1")
    ws.prepare(1, ["01-01", "01-02", "01-03"], 3)
    for plan_id in ("01-01", "01-02", "01-03"):
        path = workdir(ws, plan_id)
        assert path.parent.name == "r1" and path.name == plan_id
        assert (path / "src" / "app.py").read_text() == "print('app')\n"
        assert git(path, "status", "--porcelain") == ""
        (path / f"{plan_id}.txt").write_text(f"by {plan_id}\n")
        ws.finished(plan_id)  # committed on the plan's thread, before the merge
        assert git(repo, "log", "--format=%s", "-1", ws.branch(1, plan_id)).startswith(
            f"looprail: plan {plan_id}"
        )
    ws.merge(1)
    ws.settle(1)
    ws.close()
    merges = git(repo, "log", "--format=%s", "--first-parent", "-3").splitlines()
    assert [m.split(" (")[0] for m in merges] == [
        "looprail: merge plan 01-03",
        "looprail: merge plan 01-02",
        "looprail: merge plan 01-01",
    ]
    tracked = set(git(repo, "ls-files").split())
    assert {"README.md", "src/app.py", "01-01.txt", "01-02.txt", "01-03.txt"} <= tracked
    assert git(repo, "branch", "--list", "looprail/*") == ""  # removed after the wave
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_worktree_registered_but_never_checked_out_is_checked_out_when_found_again(
    repo: Path,
) -> None:
    # A kill between `git worktree add --no-checkout` and the checkout leaves a worktree with
    # no index and no files: used as it is, the plan's commit would delete every file.
    killed = GitWorkspace(repo, "r2")
    path = killed._folder("01-01")
    git(repo, "branch", killed.branch(1, "01-01"))
    git(repo, "branch", killed.branch(1, "01-02"))
    git(repo, "worktree", "add", "-q", "--no-checkout", str(path), killed.branch(1, "01-01"))
    assert not (path / "README.md").exists()

    ws = GitWorkspace(repo, "r2")  # the resumed run
    ws.prepare(1, ["01-01", "01-02"], 2)
    assert workdir(ws, "01-01") == path
    assert (path / "README.md").read_text() == "hello\n"
    assert git(path, "status", "--porcelain") == ""
    (path / "new.txt").write_text("new\n")
    (workdir(ws, "01-02") / "other.txt").write_text("other\n")
    ws.merge(1)
    ws.close()
    tracked = set(git(repo, "ls-files").split())
    assert tracked == {"README.md", "src/app.py", "new.txt", "other.txt"}


def test_a_worktree_git_cannot_make_halts_its_own_plan_with_gits_reason(repo: Path) -> None:
    ws = GitWorkspace(repo, "r3")
    blocked = ws._folder("01-02")
    blocked.mkdir(parents=True)
    (blocked / "in-the-way.txt").write_text("x\n")  # not empty, not a worktree
    ws.prepare(1, ["01-01", "01-02", "01-03"], 3)
    assert (workdir(ws, "01-01") / "README.md").is_file()
    assert (workdir(ws, "01-03") / "README.md").is_file()
    with pytest.raises(HaltError, match=r"git worktree add failed: .*already exists"):
        ws.bind("01-02", DispatchContext(project=repo, phase_number="1"))
    ws.close()


def two_plans(repo: Path, run: str) -> GitWorkspace:
    ws = GitWorkspace(repo, run)
    ws.prepare(1, ["01-01", "01-02"], 2)
    (workdir(ws, "01-01") / "a.txt").write_text("a\n")
    (workdir(ws, "01-02") / "src" / "app.py").write_text("print('changed')\n")
    return ws


def test_the_merge_commits_are_those_of_git_merge_no_ff_and_a_merged_branch_is_a_no_op(
    repo: Path,
) -> None:
    ws = two_plans(repo, "r4")
    before = git(repo, "rev-parse", "HEAD").strip()
    ws.merge(1)
    ws.close()
    tips = [git(repo, "rev-parse", ws.branch(1, p)).strip() for p in ("01-01", "01-02")]
    first, second = git(repo, "log", "--format=%H %P", "--first-parent", "-2").splitlines()[::-1]
    assert first.split()[1:] == [before, tips[0]]
    assert second.split()[1:] == [first.split()[0], tips[1]]
    assert git(repo, "status", "--porcelain") == ""  # the main tree moved to the last merge
    assert (repo / "a.txt").read_text() == "a\n"
    assert (repo / "src" / "app.py").read_text() == "print('changed')\n"
    assert git(repo, "rev-parse", "ORIG_HEAD").strip() == before  # one step to undo the wave
    head = git(repo, "rev-parse", "HEAD").strip()
    again = GitWorkspace(repo, "r4")  # a resumed run merges the same branches again
    again.merge(1)
    assert git(repo, "rev-parse", "HEAD").strip() == head


def test_a_local_change_in_the_way_halts_naming_the_plan_and_merges_nothing(repo: Path) -> None:
    ws = two_plans(repo, "r5")
    before = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src" / "app.py").write_text("print('local')\n")  # uncommitted, in plan 01-02's way
    with pytest.raises(HaltError, match=r"merging plan 01-02 \(branch looprail/r5/w1-01-02\)"):
        ws.merge(1)
    ws.close()
    assert (repo / "src" / "app.py").read_text() == "print('local')\n"
    # What merged before the plan in the way stays merged, as with `git merge` one at a time.
    assert git(repo, "log", "--format=%s", "-1").startswith("looprail: merge plan 01-01")
    assert git(repo, "rev-parse", "HEAD~1").strip() == before


def test_a_plan_finished_without_waiting_in_bind_commits_only_once_checked_out(
    repo: Path,
) -> None:
    # A resumed plan whose tasks were all done never calls bind: `finished` waits for its
    # worktree (here registered by a killed run, never checked out) before committing.
    killed = GitWorkspace(repo, "r6")
    path = killed._folder("01-01")
    for plan_id in ("01-01", "01-02"):
        git(repo, "branch", killed.branch(1, plan_id))
    git(repo, "worktree", "add", "-q", "--no-checkout", str(path), killed.branch(1, "01-01"))
    ws = GitWorkspace(repo, "r6")
    ws.prepare(1, ["01-01", "01-02"], 2)
    ws.finished("01-01")
    (workdir(ws, "01-02") / "b.txt").write_text("b\n")
    ws.finished("01-02")
    ws.merge(1)
    ws.close()
    assert set(git(repo, "ls-files").split()) == {"README.md", "src/app.py", "b.txt"}


POOL = ("a.txt", "b.txt", "d/c.txt", "d/e/f.txt")
EDITS = st.dictionaries(
    st.sampled_from(POOL),
    st.one_of(st.none(), st.sampled_from(["1\n", "2\n", "1\n2\n"])),
    max_size=3,
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plans=st.lists(EDITS, min_size=2, max_size=3))
def test_the_merge_ends_where_git_merge_no_ff_plan_by_plan_ends(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, plans: list
) -> None:
    """Any plans' edits (None: the file deleted): the same tree as `git merge --no-ff` of each
    branch in plan order, or a halt at the same plan's conflict."""
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    root = tmp_path_factory.mktemp("prop")
    repo = root / "repo"
    (repo / "d" / "e").mkdir(parents=True)
    for name in POOL[:3]:
        (repo / name).write_text("0\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    ids = [f"01-0{i + 1}" for i in range(len(plans))]
    ws = GitWorkspace(repo, "prop")
    ws.prepare(1, ids, len(ids))
    for plan_id, edits in zip(ids, plans, strict=True):
        path = workdir(ws, plan_id)
        for name, text in edits.items():
            target = path / name
            if text is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
        ws.finished(plan_id)
    # What `git merge --no-ff` makes of the same branches, plan by plan, in a clone.
    git(root, "clone", "-q", str(repo), "clone")
    clone = root / "clone"
    expected: str | int = ""
    for i, plan_id in enumerate(ids):
        done = subprocess.run(
            ["git", "merge", "--no-ff", "--no-edit", "-q", f"origin/{ws.branch(1, plan_id)}"],
            cwd=clone,
            capture_output=True,
            env={**os.environ, **IDENTITY},
        )
        if done.returncode != 0:
            expected = i
            break
    else:
        expected = git(clone, "rev-parse", "HEAD^{tree}").strip()
    try:
        ws.merge(1)
    except MergeConflict as exc:
        halted_at = re.search(r"plan (\S+)", str(exc))
        assert halted_at and expected == ids.index(halted_at.group(1)), (expected, str(exc))
    else:
        assert git(repo, "rev-parse", "HEAD^{tree}").strip() == expected
        assert git(repo, "status", "--porcelain") == ""
    finally:
        ws.close()
