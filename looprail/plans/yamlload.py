"""The one YAML loader for frontmatter: PyYAML's safe loader on libyaml's C parser when there
is one, refusing aliases (a "billion laughs" document expands 9^9 leaves from a few hundred
bytes; frontmatter never needs them, so the first one is refused before expansion).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import yaml

# Deeper is refused (RecursionError, as callers handle), never left to the interpreter's
# recursion limit, which another library in the same process may have raised.
MAX_DEPTH = 200


class _NoAliasComposer(yaml.composer.Composer):
    """The composer both loaders share: refuses aliases and nesting past `MAX_DEPTH`."""

    _depth = 0

    if TYPE_CHECKING:  # provided by the parser the composer is mixed with

        def check_event(self, *choices: Any) -> bool: ...
        def peek_event(self) -> Any: ...

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise RecursionError(f"YAML nested deeper than {MAX_DEPTH} levels")
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"alias *{event.anchor} is not allowed "
                    "(YAML aliases are refused in frontmatter)",
                    event.start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class NoAliasSafeLoader(_NoAliasComposer, yaml.SafeLoader):
    """`yaml.SafeLoader` refusing aliases and nesting past `MAX_DEPTH`."""


NoAliasCSafeLoader: type | None = None
if getattr(yaml, "__with_libyaml__", False):
    from yaml._yaml import CParser  # only there when PyYAML was built with libyaml

    class _NoAliasCSafeLoader(
        _NoAliasComposer,
        CParser,
        yaml.constructor.SafeConstructor,
        yaml.resolver.Resolver,
    ):
        """libyaml parses; the shared composer, PyYAML's safe constructor and resolver build."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    NoAliasCSafeLoader = _NoAliasCSafeLoader


# Where libyaml and PyYAML's own scanner disagree (found by tests/test_yaml_cloader.py's
# fuzzing): tags (`!`), explicit keys and `?` in flow collections, tabs and the line breaks
# and BOM PyYAML treats differently (CR, NEL, LS, PS, U+FEFF), and a comment right after a
# block scalar indicator (`|#`). A document with any of them is loaded by the pure loader.
_C_UNSAFE = re.compile("[\t\r!?\x85\u2028\u2029\ufeff]|[|>][-+0-9]*#")


def c_path_ok(text: str) -> bool:
    """Whether `text` may be loaded on libyaml's parser (present, and none of `_C_UNSAFE`)."""
    return NoAliasCSafeLoader is not None and _C_UNSAFE.search(text) is None


def _load(loader_class: type, text: str) -> Any:
    loader = loader_class(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def safe_load(text: str) -> Any:
    """`yaml.safe_load` with aliases refused (`yaml.YAMLError`; RecursionError past `MAX_DEPTH`).
    A document that fails on libyaml is loaded again by the pure loader: its error is said."""
    if NoAliasCSafeLoader is not None and c_path_ok(text):
        try:
            return _load(NoAliasCSafeLoader, text)
        except Exception:  # the pure loader below says what is wrong, in its own words
            pass
    return _load(NoAliasSafeLoader, text)
