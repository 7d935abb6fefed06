"""Every git call looprail makes, in one place: git found on the confined PATH (never in the
project: an empty or relative PATH entry is dropped, see `process.find_program`), run bounded
(`process.run_bounded`), and with the project's own hooks and fsmonitor switched off, so a
cloned project's `.git/hooks`, `core.hooksPath` or `core.fsmonitor` never runs code when
looprail makes a worktree, commits or merges; nor does any other program the repository's own
configuration names (filter drivers, signing programs, merge drivers, textconv:
`runtime/gitprograms.py`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from looprail.runtime.gitprograms import LIST_ARGS, override_env, repository_programs
from looprail.runtime.process import ProcessResult, find_program, run_bounded

# Before the subcommand: they override whatever the repository's config says. `/dev/null` is
# no folder, so no hook is found in it.
SAFE_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "maintenance.auto=false",
    "-c",
    "gc.auto=0",
)
DEFAULT_TIMEOUT_S = 120.0


def git_program(env: Mapping[str, str] | None = None) -> str | None:
    """The absolute path of git on the confined PATH, or None."""
    return find_program("git", env)


def git(
    args: Sequence[str],
    cwd: str | Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    stdin: str | None = None,
) -> ProcessResult:
    """Run `git ARGS` in `cwd` (`stdin` its input; none: closed). A git that is not found
    is a spawn error (`exit_code` None)."""
    shown = ("git", *args)
    program = git_program(env)
    if program is None:
        return ProcessResult(shown, None, "", "", 0.0, spawn_error="git not found on PATH")
    listed = run_bounded(
        [program, *SAFE_CONFIG, *LIST_ARGS], timeout_s=timeout_s, cwd=cwd, env=env, guard=False
    )
    if listed.exit_code != 0:  # fail closed: unread configuration is never run with
        return replace(listed, argv=shown)
    programs = repository_programs(listed.stdout)
    done = run_bounded(
        [program, *SAFE_CONFIG, *args],
        timeout_s=timeout_s,
        cwd=cwd,
        env=override_env(os.environ if env is None else env, programs) if programs else env,
        stdin=stdin,
        guard=False,
    )
    return replace(done, argv=shown)  # errors name git, not its path and options


def is_git_repo(path: str | Path) -> bool:
    """Whether `path` is inside a git work tree."""
    done = git(["rev-parse", "--is-inside-work-tree"], path, timeout_s=30)
    return done.exit_code == 0 and done.stdout.strip() == "true"
