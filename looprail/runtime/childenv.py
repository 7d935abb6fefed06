"""The environment a child starts with: a `PATH` that never means the current folder (the
project), and a `PWD` that is the folder it runs in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def confined_path_env(env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """`env` (or this process's environment) with every empty or relative `PATH` entry removed.

    An empty entry means "the current directory" to execvp and to `/bin/sh`, and the child's
    current directory is the project: a bare program name (a resolver's `binary`, a reviewer
    CLI, a word in a shell predicate) would then run a file the project ships. Returns `env`
    unchanged (None stays None) when `PATH` has nothing to remove."""
    base = os.environ if env is None else env
    path = base.get("PATH")
    if path is None:
        return env
    entries = path.split(os.pathsep)
    kept = [e for e in entries if e and os.path.isabs(e)]
    if kept == entries:
        return env
    confined = dict(base)
    confined["PATH"] = os.pathsep.join(kept) if kept else os.defpath
    return confined


def child_pwd_env(
    env: Mapping[str, str] | None, cwd: str | Path | None
) -> Mapping[str, str] | None:
    """`env` (or this process's environment) with `PWD` set to the child's working folder.

    A program that asks `$PWD` before `getcwd()` (OpenCode does, as shells and Node tools often
    do) must find the folder it runs in, not the folder looprail was started from: otherwise a
    task in a plan's worktree writes into the main tree. Unchanged when `cwd` is None."""
    if cwd is None:
        return env
    where = os.path.abspath(cwd)
    base = os.environ if env is None else env
    if base.get("PWD") == where:
        return env
    out = dict(base)
    out["PWD"] = where
    return out
