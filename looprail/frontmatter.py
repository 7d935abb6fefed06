"""The YAML frontmatter of a markdown artifact (PLAN.md, VERIFICATION.md, every artifact a gate
reads), as one reader: `yamlload.safe_load` (no aliases, no object tags) behind the parse cache,
dates as ISO strings. Base layer and light (PyYAML is imported only on a cache miss), so the
project loop can read a phase's VERIFICATION status without the hooks layer."""

from __future__ import annotations

from datetime import date, datetime, time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def read_frontmatter(text: str) -> dict[str, Any] | str:
    """The YAML frontmatter of a markdown text as a dict (`{}` when there is none), or a reason
    (str) why it cannot be read."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        return "frontmatter is not closed by '---'"
    from looprail.yamlcache import cached  # an unchanged artifact is not parsed again

    return cached("frontmatter", __file__, "\n".join(lines[1:end]), _parse_frontmatter)


def _parse_frontmatter(body: str) -> dict[str, Any] | str:
    import yaml  # lazy: `looprail check` is on hosts' hot path, most checks need no YAML

    from looprail.yamlload import safe_load

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
