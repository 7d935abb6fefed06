"""The import rules of docs/architecture.md, read from the source with `ast` (every import,
including those inside functions and under TYPE_CHECKING: a lazy import is still a
dependency)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.support import REPO
from tests.support.source import modules, nodes

PACKAGE = REPO / "looprail"


BASE = {
    "_version",  # the version, written once (imports nothing)
    "errors",
    "layout",
    "points",
    "hostcall",
    "textsafe",
    "fsutil",
    "jsonload",
    "yamlload",
    "yamlcache",
    "config",
    "roadmap",
    "frontmatter",
}
TRUST = {"trust"}  # looprail.trust: store, audit, consent, reviewer


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _imports() -> dict[str, set[str]]:
    """module -> the looprail modules it imports (`from a import b` counts as a and a.b)."""
    out: dict[str, set[str]] = {}
    for path in modules():
        mod = _module(path)
        found: set[str] = set()
        for node in nodes(path):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{mod}: relative import (write it absolute)")
        out[mod] = {m for m in found if m == "looprail" or m.startswith("looprail.")}
    return out


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _violations(source_layers: set[str], forbidden_layers: set[str]) -> list[str]:
    return sorted(
        f"{mod} imports {target}"
        for mod, targets in _imports().items()
        if _layer(mod) in source_layers
        for target in targets
        if _layer(target) in forbidden_layers
    )


def test_the_scan_sees_the_package():
    assert "looprail.hooks.compiled" in _imports() and "looprail.cli" in _imports()
    assert "looprail.layout" in _imports()["looprail.hooks.compiled"]


def test_hooks_imports_neither_machine_nor_trust():
    assert _violations({"hooks"}, {"machine", *TRUST}) == []


def test_runtime_does_not_import_hooks():
    assert _violations({"runtime"}, {"hooks"}) == []


# The runtime layer's known upward imports (docs/architecture.md says why each is there). A new
# one fails here: a runtime knows no capabilities, hooks, consent or machine.
RUNTIME_UPWARD = {
    "looprail.runtime.agents imports looprail.plans",
    "looprail.runtime.agents imports looprail.plans.load_phase",
    "looprail.runtime.dask_executor imports looprail.machine.progress",
    "looprail.runtime.dask_executor imports looprail.machine.progress.fmt_duration",
    "looprail.runtime.dask_executor imports looprail.machine.record",
    "looprail.runtime.dask_executor imports looprail.machine.record.EventRecord",
}


def test_runtime_imports_only_base_and_runtime_but_the_known_exceptions():
    everything = {_layer(m) for m in _imports()} - {""}
    found = set(_violations({"runtime"}, everything - BASE - {"runtime"}))
    assert found == RUNTIME_UPWARD


def test_nothing_imports_the_cli():
    offenders = sorted(
        f"{mod} imports {target}"
        for mod, targets in _imports().items()
        if not (
            mod == "looprail.cli" or mod.startswith("looprail.cli.") or mod == "looprail.__main__"
        )
        for target in targets
        if target == "looprail.cli" or target.startswith("looprail.cli.")
    )
    assert offenders == []


def test_the_base_layer_imports_only_the_base_layer():
    assert _violations(BASE, {_layer(m) for m in _imports()} - BASE - {""}) == []


def test_the_store_imports_only_the_base_layer():
    assert _violations({"store"}, {_layer(m) for m in _imports()} - BASE - {"store", ""}) == []


def test_the_trust_layer_does_not_import_the_machine():
    assert _violations(TRUST, {"machine", "store", "lint", "diagrams", "testing"}) == []
