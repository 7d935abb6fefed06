"""Agent settings as facts, pure: which need consent (`GUARDED`, `NARROWER`), what consent is
bound to (`guarded_digest`), and the permission mode in effect (`mode_in_effect`). Consent
itself is `looprail.trust.agents` (docs/agents.md, "Settings a cloned project cannot choose
alone")."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

# Settings that change what runs or widen what the agent may do.
GUARDED = ("binary", "args", "permissionMode", "allowedTools", "sandbox", "approvalMode")
# Values of a guarded setting that are no wider than looprail's default for that CLI.
NARROWER: Mapping[str, Mapping[str, frozenset[str]]] = {
    "claude": {"permissionMode": frozenset({"acceptEdits", "default", "plan"})},
    "codex": {"sandbox": frozenset({"read-only", "workspace-write"})},
    "gemini": {"approvalMode": frozenset({"auto_edit", "default", "plan"})},
}
# Flags in `args` that set the permission mode, per CLI: flag -> the mode it means (None: the
# flag's value is the mode). The last one on the command line wins, as each CLI reads it.
_MODE_FLAGS: Mapping[str, Mapping[str, str | None]] = {
    "claude": {"--permission-mode": None, "--dangerously-skip-permissions": "bypassPermissions"},
    "codex": {
        "--sandbox": None,
        "-s": None,
        "--full-auto": "workspace-write",
        "--dangerously-bypass-approvals-and-sandbox": "danger-full-access, no approvals",
        "--yolo": "danger-full-access, no approvals",
    },
    "gemini": {"--approval-mode": None, "--yolo": "yolo", "-y": "yolo"},
}
MODE_NAME = {"claude": "permission mode", "codex": "sandbox", "gemini": "approval mode"}


def guarded_of(name: str, section: Mapping[str, object]) -> dict[str, object]:
    """The project's settings that need consent: guarded, and wider than the default."""
    narrower = NARROWER.get(name, {})
    return {
        key: section[key]
        for key in GUARDED
        if key in section
        and not (isinstance(section[key], str) and section[key] in narrower.get(key, ()))
    }


def guarded_digest(name: str, guarded: Mapping[str, Any]) -> str:
    """What consent to the project's guarded settings of agent `name` is bound to."""
    text = json.dumps({"agent": name, "settings": dict(guarded)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def mode_in_effect(name: str, argv: Sequence[str]) -> str | None:
    """The permission mode the CLI ends up with, reading the whole command line (the last
    flag that sets it wins, and `args` come last)."""
    flags = _MODE_FLAGS.get(name)
    if not flags:
        return None
    mode = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":  # the end of options: the prompt follows
            break
        flag, eq, inline = arg.partition("=")
        if flag in flags:
            meaning = flags[flag]
            if meaning is not None:
                mode = meaning
            elif eq:
                mode = inline
            elif i + 1 < len(argv) and argv[i + 1] != "--":
                mode = argv[i + 1]
                i += 1
        i += 1
    return mode
