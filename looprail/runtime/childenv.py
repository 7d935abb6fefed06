"""The environment a child starts with: a `PATH` that never means the current folder (the
project), and a `PWD` that is the folder it runs in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def confined_path_env(env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """`env` (or this process's environment) without empty or relative `PATH` entries, which
    mean the child's current folder (the project: a bare name would run a file it ships).
    `env` itself (None stays None) when there is nothing to remove."""
    base = os.environ if env is None else env
    path = base.get("PATH")
    if path is None:
        return env
    entries = path.split(os.pathsep)
    kept = [e for e in entries if e and os.path.isabs(e)]
    if kept == entries:
        return env
    return {**base, "PATH": os.pathsep.join(kept) if kept else os.defpath}


def child_pwd_env(
    env: Mapping[str, str] | None, cwd: str | Path | None
) -> Mapping[str, str] | None:
    """`env` (or this process's environment) with `PWD` set to `cwd`: a program that reads
    `$PWD` first (OpenCode) would otherwise write a worktree's task into the main tree."""
    if cwd is None:
        return env
    where = os.path.abspath(cwd)
    base = os.environ if env is None else env
    if base.get("PWD") == where:
        return env
    return {**base, "PWD": where}
