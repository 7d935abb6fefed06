"""The one YAML loader for frontmatter (PLAN.md, VERIFICATION.md and every artifact a gate
reads): PyYAML's safe loader (no tags that construct objects) that refuses aliases.

An alias (`*name`) makes one node appear many times; nine levels of nine aliases are a
"billion laughs" document of a few hundred bytes whose JSON form has 9^9 leaves. Frontmatter never
needs them, so the composer refuses the first alias with the line it is on, before anything is
expanded.
"""

from __future__ import annotations

from typing import Any

import yaml

# Deeper than this is refused as "nested too deeply" (RecursionError, as a caller already
# handles): never left to the interpreter's recursion limit, which another library in the same
# process may have raised.
MAX_DEPTH = 200


class NoAliasSafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that raises a `MarkedYAMLError` at the first alias and RecursionError
    past `MAX_DEPTH` levels of nesting."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise RecursionError(f"YAML nested deeper than {MAX_DEPTH} levels")
            return self._compose_checked(parent, index)
        finally:
            self._depth -= 1

    def _compose_checked(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"alias *{event.anchor} is not allowed (YAML aliases are refused in frontmatter)",
                event.start_mark,
            )
        return super().compose_node(parent, index)


def safe_load(text: str) -> Any:
    """`yaml.safe_load` with aliases refused (raises `yaml.YAMLError`)."""
    loader = NoAliasSafeLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
