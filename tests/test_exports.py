"""Each package's public names are its `__all__`: every name there resolves, is the object of
the module that defines it, and a class or function among them says what it is (a docstring).

The root package imports its library on first use (`import looprail` is on every command's
path); its `__all__` derives from one table, and the `TYPE_CHECKING` re-exports that type
checkers read name exactly the same objects."""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

from tests.support.source import PACKAGE, tree

PACKAGES = (
    "looprail",
    "looprail.testing",
    "looprail.trust",
    "looprail.journal",
    "looprail.plans",
    "looprail.lint",
    "looprail.diagrams",
    "looprail.hooks.native",
)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_is_documented(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{package}.{name} has no docstring"
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        module.nope  # noqa: B018


def _typed_names() -> dict[str, str]:
    """name -> module of each `from module import name as name` under the root's TYPE_CHECKING."""
    found: dict[str, str] = {}
    for node in tree(PACKAGE / "__init__.py").body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                for alias in stmt.names:
                    assert alias.asname == alias.name, ast.unparse(stmt)
                    found[alias.name] = stmt.module
    return found


def test_the_root_types_exactly_the_names_it_loads():
    import looprail

    typed = _typed_names()
    assert sorted(typed) == [n for n in looprail.__all__ if n != "__version__"]
    for name, source in typed.items():
        assert getattr(looprail, name) is getattr(importlib.import_module(source), name)
