"""Filter and selector matching, pure functions over JSON-shaped data (docs/native-hooks.md,
"Filters"; selectors are an Action's `outcome`/`code`, matched exactly)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from looprail.config import MISSING

FilterScalar = str | int | float | bool | None


@functools.lru_cache(maxsize=1024)
def compile_pattern(source: str) -> re.Pattern[str]:
    """A filter regex, compiled once. Raises `re.error` for an invalid pattern."""
    return re.compile(source)


def strict_equal(expected: Any, actual: Any) -> bool:
    """JavaScript `===` for JSON scalars: booleans never equal numbers, `1 == 1.0`."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual
    if isinstance(expected, str) and isinstance(actual, str):
        return expected == actual
    return False


def resolve_field(candidate: Mapping[str, Any], key: str) -> Any:
    """The candidate value at a dotted key, or `MISSING`."""
    current: Any = candidate
    for segment in key.split("."):
        if isinstance(current, Mapping):
            if segment not in current:
                return MISSING
            current = current[segment]
        elif isinstance(current, (list, tuple)) and segment.isdigit():
            index = int(segment)
            if index >= len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


def _match_scalar(expected: FilterScalar, actual: Any) -> bool:
    if isinstance(expected, str):
        return isinstance(actual, str) and compile_pattern(expected).search(actual) is not None
    return strict_equal(expected, actual)


def _match_value(expected: FilterScalar, actual: Any) -> bool:
    if actual is MISSING:
        return False
    if isinstance(actual, (list, tuple)):
        return any(_match_scalar(expected, item) for item in actual)
    return _match_scalar(expected, actual)


def filter_matches(
    filter_: Mapping[str, Any] | None,
    candidate: Mapping[str, Any],
    *,
    exact_keys: frozenset[str] = frozenset(),
) -> bool:
    """True when every filter key matches the candidate. Keys in `exact_keys` use selector
    semantics (strict equality, no regex, no array spreading). May raise `re.error` for a
    pattern that was never validated."""
    if not filter_:
        return True
    for key, expected in filter_.items():
        actual = resolve_field(candidate, key)
        members = expected if isinstance(expected, (list, tuple)) else (expected,)
        if key in exact_keys:
            if actual is MISSING or not any(strict_equal(m, actual) for m in members):
                return False
        elif not any(_match_value(m, actual) for m in members):
            return False
    return True


def selector_matches(
    outcomes: Sequence[str] | None,
    codes: Sequence[int | float | None] | None,
    outcome: str,
    code: int | None,
) -> bool:
    """An Action's (or hook_result filter's) `outcome` and `code` against one Hook Result:
    both ANDed, each any-of, strict equality; an absent selector field matches anything."""
    if outcomes is not None and outcome not in outcomes:
        return False
    return codes is None or any(strict_equal(c, code) for c in codes)
