"""Where each plan of a wave works: its own `git worktree` on a branch from the main tree's HEAD,
merged back in plan order after the wave (docs/agents.md, "Parallel plans work in git
worktrees"). `NullWorkspace` is the seam's no-op: every plan in the main tree."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TypeVar

from looprail.errors import MergeConflict
from looprail.fsutil import looprail_path
from looprail.layout import LOOPRAIL_DIR
from looprail.layout import WORKTREES_DIR as _WORKTREES
from looprail.machine.commits import Repo, has_identity, why
from looprail.runtime.base import DispatchContext

_T = TypeVar("_T")

WORKTREES_DIR = Path(LOOPRAIL_DIR) / _WORKTREES
_SHOWN = 8  # files named in the checkpoint's line


class NullWorkspace:
    """Every plan in the main tree; jobs as asked; nothing to prepare, commit, merge or remove."""

    def jobs(self, jobs: int, plans: int) -> int:
        return jobs

    def bind(self, plan_id: str, ctx: DispatchContext) -> DispatchContext:
        return ctx

    def prepare(self, wave: int, plan_ids: Sequence[str], jobs: int) -> None: ...
    def finished(self, plan_id: str) -> None: ...
    def merge(self, wave: int) -> None: ...
    def settle(self, wave: int) -> None: ...
    def close(self) -> None: ...


class GitWorkspace(NullWorkspace):
    def __init__(
        self,
        project: Path,
        run_id: str | None,
        *,
        warn: Callable[[str], None] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.project = Path(project).resolve()
        # An unjournaled run has no id to resume by: its own name, never an older run's.
        self.run = run_id or f"adhoc-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        self.warn = warn or (lambda _line: None)
        self.say = say or (lambda _line: None)
        self._bound: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._warned = False
        self.repo = Repo(self.project)
        self.git = self.repo.work_tree
        self._cleanup: threading.Thread | None = None
        self._setup: threading.Thread | None = None  # making the wave's worktrees
        self._ready: dict[str, Future[object]] = {}  # each plan's worktree, checked out
        self._committed: dict[str, list[str]] = {}  # plans committed by `finished`: secrets left
        self._wave_branches: dict[int, list[tuple[str, str]]] = {}
        self._pending: list[tuple[str, str]] = []  # the merged wave's branches, removed by `settle`

    def jobs(self, jobs: int, plans: int) -> int:
        if jobs > 1 and plans > 1 and not self.git:
            if not self._warned:
                self._warned = True
                self.warn(
                    f"{self.project} is not a git repository: plans run one at a time "
                    "(git init to run them in parallel, each in its own worktree)"
                )
            return 1
        return jobs

    def prepare(self, wave: int, plan_ids: Sequence[str], jobs: int) -> None:
        self.close()  # the wave before's worktrees are gone before this wave makes its own
        with self._lock:
            self._bound = {}
            self._ready = {}
            self._committed = {}
        if not self.git:
            return
        # New worktrees only when plans run in parallel; a resumed wave finds its old ones.
        fresh = jobs > 1 and len(plan_ids) > 1
        listed: Future[dict[int, list[tuple[str, str]]]] = Future()
        if fresh:  # the branch listing need not wait for the main tree's checkpoint
            lister = threading.Thread(target=_resolve, args=(listed, self._run_branches))
            lister.start()
            try:
                self.repo.exclude_state()
                self._checkpoint(wave)
            finally:
                lister.join()
        else:
            _resolve(listed, self._run_branches)
        every = listed.result()
        existing = {plan_id for plan_id, _ in every.get(wave, [])}
        # Branches of earlier waves are merged: left by a run killed before `settle`.
        stale = [pair for w, pairs in every.items() if w < wave for pair in pairs]
        if stale:
            self._remove(stale)
        wanted = [p for p in plan_ids if fresh or p in existing]
        self._worktrees(wave, wanted, existing)
        # What `merge` merges (a plan finished before a kill has a branch too), known now.
        found = {branch: plan_id for plan_id, branch in every.get(wave, [])}
        found.update({self.branch(wave, plan_id): plan_id for plan_id in wanted})
        self._wave_branches[wave] = sorted((plan_id, b) for b, plan_id in found.items())

    def bind(self, plan_id: str, ctx: DispatchContext) -> DispatchContext:
        """The plan's context in its worktree, once checked out (a failure to make it halts)."""
        with self._lock:
            path = self._bound.get(plan_id)
            ready = self._ready.get(plan_id)
        if ready is not None:
            ready.result()
        return ctx if path is None else ctx.model_copy(update={"workdir": path})

    def finished(self, plan_id: str) -> None:
        """A plan's tasks are all done: its worktree is committed now, while other plans run."""
        with self._lock:
            path = self._bound.get(plan_id)
            ready = self._ready.get(plan_id)
        if ready is not None:  # a plan with every task done before a kill never waited in bind
            ready.result()
        if path is None or not path.is_dir():
            return
        _, secrets, _ = self.repo.commit_all(path, _plan_message(plan_id, self.run))
        with self._lock:
            self._committed[plan_id] = secrets

    def merge(self, wave: int) -> None:
        self.close()
        if not self.git:
            return
        if (self.repo.git_dir() / "MERGE_HEAD").exists():
            raise MergeConflict(
                "a merge is in progress in the main tree; resolve the conflicts, commit, and run "
                "`looprail run` again"
            )
        branches = self._wave_branches.pop(wave, None)
        if branches is None:  # not prepared by this process
            branches = self._run_branches().get(wave, [])
        if not branches:
            return
        secrets = self._commit_rest(branches)
        # What the object store cannot merge (a conflict), `git merge` leaves to resolve.
        count = self._merge_objects(wave, branches)
        merged = [plan_id for plan_id, _ in branches[:count]]
        for plan_id, branch in branches[count:]:
            self._merge_branch(wave, plan_id, branch, merged)
            merged.append(plan_id)
        for plan_id, left in secrets.items():
            self._hand_over(plan_id, left)
        self._pending = branches

    def _commit_rest(self, branches: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
        """Commit what `finished` did not, in each worktree at once; the secrets left out."""
        with self._lock:
            committed, self._committed = self._committed, {}
        folders = [(plan_id, self._folder(plan_id)) for plan_id, _ in branches]
        # One never checked out has nothing to commit (its missing index: every file deleted).
        folders = [
            (p, path)
            for p, path in folders
            if p not in committed and path.is_dir() and _worktree_state(path) == "ready"
        ]
        results = _all_at_once(
            [
                partial(self.repo.commit_all, path, _plan_message(plan_id, self.run))
                for plan_id, path in folders
            ]
        )
        pairs = zip(folders, results, strict=True)
        left_out = {**committed, **{plan_id: left for (plan_id, _), (_, left, _) in pairs}}
        return {plan_id: left_out[plan_id] for plan_id, _ in branches if left_out.get(plan_id)}

    def _merge_branch(self, wave: int, plan_id: str, branch: str, merged: list[str]) -> None:
        """`git merge` of one plan's branch; a conflict is left in the main tree to resolve."""
        message = _merge_message(plan_id, self.run, wave)
        args = ["merge", "--no-ff", "--no-edit", "--no-stat", "-q", "--no-verify", "-m", message]
        done = self.repo.run([*args, branch], check=False)
        if done.exit_code == 0:
            return
        files = self.repo.out(["diff", "--name-only", "--diff-filter=U"]).split()
        if not files:  # refused before merging (e.g. local changes in the way)
            self.repo.run(["merge", "--abort"], check=False)
            raise MergeConflict(
                f"merging plan {plan_id} (branch {branch}) failed: {why(done)}; worktrees kept "
                f"under {WORKTREES_DIR}/{self.run}/"
            )
        others = self._touching(merged, wave, files, branch)
        against = f" with plan {', '.join(others)}" if others else ""
        raise MergeConflict(
            f"merge conflict: plan {plan_id}{against} in {', '.join(files)}; resolve "
            "them in the main tree and commit (git status shows the merge), then run "
            f"`looprail run` again (worktrees kept under {WORKTREES_DIR}/{self.run}/)"
        )

    def _merge_objects(self, wave: int, branches: Sequence[tuple[str, str]]) -> int:
        """Merge `branches` in order in git's object store (`merge-tree --write-tree`, git 2.38+,
        and `commit-tree`), then move the main tree once (`merge --ff-only`, which never
        overwrites a local change). How many merged (none if the main tree cannot move)."""
        done = self.repo.run(["rev-parse", "HEAD", "HEAD^{tree}"], check=False)
        ids = done.stdout.split()
        if done.exit_code != 0 or len(ids) != 2:
            return 0
        head, tree = ids
        tip, count = head, 0
        for plan_id, branch in branches:
            done = self.repo.run(["merge-tree", "--write-tree", "-z", tip, branch], check=False)
            merged_tree = done.stdout.split("\0", 1)[0].strip()
            if done.exit_code != 0 or not merged_tree:
                break  # a conflict (exit 1), or a git without --write-tree
            ancestor = ["merge-base", "--is-ancestor", branch, tip]
            if merged_tree == tree and self.repo.run(ancestor, check=False).exit_code == 0:
                count += 1  # nothing new: `git merge` says "Already up to date"
                continue
            message = _merge_message(plan_id, self.run, wave)
            parents = ["-p", tip, "-p", branch]
            made = self.repo.run(["commit-tree", merged_tree, *parents, "-m", message], check=False)
            if made.exit_code != 0 or not made.stdout.strip():
                break
            tip, tree, count = made.stdout.strip(), merged_tree, count + 1
        if tip != head:
            moved = self.repo.run(["merge", "--ff-only", "-q", "--no-stat", tip], check=False)
            if moved.exit_code != 0:
                return 0  # e.g. a local change in the way: each merge says which plan's
        return count

    def _hand_over(self, plan_id: str, files: Sequence[str]) -> None:
        """Files a plan wrote that look like secrets were not committed: they go into the main
        tree untracked, never over a file there already nor through a symlink out of it."""
        source = self._folder(plan_id)
        copied, kept = [], []
        for rel in files:
            src, dst = source / rel, self.project / rel
            inside = dst.parent.resolve().is_relative_to(self.project)
            if src.is_symlink() or not src.is_file() or os.path.lexists(dst) or not inside:
                kept.append(rel)
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
            copied.append(rel)
        lines = []
        if copied:
            lines.append(f"copied into the main tree, untracked: {', '.join(copied)}")
        if kept:
            lines.append(
                f"not copied (a file is there already, or not a plain file): {', '.join(kept)}"
            )
        self.warn(
            f"plan {plan_id} wrote files that look like secrets; not committed, " + "; ".join(lines)
        )

    def settle(self, wave: int) -> None:
        """Remove the finished wave's worktrees and branches in the background (`close` waits)."""
        branches, self._pending = self._pending, []
        if not self.git or not branches:
            return
        cleanup = threading.Thread(
            target=self._remove, args=(branches,), name="looprail-worktrees", daemon=True
        )
        self._cleanup = cleanup
        cleanup.start()

    def close(self) -> None:
        """Wait for the making of this wave's worktrees and the removal of the last wave's."""
        for thread in (self._setup, self._cleanup):
            if thread is not None:
                thread.join()
        self._setup = self._cleanup = None

    def _folder(self, plan_id: str | None = None) -> Path:
        parts = (_WORKTREES, self.run) + (() if plan_id is None else (plan_id,))
        return looprail_path(self.project, *parts)  # never out of the project

    def branch(self, wave: int, plan_id: str) -> str:
        return f"looprail/{_safe(self.run)}/w{wave}-{_safe(plan_id)}"

    def _worktrees(self, wave: int, plan_ids: Sequence[str], branches: set[str]) -> None:
        """Each plan's worktree: found again (a resumed run), or made in the background: the
        branches in one call, each worktree registered one at a time (concurrent `worktree add`s
        fail), all checked out at once. No agent runs before `bind` sees its worktree ready."""
        paths = {plan_id: self._folder(plan_id) for plan_id in plan_ids}
        state = {plan_id: _worktree_state(path) for plan_id, path in paths.items()}
        todo = [plan_id for plan_id in plan_ids if state[plan_id] != "ready"]
        ready: dict[str, Future[object]] = {plan_id: Future() for plan_id in todo}
        with self._lock:
            self._bound = dict(paths)
            self._ready = ready
        if not todo:
            return
        new = [self.branch(wave, plan_id) for plan_id in todo if plan_id not in branches]
        refs = "".join(f"create refs/heads/{name} HEAD\n" for name in new)

        def make() -> None:
            with ThreadPoolExecutor(len(todo), thread_name_prefix="looprail-git") as pool:
                try:
                    if refs:
                        self.repo.run(["update-ref", "--stdin"], stdin=refs)
                    if any(state[p] == "none" for p in todo) and self._stale_worktrees():
                        self.repo.run(["worktree", "prune"], check=False)  # paths reused
                    self._folder().mkdir(parents=True, exist_ok=True)
                except BaseException as exc:
                    for future in ready.values():
                        future.set_exception(exc)
                    return
                for plan_id in todo:
                    path, future = paths[plan_id], ready[plan_id]
                    try:
                        if state[plan_id] == "none":
                            branch = self.branch(wave, plan_id)
                            self.repo.run(["worktree", "add", "--no-checkout", str(path), branch])
                    except BaseException as exc:
                        future.set_exception(exc)
                        continue
                    checkout = partial(self.repo.run, ["reset", "-q", "--hard"], cwd=path)
                    pool.submit(_resolve, future, checkout)
            has_identity(self.project)  # asked once, before the merge needs it

        self._setup = threading.Thread(target=make, name="looprail-worktrees-add", daemon=True)
        self._setup.start()

    def _stale_worktrees(self) -> bool:
        """Whether git still lists a worktree whose folder (its `gitdir`'s) is gone."""
        admin = self.repo.git_dir(common=True) / "worktrees"
        try:
            entries = list(admin.iterdir())
        except OSError:
            return False
        for entry in entries:
            try:
                target = (entry / "gitdir").read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                return True  # half-made or broken: prune decides
            if not target or not os.path.exists(target):
                return True
        return False

    def _remove(self, branches: Sequence[tuple[str, str]]) -> None:
        """Remove the worktrees and branches of `branches`: one prune, one branch deletion."""
        base = self._folder()
        for plan_id, _ in branches:
            path = base / plan_id
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
        self.repo.run(["worktree", "prune"], check=False)
        self.repo.run(["branch", "-D", *(branch for _, branch in branches)], check=False)
        with contextlib.suppress(OSError):
            base.rmdir()  # only when empty

    def _run_branches(self) -> dict[int, list[tuple[str, str]]]:
        prefix = f"looprail/{_safe(self.run)}/w"
        names = self.repo.out(["branch", "--list", f"{prefix}*", "--format=%(refname:short)"])
        out: dict[int, list[tuple[str, str]]] = {}
        for name in names.split():
            wave, sep, plan_id = name[len(prefix) :].partition("-")
            if name.startswith(prefix) and sep and wave.isdigit():
                out.setdefault(int(wave), []).append((plan_id, name))
        return {w: sorted(pairs) for w, pairs in out.items()}

    def _touching(
        self, plan_ids: Sequence[str], wave: int, files: Sequence[str], against: str
    ) -> list[str]:
        """The merged plans of this wave that changed any of `files`."""
        out = []
        for plan_id in plan_ids:
            branch = self.branch(wave, plan_id)
            base = self.repo.out(["merge-base", against, branch]).strip()
            if not base:
                continue
            changed = set(self.repo.out(["diff", "--name-only", base, branch]).split())
            if changed & set(files):
                out.append(plan_id)
        return out

    def _checkpoint(self, wave: int) -> None:
        """Commit the main tree, so every worktree starts from it, and say what went in."""
        message = f"looprail: run {self.run} before wave {wave}"
        committed, secrets, head = self.repo.commit_all(self.project, message)
        if not head:  # no commit yet (and nothing to commit): worktrees need one to start from
            self.repo.run(["commit", "--allow-empty", "-q", "-m", "looprail: initial commit"])
        if committed:
            shown = ", ".join(committed[:_SHOWN])
            if len(committed) > _SHOWN:
                shown += f" and {len(committed) - _SHOWN} more"
            self.say(f"  wave {wave}: committed the main tree's changes first: {shown}")
        if secrets:
            self.warn(
                f"not committed before wave {wave} (they look like secrets; the plans' "
                f"worktrees will not have them): {', '.join(secrets)}; add them to .gitignore, "
                "or commit them yourself"
            )


def _worktree_state(path: Path) -> str:
    """A plan's worktree: "ready" (checked out: the checkout writes its index last),
    "registered" (never checked out: no agent ran there) or "none"."""
    dot_git = path / ".git"
    try:
        line = dot_git.read_text(encoding="utf-8", errors="replace").strip()
    except IsADirectoryError:
        return "ready"  # not one of looprail's worktrees: used as it is
    except OSError:
        return "none"
    admin = Path(line.removeprefix("gitdir:").strip())
    if not admin.is_absolute():
        admin = path / admin
    return "ready" if (admin / "index").exists() else "registered"


def _resolve(future: Future[_T], call: Callable[[], _T]) -> None:
    try:
        future.set_result(call())
    except BaseException as exc:
        future.set_exception(exc)


def _all_at_once(calls: Sequence[Callable[[], _T]]) -> list[_T]:
    """Run `calls` each on its own thread; their results in order (the first error raised)."""
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(len(calls), thread_name_prefix="looprail-git") as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


def _merge_message(plan_id: str, run: str, wave: int) -> str:
    return f"looprail: merge plan {plan_id} (run {run}, wave {wave})"


def _plan_message(plan_id: str, run: str) -> str:
    return f"looprail: plan {plan_id} (run {run})"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"
