"""Every git call looprail makes: git on the confined PATH, bounded, and with no hook,
fsmonitor or other program the repository's own configuration names (`gitprograms`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from looprail.runtime.gitprograms import LIST_ARGS, override_env, repository_programs
from looprail.runtime.process import ProcessResult, find_program, run_bounded

# Before the subcommand, over the repository's config (`/dev/null` is no folder: no hook).
_SAFE = ("core.hooksPath=/dev/null", "core.fsmonitor=false", "maintenance.auto=false", "gc.auto=0")
SAFE_CONFIG = tuple(arg for setting in _SAFE for arg in ("-c", setting))
DEFAULT_TIMEOUT_S = 120.0


def git(
    args: Sequence[str],
    cwd: str | Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    stdin: str | None = None,
) -> ProcessResult:
    """Run `git ARGS` in `cwd`; a git not found is a spawn error."""
    shown = ("git", *args)
    program = find_program("git", env)
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
    done = git(["rev-parse", "--is-inside-work-tree"], path, timeout_s=30)
    return done.exit_code == 0 and done.stdout.strip() == "true"
