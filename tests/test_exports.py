"""The packages that re-export names lazily (`looprail`, `looprail.runtime`, `looprail.testing`,
`looprail.trust`)
declare them once, in their `_EXPORTS` table, and share one mechanism (`looprail/_lazy.py`).
`__all__` derives from the table; the `TYPE_CHECKING` re-exports a type checker needs cannot, so
this test checks they name exactly the table's names, from the table's modules."""

from __future__ import annotations

import ast
import importlib

import pytest

from tests.support.source import PACKAGE, tree

PACKAGES = ("looprail", "looprail.runtime", "looprail.testing", "looprail.trust")


# Modules a package imports under TYPE_CHECKING for its own annotations, not to re-export.
_OWN_TYPES = {"looprail.trust": ("looprail.hooks.capset",)}


def _type_checking_imports(package: str) -> set[tuple[str, str]]:
    """(name, module) of each `from module import name as name` under `if TYPE_CHECKING:`."""
    path = PACKAGE.parent.joinpath(*package.split("."), "__init__.py")
    found: set[tuple[str, str]] = set()
    for node in tree(path).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if not isinstance(stmt, ast.ImportFrom) or stmt.module is None:
                    continue  # a type alias or a TypedDict the package types itself with
                if stmt.module.split(".")[0] != "looprail" or stmt.module == package:
                    continue  # typing's own names, not re-exports
                if stmt.module in _OWN_TYPES.get(package, ()):
                    continue
                for alias in stmt.names:
                    assert alias.asname == alias.name, f"{package}: {ast.unparse(stmt)}"
                    found.add((alias.name, stmt.module))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_the_table_is_the_one_list_of_names(package):
    module = importlib.import_module(package)
    table = module._EXPORTS
    eager = set(module.__all__) - set(table)  # defined or imported by the package itself
    assert eager <= set(vars(module)), eager
    assert dir(module) == sorted(module.__all__)
    typed = _type_checking_imports(package)
    assert typed in (set(), set(table.items()))  # none (looprail.testing), or the same names
    for name, source in table.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), name)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
        module.nope  # noqa: B018


def test_the_root_package_and_the_runtime_keep_their_names_typed():
    assert _type_checking_imports("looprail") and _type_checking_imports("looprail.runtime")
