"""The import rules of docs/architecture.md, read from the source with `ast` (every import,
including those inside functions and under TYPE_CHECKING: a lazy import is still a
dependency)."""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

from tests.support import REPO
from tests.support.source import modules, nodes

PACKAGE = REPO / "looprail"


BASE = {
    "_version",  # the version, written once (imports nothing)
    "_lazy",  # the lazy re-export of the packages' public names (imports nothing)
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
    "records",  # typing.NamedTuple without typing (the render-hooks hot path)
    "settings",  # the `looprail` config section (pydantic; off the render-hooks path)
    "extras",  # the command that adds an optional extra, as looprail was installed
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
    "looprail.runtime.owed imports looprail.plans",
    "looprail.runtime.owed imports looprail.plans.load_phase",
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


def test_plans_imports_only_the_base_layer():
    """PLAN.md, phases and waves are read without hooks or runtimes (the frontmatter reader
    is base: `plans/phase.py` once imported `hooks.checks` for it)."""
    assert _violations({"plans"}, {_layer(m) for m in _imports()} - BASE - {"plans", ""}) == []


EDGES = {"cli", "ui", "diagrams", "lint", "testing"}


def test_the_machine_does_not_import_the_edges():
    assert _violations({"machine"}, EDGES) == []


def test_diagrams_lint_and_testing_do_not_import_one_another_nor_the_ui():
    for layer in ("diagrams", "lint", "testing"):
        assert _violations({layer}, EDGES - {layer}) == []


def test_only_the_cli_imports_the_ui():
    everything = {_layer(m) for m in _imports()} - {"cli", "ui"}
    assert _violations(everything, {"ui"}) == []


def test_no_module_imports_the_root_package_for_a_name():
    """`looprail/__init__.py` re-exports the library: a module that takes a name from it (say
    `__version__`) makes a circle the layer scan cannot see, since every layer is below the
    root. `from looprail import layout` (a submodule) is fine."""
    submodules = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()
    }
    offenders = []
    for path in modules():
        mod = _module(path)
        if mod in ("looprail", "looprail.__main__"):
            continue
        for node in nodes(path):
            if isinstance(node, ast.Import) and any(a.name == "looprail" for a in node.names):
                offenders.append(f"{mod}: import looprail")
            elif isinstance(node, ast.ImportFrom) and node.module == "looprail":
                offenders += [
                    f"{mod}: from looprail import {a.name}"
                    for a in node.names
                    if a.name not in submodules
                ]
    assert offenders == []


def _drawn() -> str:
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    return doc.split("```text", 1)[1].split("```", 1)[0]


def test_the_picture_draws_every_module_of_the_real_tree():
    """docs/architecture.md draws the house as built: every layer (package) and every base
    module is named in its picture, and so is every module it names in its text as new."""
    drawn = set(re.findall(r"[a-z_]+(?:/[a-z_]+\.py)?", _drawn()))
    layers = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert layers - drawn == set()
    assert BASE - drawn == set()
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert top - BASE == set()  # every top-level module is a base module
    for named in re.findall(r"[a-z_]+/[a-z_]+\.py", _drawn()):
        assert (PACKAGE / named).is_file(), named


def _house_metrics():
    """`scripts/house_metrics.py`, the one script issue 29's figures are measured with."""
    spec = importlib.util.spec_from_file_location(
        "house_metrics", REPO / "scripts" / "house_metrics.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_circle_at_any_level_and_no_global_statement():
    """Issue 29's targets, read as the house-metrics script reads them: no two modules import
    each other by any path (function-level imports and the root package included; names a type
    checker alone follows do not count), and no module keeps state through `global`."""
    figures = _house_metrics().measure(PACKAGE)
    assert figures["import_circles"] == []
    assert figures["global_statements"] == 0
