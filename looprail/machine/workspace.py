"""Where each plan of a wave works: its own `git worktree`, merged back after the wave.

Plans that run in parallel each get a worktree under `.looprail/worktrees/<run>/<plan>` on a
branch `looprail/<run>/w<wave>-<plan>`, made from the main tree's HEAD (the main tree's pending
changes are committed first, so every worktree starts from what the loop has so far). After the
wave each worktree's changes are committed and its branch merged into the main tree with
`git merge --no-ff`, in plan order. A conflict halts the run naming the plans and files; the
merge is left for the user to resolve and commit, and the worktrees are kept. The next
`looprail run` skips branches already merged and continues. A resumed run finds its worktrees
and branches again (or recreates a worktree from its branch).

Sequential plans work in the main tree. Outside a git repository plans run one at a time, with
one warning line. `NullWorkspace` is the seam's no-op (the local and scripted runtimes, tests).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from looprail.errors import HaltError, MergeConflict
from looprail.fsutil import looprail_path
from looprail.layout import LOOPRAIL_DIR
from looprail.layout import STATE_PATTERNS as _STATE
from looprail.layout import WORKTREES_DIR as _WORKTREES
from looprail.runtime.base import DispatchContext

WORKTREES_DIR = Path(LOOPRAIL_DIR) / _WORKTREES
# looprail's own state never belongs in a commit (written to .git/info/exclude, which needs no
# change to the user's .gitignore).
STATE_PATTERNS = tuple(f"/{LOOPRAIL_DIR}/{pattern}" for pattern in _STATE)
_IDENTITY = {
    "GIT_AUTHOR_NAME": "looprail",
    "GIT_AUTHOR_EMAIL": "looprail@localhost",
    "GIT_COMMITTER_NAME": "looprail",
    "GIT_COMMITTER_EMAIL": "looprail@localhost",
}


class NullWorkspace:
    """Every plan in the main tree; jobs as asked."""

    def jobs(self, jobs: int, plans: int) -> int:
        return jobs

    def prepare(self, wave: int, plan_ids: Sequence[str], jobs: int) -> None:
        return None

    def bind(self, plan_id: str, ctx: DispatchContext) -> DispatchContext:
        return ctx

    def merge(self, wave: int) -> None:
        return None


class GitWorkspace(NullWorkspace):
    def __init__(
        self, project: Path, run_id: str | None, *, warn: Callable[[str], None] | None = None
    ) -> None:
        self.project = Path(project).resolve()
        # An unjournaled run has no id to resume by: its own name, never an older run's.
        self.run = run_id or f"adhoc-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        self.warn = warn or (lambda _line: None)
        self.git = is_git_repo(self.project)
        self._bound: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._warned = False

    # -- the seam -------------------------------------------------------------------------

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
        with self._lock:
            self._bound = {}
        if not self.git:
            return
        # A resumed wave finds the worktrees it made before (even for a lone unfinished plan);
        # new ones are made only when plans really run in parallel.
        existing = {plan_id for plan_id, _ in self._branches(wave)}
        fresh = jobs > 1 and len(plan_ids) > 1
        if fresh:
            self._exclude_state()
            self._checkpoint(f"looprail: run {self.run} before wave {wave}")
        for plan_id in plan_ids:
            if fresh or plan_id in existing:
                path = self._worktree(wave, plan_id)
                with self._lock:
                    self._bound[plan_id] = path

    def bind(self, plan_id: str, ctx: DispatchContext) -> DispatchContext:
        with self._lock:
            path = self._bound.get(plan_id)
        return ctx if path is None else ctx.model_copy(update={"workdir": path})

    def merge(self, wave: int) -> None:
        if not self.git:
            return
        if (self._git_dir() / "MERGE_HEAD").exists():
            raise MergeConflict(
                "a merge is in progress in the main tree; resolve the conflicts, commit, and run "
                "`looprail run` again"
            )
        branches = self._branches(wave)
        merged: list[str] = []
        for plan_id, branch in branches:
            path = self.project / WORKTREES_DIR / self.run / plan_id
            if path.is_dir():
                self._commit_all(path, f"looprail: plan {plan_id} (run {self.run})")
            if self._merged(branch):
                merged.append(plan_id)
                continue
            done = self._run(
                [
                    "merge",
                    "--no-ff",
                    "--no-edit",
                    "--no-verify",
                    "-m",
                    f"looprail: merge plan {plan_id} (run {self.run}, wave {wave})",
                    branch,
                ],
                check=False,
            )
            if done.returncode != 0:
                files = self._out(["diff", "--name-only", "--diff-filter=U"]).split()
                if not files:  # refused before merging (e.g. local changes in the way)
                    self._run(["merge", "--abort"], check=False)
                    raise MergeConflict(
                        f"merging plan {plan_id} (branch {branch}) failed: "
                        f"{_last(done.stderr or done.stdout)}; worktrees kept under "
                        f"{WORKTREES_DIR}/{self.run}/"
                    )
                others = self._touching(merged, wave, files, branch)
                against = f" with plan {', '.join(others)}" if others else ""
                raise MergeConflict(
                    f"merge conflict: plan {plan_id}{against} in {', '.join(files)}; resolve "
                    "them in the main tree and commit (git status shows the merge), then run "
                    f"`looprail run` again (worktrees kept under {WORKTREES_DIR}/{self.run}/)"
                )
            merged.append(plan_id)
        for plan_id, branch in branches:
            path = self.project / WORKTREES_DIR / self.run / plan_id
            if path.exists():
                self._run(["worktree", "remove", "--force", str(path)], check=False)
            self._run(["branch", "-D", branch], check=False)
        self._run(["worktree", "prune"], check=False)
        with contextlib.suppress(OSError):
            (self.project / WORKTREES_DIR / self.run).rmdir()  # only when empty

    # -- git ------------------------------------------------------------------------------

    def branch(self, wave: int, plan_id: str) -> str:
        return f"looprail/{_safe(self.run)}/w{wave}-{_safe(plan_id)}"

    def _worktree(self, wave: int, plan_id: str) -> Path:
        path = looprail_path(self.project, _WORKTREES, self.run, plan_id)  # never out of it
        branch = self.branch(wave, plan_id)
        if path.is_dir() and (path / ".git").exists():
            return path  # a resumed run finds its worktree again
        self._run(["worktree", "prune"], check=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        if self._out(["branch", "--list", branch]).strip():
            self._run(["worktree", "add", str(path), branch])  # recreated from its branch
        else:
            self._run(["worktree", "add", "-b", branch, str(path), "HEAD"])
        return path

    def _branches(self, wave: int) -> list[tuple[str, str]]:
        prefix = f"looprail/{_safe(self.run)}/w{wave}-"
        names = self._out(["branch", "--list", f"{prefix}*", "--format=%(refname:short)"])
        out = [(n[len(prefix) :], n) for n in names.split() if n.startswith(prefix)]
        return sorted(out)  # plan order

    def _merged(self, branch: str) -> bool:
        done = self._run(["merge-base", "--is-ancestor", branch, "HEAD"], check=False)
        return done.returncode == 0

    def _touching(
        self, plan_ids: Sequence[str], wave: int, files: Sequence[str], against: str
    ) -> list[str]:
        """The merged plans of this wave that changed any of `files` (all branches of a wave
        fork from one commit, so their merge base with `against` is that commit)."""
        out = []
        for plan_id in plan_ids:
            branch = self.branch(wave, plan_id)
            base = self._out(["merge-base", against, branch]).strip()
            if not base:
                continue
            changed = set(self._out(["diff", "--name-only", base, branch]).split())
            if changed & set(files):
                out.append(plan_id)
        return out

    def _checkpoint(self, message: str) -> None:
        if not self._out(["rev-parse", "--verify", "-q", "HEAD"]).strip():
            self._run(["commit", "--allow-empty", "-q", "-m", "looprail: initial commit"])
        self._commit_all(self.project, message)

    def _commit_all(self, where: Path, message: str) -> None:
        self._run(["add", "-A"], cwd=where)
        if self._run(["diff", "--cached", "--quiet"], cwd=where, check=False).returncode:
            self._run(["commit", "-q", "--no-verify", "-m", message], cwd=where)

    def _exclude_state(self) -> None:
        exclude = self._git_dir(common=True) / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        have = exclude.read_text().splitlines() if exclude.exists() else []
        missing = [p for p in STATE_PATTERNS if p not in have]
        if missing:
            with open(exclude, "a", encoding="utf-8") as fh:
                fh.write("".join(f"{p}\n" for p in ["# looprail state", *missing]))

    def _git_dir(self, *, common: bool = False) -> Path:
        arg = "--git-common-dir" if common else "--git-dir"
        path = Path(self._out(["rev-parse", arg]).strip())
        return path if path.is_absolute() else self.project / path

    def _out(self, args: Sequence[str], cwd: Path | None = None) -> str:
        return self._run(args, cwd=cwd, check=False).stdout

    def _run(
        self, args: Sequence[str], *, cwd: Path | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = git(args, cwd or self.project)
        if check and done.returncode != 0:
            raise HaltError(f"git {' '.join(args[:2])} failed: {_last(done.stderr or done.stdout)}")
        return done


_identity_lock = threading.Lock()
_has_identity: dict[str, bool] = {}


def git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if args and args[0] in ("commit", "merge") and not _identity(cwd):
        env.update(_IDENTITY)  # only where the user has no identity configured
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return subprocess.CompletedProcess(["git", *args], 127, "", str(exc))


def _identity(cwd: Path) -> bool:
    key = str(cwd)
    with _identity_lock:
        if key not in _has_identity:
            try:
                done = subprocess.run(
                    ["git", "config", "user.email"], cwd=cwd, capture_output=True, text=True
                )
                have = done.returncode == 0 and bool(done.stdout.strip())
            except OSError:
                have = False
            _has_identity[key] = have or bool(os.environ.get("GIT_AUTHOR_EMAIL"))
        return _has_identity[key]


def is_git_repo(path: Path) -> bool:
    done = git(["rev-parse", "--is-inside-work-tree"], path)
    return done.returncode == 0 and done.stdout.strip() == "true"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"


def _last(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
