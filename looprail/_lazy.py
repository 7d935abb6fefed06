"""The one lazy-export mechanism of the packages that re-export names (`looprail`,
`looprail.runtime`, `looprail.testing`, `looprail.trust`).

Each package declares its public names once, in a table `name -> module`, and takes its module
`__getattr__` and `__dir__` from `lazy_exports`: a name loads its module on first use and is then
kept in the package's namespace. The root package is on the `render-hooks` start path, so this
module imports nothing (not `typing`, not `importlib`) at import time. The `TYPE_CHECKING`
re-exports each package keeps for type checkers are checked against its table by
`tests/test_exports.py`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def lazy_exports(
    package: str, table: dict[str, str], namespace: dict[str, Any], public: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose globals are `namespace`: `table`
    maps each lazily exported name to the module that defines it; `dir()` lists `public`."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib  # not at import: `import looprail` is on the `render-hooks` start path

        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(public)

    return __getattr__, __dir__
