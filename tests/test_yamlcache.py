"""The frontmatter cache (looprail/yamlcache.py): a cached parse is the parse, for artifacts'
frontmatter and PLAN.md alike; errors are never stored; a damaged, foreign, symlinked or
unwritable cache is only a miss."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.errors import PlanError
from looprail.frontmatter import read_frontmatter
from looprail.layout import cache_dir
from looprail.plans.planfile import parse_plan
from looprail.yamlcache import SUBDIR, exact_json
from tests.support import examples


def entries() -> list[Path]:
    folder = Path(cache_dir()) / SUBDIR
    return sorted(folder.iterdir()) if folder.is_dir() else []


def uncached(fn, *args, **kwargs):
    os.environ["LOOPRAIL_NO_CACHE"] = "1"
    try:
        return fn(*args, **kwargs)
    finally:
        del os.environ["LOOPRAIL_NO_CACHE"]


def same(a, b) -> bool:
    """Equal values of the same types (1 is not 1.0 nor True)."""
    return repr(a) == repr(b)  # (nan is not equal to itself; its repr is)


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.dates(),
    st.sampled_from(["01", "0x1F", "yes", "~", "1e3", ".inf", "2024-01-01 10:00:00"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
HOSTILE = st.sampled_from(
    [
        "a: &x 1\nb: *x",  # an alias: refused
        "a: [1, 2",  # not closed
        "- 1\n- 2",  # not a mapping
        "a: !!set {x, y}",
        "a: 1\na: 2",
        "{1: 2, [3]: 4}",
        "a: b: c",
        "\t- x",
        "a: '\\ud800'",
    ]
)


@settings(max_examples=examples(60), deadline=None)
@given(body=st.one_of(st.dictionaries(st.text(max_size=6), VALUES).map(yaml.safe_dump), HOSTILE))
def test_artifact_frontmatter_cached_is_parsed(body):
    text = f"---\n{body}\n---\nbody\n"
    expected = uncached(read_frontmatter, text)
    first = read_frontmatter(text)  # a miss (or a hit from an earlier example: still equal)
    second = read_frontmatter(text)
    assert same(first, expected) and same(second, expected)


PLAN = """---
phase: 01-x
plan: {plan}
wave: 1
depends_on: []
{extra}---

<objective>o</objective>

<tasks>
<task type="auto">
  <name>Task 1</name>
  <files>a.py</files>
  <action>do it</action>
  <verify>true</verify>
  <done>done</done>
</task>
</tasks>
"""


@settings(max_examples=examples(30), deadline=None)
@given(
    plan=st.sampled_from(["01", "2", "003"]),
    extra=st.dictionaries(st.sampled_from(["when", "tags", "note"]), VALUES, max_size=2),
)
def test_plan_frontmatter_cached_is_parsed(plan, extra, tmp_path_factory):
    text = PLAN.format(plan=plan, extra=yaml.safe_dump(extra) if extra else "")
    path = tmp_path_factory.mktemp("p") / "01-01-PLAN.md"
    try:
        expected = uncached(parse_plan, text, path=path).model_dump(mode="json")
    except PlanError as exc:
        with pytest.raises(PlanError) as again:
            parse_plan(text, path=path)
        assert str(again.value) == str(exc)
        return
    assert parse_plan(text, path=path).model_dump(mode="json") == expected
    assert parse_plan(text, path=path).model_dump(mode="json") == expected


def test_errors_are_never_stored_and_dates_stay_dates():
    bad = PLAN.format(plan="01", extra="wave: 2\n")  # a duplicate key
    for _ in range(2):
        with pytest.raises(PlanError, match="duplicate key 'wave'"):
            parse_plan(bad, path="01-01-PLAN.md")
    assert entries() == []
    dated = PLAN.format(plan="01", extra="when: 2024-01-02\n")
    for _ in range(2):
        assert parse_plan(dated, path="01-01-PLAN.md").extra["when"].isoformat() == "2024-01-02"
    assert entries() == []  # a date is not JSON: parsed every time
    assert read_frontmatter("---\nwhen: 2024-01-02\n---\n") == {"when": "2024-01-02"}
    assert len(entries()) == 1  # artifacts' frontmatter is JSON already (dates as ISO text)


def test_damaged_foreign_and_symlinked_entries_are_misses(tmp_path):
    text = "---\nstatus: passed\nscore: 3\n---\n"
    assert read_frontmatter(text) == {"status": "passed", "score": 3}
    (entry,) = entries()
    for damage in (
        b"{not json",
        b"",
        json.dumps({"text": "status: other", "value": {"status": "failed"}}).encode(),
        json.dumps(["status: passed\nscore: 3", {"status": "failed"}]).encode(),
        b"\xff\xfe",
    ):
        entry.write_bytes(damage)
        assert read_frontmatter(text) == {"status": "passed", "score": 3}
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps({"text": "status: passed\nscore: 3", "value": {"status": "x"}}))
    entry.unlink()
    entry.symlink_to(planted)
    assert read_frontmatter(text) == {"status": "passed", "score": 3}


def test_an_unwritable_cache_is_no_cache(tmp_path, monkeypatch):
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    monkeypatch.setenv("LOOPRAIL_CACHE_DIR", str(blocked))
    for _ in range(2):
        assert read_frontmatter("---\na: 1\n---\n") == {"a": 1}
        assert parse_plan(PLAN.format(plan="01", extra=""), path="01-01-PLAN.md").plan == "01"


def test_no_cache_env_parses_every_time(monkeypatch):
    monkeypatch.setenv("LOOPRAIL_NO_CACHE", "1")
    assert read_frontmatter("---\na: 1\n---\n") == {"a": 1}
    assert entries() == []


def test_exact_json():
    assert exact_json({"a": [1, 2.5, None, True, "x", {"b": []}]})
    for value in ({1: 2}, (1,), {"a": {1, 2}}, float("nan"), float("inf"), b"x"):
        assert not exact_json(value)
    deep: list = []
    for _ in range(300):
        deep = [deep]
    assert not exact_json(deep)


def test_a_folder_others_can_write_is_never_read_nor_written(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPRAIL_CACHE_DIR", str(tmp_path))
    text = "---\nstatus: passed\n---\n"
    assert read_frontmatter(text) == {"status": "passed"}
    (entry,) = entries()
    assert (entry.parent.stat().st_mode & 0o777) == 0o700
    entry.write_text(json.dumps({"text": "status: passed", "value": {"status": "planted"}}))
    entry.parent.chmod(0o777)  # another user could have planted that
    assert read_frontmatter(text) == {"status": "passed"}
    entry.unlink()
    assert read_frontmatter(text) == {"status": "passed"}
    assert entries() == []  # and nothing is written there


def test_a_fifo_entry_is_a_miss_not_a_hang():
    text = "---\nstatus: passed\n---\n"
    assert read_frontmatter(text) == {"status": "passed"}
    (entry,) = entries()
    entry.unlink()
    os.mkfifo(entry)
    assert read_frontmatter(text) == {"status": "passed"}
