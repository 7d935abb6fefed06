"""looprail's own source, read once per test process. Several contract tests check rules over
every module with `ast` (imports, layout names, the point vocabulary, error classes); parsing
and walking the ~130 modules costs about a second each time, so they share one read."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.support import REPO

PACKAGE = REPO / "looprail"


@cache
def modules() -> tuple[Path, ...]:
    """Every `.py` file of the package, sorted."""
    return tuple(sorted(PACKAGE.rglob("*.py")))


@cache
def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def tree(path: Path) -> ast.Module:
    """The parsed module (shared: read it, never change it)."""
    return ast.parse(text(path))


@cache
def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module, in `ast.walk` order."""
    return tuple(ast.walk(tree(path)))


@cache
def strings(path: Path) -> tuple[tuple[int, str], ...]:
    """(line, text) of every string constant in `path` that is not a docstring."""
    docstrings = set()
    for node in nodes(path):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return tuple(
        (node.lineno, node.value)
        for node in nodes(path)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    )
