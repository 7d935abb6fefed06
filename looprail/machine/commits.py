"""How looprail commits in a user's repository: with looprail's identity where the user has
none, never the untracked files that look like secrets."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path

from looprail.errors import HaltError
from looprail.layout import LOOPRAIL_DIR
from looprail.layout import STATE_PATTERNS as _STATE
from looprail.runtime.git import git as run_git
from looprail.runtime.process import ProcessResult


def exclude_state(project: Path) -> None:
    """looprail's run state in the `info/exclude` of the repository `project` is in, so that no
    commit (GSD's `commit_docs` too) takes it. Every run does this before it writes."""
    repo = Repo(project)
    if repo.work_tree:
        repo.exclude_state()


_IDENTITY = {
    "GIT_AUTHOR_NAME": "looprail",
    "GIT_AUTHOR_EMAIL": "looprail@localhost",
    "GIT_COMMITTER_NAME": "looprail",
    "GIT_COMMITTER_EMAIL": "looprail@localhost",
}
_identity_lock = threading.Lock()
_has_identity: dict[str, bool] = {}


def git(
    args: Sequence[str], cwd: Path, *, stdin: str | None = None, repo: Path | None = None
) -> ProcessResult:
    """`runtime.git.git`, with looprail's identity for a commit or merge where the user has
    none (asked once per `repo`, the main tree)."""
    env = None
    if args and args[0] in ("commit", "commit-tree", "merge") and not has_identity(repo or cwd):
        env = {**os.environ, **_IDENTITY}  # only where the user has no identity configured
    return run_git(args, cwd, env=env, stdin=stdin)


def has_identity(cwd: Path) -> bool:
    key = str(cwd)
    with _identity_lock:
        if key not in _has_identity:
            done = run_git(["config", "user.email"], cwd, timeout_s=30)
            have = done.exit_code == 0 and bool(done.stdout.strip())
            _has_identity[key] = have or bool(os.environ.get("GIT_AUTHOR_EMAIL"))
        return _has_identity[key]


# Untracked files with these names (or endings), in any folder, are never committed by looprail
# on its own: credentials usually live there, and a commit copies them into history.
SECRET_NAMES = (".env", ".envrc", ".netrc", ".npmrc", ".pypirc", ".pgpass", "credentials")
SECRET_PREFIXES = (".env.", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
SAMPLE_SUFFIXES = (".example", ".sample", ".template", ".dist")
SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".keystore", ".jks")


def is_secret(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    if name.endswith(SAMPLE_SUFFIXES):  # `.env.example`: a template, meant to be committed
        return False
    return (
        name in SECRET_NAMES or name.startswith(SECRET_PREFIXES) or name.endswith(SECRET_SUFFIXES)
    )


def parse_status(text: str) -> tuple[list[str], list[str], bool]:
    """`git status --porcelain=v2 -z --branch --no-renames`: (changed paths, untracked paths,
    whether HEAD names a commit)."""
    changed: list[str] = []
    untracked: list[str] = []
    head = True
    for entry in text.split("\0"):
        if entry.startswith("# branch.oid "):
            head = entry != "# branch.oid (initial)"
        elif entry.startswith("1 "):
            changed.append(entry.split(" ", 8)[-1])
        elif entry.startswith("u "):
            changed.append(entry.split(" ", 10)[-1])
        elif entry.startswith("? "):
            untracked.append(entry[2:])
    return changed, untracked, head


def why(done: ProcessResult) -> str:
    """Why a git call failed, in one line."""
    if done.spawn_error or done.timed_out:
        return done.describe_failure()
    lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


class Repo:
    """The repository around `project` (a work tree? its git folders: asked in one call)."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self._dirs: dict[bool, Path] = {}
        asked = ["--is-inside-work-tree", "--git-dir", "--git-common-dir", "--show-prefix"]
        done = git(["rev-parse", *asked], project)
        lines = done.stdout.splitlines() if done.exit_code == 0 else []
        self.work_tree = len(lines) >= 3 and lines[0] == "true"
        self.prefix = lines[3] if self.work_tree and len(lines) > 3 else ""
        if self.work_tree:
            for common, line in ((False, lines[1]), (True, lines[2])):
                path = Path(line)
                self._dirs[common] = path if path.is_absolute() else project / path

    def commit_all(self, where: Path, message: str) -> tuple[list[str], list[str], bool]:
        """Commit every change in `where` but untracked files that look like secrets: (the
        files committed, the secrets left out, whether there is a commit at all)."""
        status = self.out(
            ["status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--no-renames"],
            cwd=where,
        )
        changed, untracked, head = parse_status(status)
        secrets = sorted(p for p in untracked if is_secret(p))
        keep = sorted({*changed, *untracked} - set(secrets))
        if not keep:
            return [], secrets, head
        self.run(
            ["add", "-A", "--", ".", *(f":(top,exclude,literal){p}" for p in secrets)], cwd=where
        )
        self.run(["commit", "-q", "--no-verify", "-m", message], cwd=where)
        return keep, secrets, True

    def exclude_state(self) -> None:
        """looprail's state patterns in the repository's `info/exclude`, written only to the
        real file (a symlink there halts the run)."""
        info = self.git_dir(common=True) / "info"
        with contextlib.suppress(FileExistsError):
            info.mkdir(parents=True)
        flags = os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            folder = os.open(info, os.O_RDONLY | os.O_DIRECTORY | flags)
            try:
                fd = os.open(
                    "exclude", os.O_RDWR | os.O_CREAT | os.O_APPEND | flags, 0o644, dir_fd=folder
                )
            finally:
                os.close(folder)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and (
                info.is_symlink() or (info / "exclude").is_symlink()
            ):
                reason = "a symlink: looprail writes only the real file"
            raise HaltError(
                f"{info / 'exclude'}: cannot add looprail's state to it ({reason})"
            ) from None
        with os.fdopen(fd, "r+b") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise HaltError(f"{info / 'exclude'}: not a regular file")
            text = fh.read().decode("utf-8", errors="replace")
            # anchored at the project folder (`prefix`: where it sits in the repository)
            patterns = [f"/{self.prefix}{LOOPRAIL_DIR}/{p}" for p in _STATE]
            missing = [p for p in patterns if p not in text.splitlines()]
            if missing:
                lead = "\n" if text and not text.endswith("\n") else ""
                block = "".join(f"{p}\n" for p in ["# looprail state", *missing])
                fh.write((lead + block).encode())

    def git_dir(self, *, common: bool = False) -> Path:
        found = self._dirs.get(common)
        if found is None:
            arg = "--git-common-dir" if common else "--git-dir"
            path = Path(self.out(["rev-parse", arg]).strip())
            found = self._dirs[common] = path if path.is_absolute() else self.project / path
        return found

    def out(self, args: Sequence[str], cwd: Path | None = None) -> str:
        return self.run(args, cwd=cwd, check=False).stdout

    def run(
        self,
        args: Sequence[str],
        *,
        cwd: Path | None = None,
        check: bool = True,
        stdin: str | None = None,
    ) -> ProcessResult:
        """git in `cwd` (the project by default); with `check`, a failure halts the run."""
        done = git(args, cwd or self.project, stdin=stdin, repo=self.project)
        if check and done.exit_code != 0:
            raise HaltError(f"git {' '.join(args[:2])} failed: {why(done)}")
        return done
