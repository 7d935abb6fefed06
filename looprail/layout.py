"""The project layout facts every layer shares, with nothing heavy imported (the
`render-hooks` hot path uses them): where phases live, how a phase folder is named, and how a
phase number is normalised (`01` and `1` are one phase)."""

from __future__ import annotations

import os
import re

PHASES_DIR = os.path.join(".planning", "phases")
PHASE_DIR_PATTERN = re.compile(r"(?P<token>\d+[A-Za-z]?(?:\.\d+)*)(?:-(?P<slug>.*))?")


def normalize_phase_number(token: str) -> str | None:
    """`01` → `1`, `02.1` → `2.1`, `12a` → `12A`; None when `token` is not a phase number."""
    match = re.fullmatch(r"(\d+)([A-Za-z]?)((?:\.\d+)*)", token.strip())
    if match is None:
        return None
    main, letter, decimals = match.groups()
    rest = "".join(f".{int(part)}" for part in decimals.split(".")[1:])
    return f"{int(main)}{letter.upper()}{rest}"


def phase_folders(project: str, phase: str) -> list[str]:
    """Names of the folders under `.planning/phases/` that hold phase `phase`, sorted."""
    wanted = normalize_phase_number(phase)
    root = os.path.join(project, PHASES_DIR)
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    out = []
    for name in names:
        match = PHASE_DIR_PATTERN.fullmatch(name)
        same = match and normalize_phase_number(match.group("token")) == wanted
        if same and os.path.isdir(os.path.join(root, name)):
            out.append(name)
    return out
