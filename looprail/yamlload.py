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


class NoAliasSafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that raises a `MarkedYAMLError` at the first alias."""

    def compose_node(self, parent: Any, index: Any) -> Any:
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
