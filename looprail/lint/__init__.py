"""`looprail lint`: everything that can be known about a project before running it (docs/lint.md;
`RULES` lists every kind of finding). The checks are pure functions of a `LintInput` and a
`Probe`, one module per family of rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from looprail.lint.artifacts import _artifacts
from looprail.lint.capabilities import _capabilities, _config
from looprail.lint.findings import (
    RULES,
    SEVERITIES,
    Finding,
    LintReport,
    Rule,
    Severity,
    render_text,
)
from looprail.lint.hooks import _hooks
from looprail.lint.inputs import LintInput, PhaseInput, Probe, load_input, local_probe
from looprail.lint.plans import _plans, _roles


def lint_project(
    project: str | Path, capability_dirs: Sequence[str | Path] = (), **options: Any
) -> LintReport:
    """Load `project` and lint it (see `load_input` for the options)."""
    return LintReport(findings=lint(load_input(project, capability_dirs, **options)))


def lint(data: LintInput) -> list[Finding]:
    """Every finding about `data`, errors first, then by file and path (deterministic)."""
    found: list[Finding] = []
    for check in (_config, _capabilities, _artifacts, _hooks, _plans, _roles):
        found += check(data)
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    unique = list(dict.fromkeys(found))
    return sorted(unique, key=lambda f: (rank[f.severity], f.file, f.path, f.code, f.message))


__all__ = [
    "RULES",
    "SEVERITIES",
    "Finding",
    "LintInput",
    "LintReport",
    "PhaseInput",
    "Probe",
    "Rule",
    "Severity",
    "lint",
    "lint_project",
    "load_input",
    "local_probe",
    "render_text",
]
