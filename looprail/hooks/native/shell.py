"""Running one native hook's `when` or `shell` string: under `/bin/sh -c`, bounded in time and
output (the output is never read)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from looprail.runtime.process import run_bounded

_OUTPUT_CAP = 64 * 1024


@dataclass(frozen=True)
class ShellRun:
    passed: bool
    code: int | None  # None: it never exited on its own (timeout, signal, could not start)
    started: bool
    detail: str


def run_hook_shell(command: str, *, env: Mapping[str, str], cwd: Path, timeout_ms: int) -> ShellRun:
    """Run one `when`/`shell` string under `/bin/sh -c` with stdin closed. The exact strings
    `true` and `false` are answered without a process (and still count as started)."""
    if command == "true":
        return ShellRun(True, 0, True, "exit 0")
    if command == "false":
        return ShellRun(False, 1, True, "exit 1")
    run = run_bounded(
        command, shell=True, timeout_s=timeout_ms / 1000, env=env, cwd=cwd, output_cap=_OUTPUT_CAP
    )
    if run.spawn_error:  # a NUL byte in the command or the environment, say
        return ShellRun(False, None, False, f"could not start: {run.spawn_error}")
    if run.timed_out:
        return ShellRun(False, None, True, f"timed out after {timeout_ms} ms")
    if run.exit_code is None or run.exit_code < 0:
        signal = -(run.exit_code or 0)
        return ShellRun(False, None, True, f"killed by signal {signal}")
    return ShellRun(run.exit_code == 0, run.exit_code, True, f"exit {run.exit_code}")
