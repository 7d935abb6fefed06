"""What the executor may run without asking: the task's check commands in each CLI's allow-list
words (docs/agents.md). Only a simple command (plain words, no shell operator, quote, expansion
or glob); any other is refused whole, never narrowed to its first command."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Words of these only: any other character could chain, redirect, expand or widen the rule.
_SIMPLE = re.compile(r"[A-Za-z0-9_./:=@%+,-]+(?: [A-Za-z0-9_./:=@%+,-]+)*")


def simple(command: str) -> str | None:
    """`command` with its spaces collapsed when it is one simple command, else None."""
    words = " ".join(w for w in command.split(" ") if w)
    return words if _SIMPLE.fullmatch(words) else None


def permitted(commands: Iterable[str]) -> tuple[list[str], list[str]]:
    """`(the simple commands, in order and once each; the commands refused)`."""
    allowed: list[str] = []
    refused: list[str] = []
    for command in commands:
        words = simple(command)
        if words is None:
            refused.append(command)
        elif words not in allowed:
            allowed.append(words)
    return allowed, refused


def claude_rules(commands: Iterable[str]) -> list[str]:
    """Claude Code `--allowedTools` entries: `Bash(CMD:*)`, the command and its longer forms
    (Claude Code checks each part of a chained command on its own, so `CMD && other` is
    still asked about, and refused in print mode)."""
    return [f"Bash({c}:*)" for c in permitted(commands)[0]]


def gemini_rules(commands: Iterable[str]) -> list[str]:
    """Gemini CLI `--allowed-tools` entries: `run_shell_command(CMD)`, a prefix match."""
    return [f"run_shell_command({c})" for c in permitted(commands)[0]]
