"""The YAML loader of PLAN.md frontmatter: its rules (duplicate keys refused, `01` kept as
text), each top-level key's line, and errors that name the file and line."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml

from looprail.errors import PlanError
from looprail.yamlcache import cached
from looprail.yamlload import NoAliasCSafeLoader, NoAliasSafeLoader, c_path_ok


class _PlanRules:
    """What PLAN.md frontmatter adds to the frontmatter loader (`looprail.yamlload`, aliases
    refused): duplicate keys are rejected, and zero-padded numbers stay strings (plan and phase
    ids are written `01`, and YAML 1.1 would read that as the octal integer 1)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = self.construct_scalar(key_node)  # type: ignore[attr-defined]
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _PlanYamlLoader(_PlanRules, NoAliasSafeLoader):
    """The pure-Python PLAN.md loader: its errors are the ones users read."""

    # PyYAML reads this as a class attribute; its stubs declare it on instances.
    yaml_implicit_resolvers: ClassVar[dict[Any, list[Any]]] = {  # type: ignore[misc]
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:int"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


_PlanYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)\Z"), list("-+0123456789")
)
# The same rules on libyaml's parser (same composer, constructor and resolvers), when PyYAML
# was built with it.
_PlanYamlCLoader: type | None = (
    None
    if NoAliasCSafeLoader is None
    else type(
        "_PlanYamlCLoader",
        (_PlanRules, NoAliasCSafeLoader),
        {"yaml_implicit_resolvers": _PlanYamlLoader.yaml_implicit_resolvers},
    )
)


class YamlSyntaxError(PlanError):
    """A YAML syntax error (scanner or parser): the only kind a plan's lenient read works
    around (a refused alias, a tag or a duplicate key never is)."""


def cached_yaml(text: str, first_line: int, where: str) -> tuple[Any, dict[str, int]]:
    """The frontmatter's data and each top-level key's line, through the frontmatter cache
    (errors are never cached). Line numbers count from `first_line`."""

    def parse(_: str) -> dict[str, Any]:
        data, key_lines = _load_yaml(text, first_line, where)
        return {"data": data, "lines": key_lines}

    value = cached("plan", __file__, f"{first_line}\n{text}", parse)
    return value["data"], value["lines"]


def _compose(loader_class: type, text: str, first_line: int) -> tuple[Any, dict[str, int]]:
    loader = loader_class(text)  # the pure reader rejects control characters here
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    key_lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key_lines[key_node.value] = first_line + key_node.start_mark.line
    return data, key_lines


def _load_yaml(text: str, first_line: int, where: str) -> tuple[Any, dict[str, int]]:
    if _PlanYamlCLoader is not None and c_path_ok(text):
        try:
            return _compose(_PlanYamlCLoader, text, first_line)
        except Exception:  # the pure loader below says what is wrong, in its own words
            pass
    try:
        return _compose(_PlanYamlLoader, text, first_line)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join((exc.problem or exc.context or "invalid YAML").split())
        line = f":{first_line + mark.line}" if mark is not None else ""
        syntax = isinstance(exc, (yaml.scanner.ScannerError, yaml.parser.ParserError))
        error = YamlSyntaxError if syntax else PlanError
        raise error(f"{where}{line}: invalid YAML frontmatter: {reason}") from None
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise PlanError(f"{where}: invalid YAML frontmatter: {reason}") from None
    except RecursionError:
        raise PlanError(f"{where}: YAML frontmatter is nested too deeply") from None


def top_level_blocks(lines: list[str]) -> list[tuple[str, int, int]]:
    """(key, first line, line after the last) of each top-level `key:` of a YAML mapping."""
    starts = [
        (m.group(1), i) for i, line in enumerate(lines) if (m := re.match(r"([\w-]+)\s*:", line))
    ]
    return [
        (key, start, starts[n + 1][1] if n + 1 < len(starts) else len(lines))
        for n, (key, start) in enumerate(starts)
    ]


def error_line(message: str, where: str, first_line: int) -> int | None:
    """The 0-based frontmatter line of a `where:LINE: invalid YAML` error."""
    match = re.match(rf"{re.escape(where)}:(\d+):", message)
    return int(match.group(1)) - first_line if match else None
