"""The YAML frontmatter of a markdown artifact (`yamlload.safe_load`, dates as ISO strings),
and `reference_frontmatter`, the reference's own line reader (`a: 1` is the text "1")."""

from __future__ import annotations

import os
import re
from datetime import date, datetime, time
from typing import Any

import yaml

from looprail.fsutil import read_bounded
from looprail.plans.yamlload import safe_load

# An artifact is a page of markdown; one this large is not one (and is not read whole).
MAX_ARTIFACT_BYTES = 8 * 1024 * 1024


def file_frontmatter(path: str | os.PathLike[str]) -> dict[str, Any] | str:
    """`read_frontmatter` of the regular file at `path`, or why it cannot be read."""
    try:
        raw = read_bounded(path, MAX_ARTIFACT_BYTES)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if raw is None:
        return "does not exist"
    return read_frontmatter(raw.decode("utf-8", errors="replace"))


def read_frontmatter(text: str) -> dict[str, Any] | str:
    """The YAML frontmatter of a markdown text (`{}` when none), or why it cannot be read."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        return "frontmatter is not closed by '---'"
    return _parse_frontmatter("\n".join(lines[1:end]))


def _parse_frontmatter(body: str) -> dict[str, Any] | str:
    try:
        value = safe_load(body)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or ""
        why = f": {problem}" if "alias" in problem else ""
        return f"frontmatter is not valid YAML{where}{why}"
    except RecursionError:
        return "frontmatter is nested too deeply"
    if value is None:
        return {}
    if not isinstance(value, dict):
        return "frontmatter is not a mapping"
    try:
        return _jsonable(value)
    except RecursionError:  # `a: &a [*a]` is a self-containing value: no JSON equivalent
        return "frontmatter is recursive or nested too deeply"


def _jsonable(value: Any) -> Any:
    """YAML values as JSON would see them: dates become ISO strings, keys become strings."""
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def reference_frontmatter(text: str) -> dict[str, Any]:
    """Frontmatter as the reference's line reader sees it: values as text (one surrounding
    quote stripped), `[a, b]` and `- item` lines as lists, an empty value as a nested object."""
    text = text.removeprefix("\ufeff")
    if text.startswith("---\r\n"):
        head = 5
    elif text.startswith("---\n"):
        head = 4
    else:
        return {}
    close = text.find("\n---", head)
    if close == -1:
        return {}
    end = close - 1 if text[close - 1 : close] == "\r" else close
    root: dict[str, Any] = {}
    # (container, indent) pairs; a container is a dict or a list
    stack: list[tuple[Any, int]] = [(root, -1)]
    for line in re.split(r"\r?\n", text[head:end]):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while len(stack) > 1 and indent <= stack[-1][1]:
            stack.pop()
        current = stack[-1][0]
        match = _FM_KEY.match(line)
        if match:
            key, value = match.group(2), match.group(3).strip()
            if not isinstance(current, dict):
                continue  # the reference writes a key onto an array, where nothing reads it
            if value in ("", "["):
                child: Any = [] if value == "[" else {}
                current[key] = child
                stack.append((child, indent))
            elif value.startswith("[") and value.endswith("]"):
                current[key] = _split_inline_array(value[1:-1])
            else:
                current[key] = _strip_quote(value)
        elif line.strip().startswith("- "):
            item = _strip_quote(line.strip()[2:])
            if isinstance(current, dict) and not current and len(stack) > 1:
                parent = stack[-2][0]
                for k, v in list(parent.items()) if isinstance(parent, dict) else ():
                    if v is current:
                        parent[k] = [item]
                        stack[-1] = (parent[k], stack[-1][1])
                        break
            elif isinstance(current, list):
                current.append(item)
    return root


_FM_KEY = re.compile(r"^(\s*)([a-zA-Z0-9_-]+):\s*(.*)")


def _strip_quote(value: str) -> str:
    """One leading and one trailing quote character, each on its own (the reference's regex)."""
    value = value[1:] if value[:1] in ("'", '"') else value
    return value[:-1] if value[-1:] in ("'", '"') else value


def _split_inline_array(body: str) -> list[str]:
    """`a, "b, c", 'd'` → items: commas inside quotes do not split; quotes are removed."""
    items: list[str] = []
    current = ""
    quote = ""
    for ch in body:
        if quote:
            if ch == quote:
                quote = ""
            else:
                current += ch
        elif ch in ("'", '"'):
            quote = ch
        elif ch == ",":
            if current.strip():
                items.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        items.append(current.strip())
    return items
