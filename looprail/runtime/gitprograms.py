"""The programs a repository's own git configuration names, switched off on looprail's git calls
(issue 40; docs/security.md, "Git in the project")."""

from __future__ import annotations

import re
from collections.abc import Mapping

# Keys that name a program git runs (as git prints it: a subsection is `.+`, the rest lowercase).
PROGRAM_KEY = re.compile(
    r"(filter\..+\.(clean|smudge|process)"
    r"|diff\..+\.(textconv|command)|diff\.external|merge\..+\.driver"
    r"|gpg\.(.+\.)?program|gpg\.ssh\.defaultkeycommand|(commit|tag)\.gpgsign"
    r"|core\.(editor|pager|sshcommand|askpass|gitproxy|fsmonitor|hookspath|alternaterefscommand)"
    r"|sequence\.editor|pager\.[^.]+|interactive\.difffilter|credential\.(.+\.)?helper"
    r"|remote\..+\.(uploadpack|receivepack)|(difftool|mergetool)\..+\.(cmd|path)"
    r"|trailer\..+\.(command|cmd)|submodule\..+\.update|hook\..+\.command"
    r"|web\.browser|(browser|man)\..+\.(cmd|path)|uploadpack\.packobjectshook"
    r"|sendemail\.(.+\.)?(sendmailcmd|smtpserver|tocmd|cccmd))\Z",
    re.DOTALL,
)
# Scopes the repository controls (an included file takes the scope of the file including it).
UNTRUSTED_SCOPES = frozenset({"local", "worktree"})
# What runs nothing the repository chose, where the empty value would not say so to git:
# signing only as the user's own configuration asks, with git's default programs.
_NEUTRAL = {
    "commit.gpgsign": "false",
    "tag.gpgsign": "false",
    "gpg.program": "gpg",
    "gpg.openpgp.program": "gpg",
    "gpg.x509.program": "gpgsm",
    "gpg.ssh.program": "ssh-keygen",
    "core.editor": ":",
    "sequence.editor": ":",
    "core.fsmonitor": "false",
    "core.hookspath": "/dev/null",
    "core.pager": "cat",
}
LIST_ARGS = ("config", "--list", "--show-scope", "--includes", "-z")


def neutral_value(key: str) -> str:
    if key.startswith("submodule."):
        return "none"
    return _NEUTRAL.get(key, "")


def repository_programs(listing: str) -> dict[str, str]:
    """From `git config --list --show-scope --includes -z` output: each program-naming key whose
    value in effect is the repository's, with the value to run instead."""
    parts = listing.split("\0")
    trusted: dict[str, str] = {}
    last_scope: dict[str, str] = {}
    for scope, entry in zip(parts[::2], parts[1::2], strict=False):
        key, _, value = entry.partition("\n")
        if PROGRAM_KEY.match(key):
            last_scope[key] = scope
            if scope not in UNTRUSTED_SCOPES:
                trusted[key] = value
    return {
        key: trusted.get(key, neutral_value(key))
        for key, scope in last_scope.items()
        if scope in UNTRUSTED_SCOPES
    }


def override_env(base: Mapping[str, str], overrides: Mapping[str, str]) -> dict[str, str]:
    """`base` with `overrides` after the user's in its `GIT_CONFIG_COUNT` list (ours win)."""
    env = dict(base)
    count = env.get("GIT_CONFIG_COUNT", "")
    n = int(count) if count.isdigit() else 0
    for i, (key, value) in enumerate(overrides.items(), start=n):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    env["GIT_CONFIG_COUNT"] = str(n + len(overrides))
    return env
