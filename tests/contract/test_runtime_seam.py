"""The runtime seam has no hidden surface (issue 29, point 5; issue 38 item 12): it is four
methods, the machine, the checks and lint call only those, never probe a runtime for an
attribute (`getattr`/`hasattr`), and never assign onto one (the meter arrives in `begin_run`)."""

from __future__ import annotations

import ast
from pathlib import Path

from looprail.runtime.base import BaseRuntime, Runtime
from tests.support import REPO
from tests.support.source import modules, nodes

PACKAGE = REPO / "looprail"
# Where the machine's side of the seam lives: what calls a runtime it was handed. (The test
# harness of looprail.testing drives its own ScriptedRuntime's scripting API, not the seam.)
CALLERS = ("machine", "hooks", "lint", "cli")
PROBES = {"getattr", "hasattr", "setattr", "delattr"}
DECLARED = {n for n, v in vars(Runtime).items() if callable(v) and not n.startswith("_")}


def _names(node: ast.AST) -> set[str]:
    """The identifiers an expression is built from (`self.runtime` → {"self", "runtime"})."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
    return out


def _is_runtime(node: ast.AST) -> bool:
    """`runtime`, `self.runtime`, `type(runtime)`, `self._runtime`, …"""
    return any("runtime" in name.lower() and name != "Runtime" for name in _names(node))


def _files() -> list[Path]:
    return [p for p in modules() if p.relative_to(PACKAGE).parts[0] in CALLERS]


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}"


def test_no_attribute_probe_on_a_runtime_anywhere_in_the_package():
    """looprail/machine above all: `getattr(runtime, "meter", None)` and the like are banned
    everywhere; what a runtime offers is declared by `Runtime`, with defaults in `BaseRuntime`."""
    found = []
    for path in modules():
        for node in nodes(path):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in PROBES
                and node.args
                and _is_runtime(node.args[0])
            ):
                found.append(f"{_where(path, node)}: {ast.unparse(node)}")
    assert found == []


def test_nothing_is_assigned_onto_a_runtime():
    found = []
    for path in _files():
        for node in nodes(path):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and _is_runtime(target.value):
                    found.append(f"{_where(path, node)}: {ast.unparse(node)}")
    assert found == []


def test_every_runtime_method_the_callers_use_is_declared_by_the_protocol():
    """`runtime.X(...)` / `self.runtime.X(...)` outside looprail/runtime: X is in `Runtime`."""
    found = []
    for path in _files():
        for node in nodes(path):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            is_runtime = (isinstance(owner, ast.Name) and owner.id == "runtime") or (
                isinstance(owner, ast.Attribute) and owner.attr == "runtime"
            )
            if is_runtime and node.func.attr not in DECLARED:
                found.append(f"{_where(path, node)}: {ast.unparse(node.func)}")
    assert found == []


def test_the_seam_is_handle_what_a_runtime_declares_and_the_run_hooks():
    """As httpx's transport is `handle_request` and `close`: the typed calls are functions over
    `handle` (`looprail.runtime.base`), and a runtime that subclasses `BaseRuntime` and
    declares nothing gets every default."""
    assert {"handle", "describe", "begin_run", "end_run"} == DECLARED
    assert set(dir(BaseRuntime)) >= DECLARED
