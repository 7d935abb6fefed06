"""Fake agent CLIs on PATH, and a project made by `looprail init`, for agent-runtime tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import FAKES, run_cli

FAKE = FAKES / "fake_agent.py"
AGENTS = ("claude", "codex", "opencode", "gemini")


def fake_bin(root: Path) -> Path:
    """A folder holding `claude`, `codex`, `opencode` and `gemini`, all the fake agent."""
    bin_dir = root / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    for name in AGENTS:
        target = bin_dir / name
        if not target.exists():
            target.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
            target.chmod(0o755)
    return bin_dir


def agent_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a run with the fakes first on PATH (and a git identity)."""
    env = dict(os.environ)
    env["PATH"] = (
        f"{fake_bin(root)}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    )
    env.update(
        {
            "GIT_AUTHOR_NAME": "test",
            "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "test",
            "GIT_COMMITTER_EMAIL": "test@example.com",
            "FAKE_AGENT_LOG": str(root / "calls.jsonl"),
            # what `looprail doctor` checks for gemini (folder trust, an auth method)
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_API_KEY": "fake-key",
        }
    )
    env.update(extra)
    return env


def looprail(
    *args: str, cwd: Path, env: dict[str, str], timeout: float = 120, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`looprail ARGS` as a user types it, with `env` as its whole environment: in process
    (`looprail.cli.main`), or with `process=True` a real subprocess (bounded by `timeout`)."""
    env = {**{k: None for k in os.environ if k not in env}, **env}
    if not process:
        return run_cli(*args, cwd=cwd, env=env)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from looprail.cli import main; sys.exit(main())",
            *args,
        ],
        cwd=cwd,
        env={k: v for k, v in env.items() if v is not None},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def calls(root: Path) -> list[dict]:
    log = root / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **{k: v for k, v in agent_env(cwd).items() if k.startswith("GIT_")}}
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env=env
    ).stdout
