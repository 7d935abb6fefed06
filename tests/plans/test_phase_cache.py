"""PhaseCache: the phase in memory for a run answers exactly what load_phase would, after any
sequence of changes to the phase folder, and returns the same object when nothing changed."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.plans import PhaseCache, load_phase
from tests.support import examples


def plan_text(pid: str, deps: list[str], body: str) -> str:
    return (
        f'---\nphase: 01-x\nplan: "{pid}"\ndepends_on: {json.dumps(deps)}\n'
        f'files_modified: ["src/{pid}.py"]\n---\n<objective>\n{body}\n</objective>\n'
        f'<tasks>\n<task type="auto">\n<name>{body}</name>\n<action>a</action>\n'
        "<verify>v</verify>\n<done>d</done>\n</task>\n</tasks>\n"
    )


def make(root: Path) -> tuple[Path, Path]:
    project = root / "project"
    phase = project / ".planning" / "phases" / "01-x"
    phase.mkdir(parents=True)
    for i in (1, 2, 3):
        (phase / f"01-0{i}-PLAN.md").write_text(plan_text(f"0{i}", [], "first"))
    return project, phase


def same(a, b) -> bool:
    return a.model_dump() == b.model_dump()


def test_unchanged_is_the_same_object_and_changes_are_seen(tmp_path):
    project, phase = make(tmp_path)
    time.sleep(0.1)  # past the racy-clean margin: a stat written this recently is not trusted
    cache = PhaseCache(project, "1")
    first = cache.load()
    assert cache.load() is first
    assert same(first, load_phase(project, "1"))
    (phase / "01-02-SUMMARY.md").write_text("done\n")
    time.sleep(0.1)
    second = cache.load()
    assert second is not first and second.plan("01-02").has_summary
    assert second.plan("01-01") is first.plan("01-01")  # unchanged plans are not copied
    # An in-place edit (no rename, so the folder's stat does not change) is seen.
    (phase / "01-03-PLAN.md").write_text(plan_text("03", ["01"], "edited in place"))
    third = cache.load()
    assert third.plan("01-03").depends_on == ["01-01"]
    assert same(third, load_phase(project, "1"))
    (project / ".planning" / "config.json").write_text('{"mode": "yolo"}')
    assert cache.load().config == {"mode": "yolo"}


OPS = st.lists(
    st.tuples(
        st.sampled_from(["summary", "unsummary", "edit", "add", "remove", "context", "bad"]),
        st.integers(1, 5),
        st.text("abc", min_size=1, max_size=5),
    ),
    max_size=8,
)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=OPS)
def test_after_any_changes_the_cache_equals_a_fresh_load(tmp_path_factory, ops):
    project, phase = make(tmp_path_factory.mktemp("phase"))
    cache = PhaseCache(project, "1")
    cache.load()
    for op, i, word in ops:
        plan = phase / f"01-0{i}-PLAN.md"
        if op == "summary":
            (phase / f"01-0{i}-SUMMARY.md").write_text("x\n")
        elif op == "unsummary":
            (phase / f"01-0{i}-SUMMARY.md").unlink(missing_ok=True)
        elif op in ("edit", "add"):
            plan.write_text(plan_text(f"0{i}", [], word * i))
        elif op == "remove":
            plan.unlink(missing_ok=True)
        elif op == "context":
            (phase / "CONTEXT.md").write_text(word)
        elif op == "bad":
            (phase / f"{word}-PLAN-draft.md").write_text("x")
        try:
            expected = load_phase(project, "1")
        except Exception as exc:  # e.g. an invalid phase: both must fail the same way
            try:
                cache.load()
            except type(exc) as mine:
                assert str(mine) == str(exc)
                continue
            raise AssertionError("the cache loaded what load_phase refused") from None
        got = cache.load()
        assert same(got, expected), (op, i, word)
        assert os.path.isdir(phase)


def test_a_same_size_rewrite_within_one_clock_tick_is_seen(tmp_path):
    project, phase = make(tmp_path)
    plan = phase / "01-01-PLAN.md"
    cache = PhaseCache(project, "1")
    plan.write_text(plan_text("01", [], "aaaa"))
    assert cache.load().plan("01-01").objective_line.strip() == "aaaa"
    plan.write_text(plan_text("01", [], "bbbb"))  # same size, likely the same mtime tick
    assert cache.load().plan("01-01").objective_line.strip() == "bbbb"


# -- pairing plans with SUMMARY files: indexed once per listing, same answer as a scan -------

_NAMES = st.sampled_from(
    [
        "01-01-PLAN.md", "01-1-PLAN.md", "01-001-PLAN.md", "01-PLAN.md", "1-02-PLAN.md",
        "01-PLAN-03.md", "01-01-SUMMARY.md", "01-1-SUMMARY.md", "01-001-SUMMARY.md",
        "01-02-SUMMARY.md", "1-2-SUMMARY.md", "01-03-SUMMARY.md", "01-SUMMARY.md",
        "28-01-SUMMARY.md", "x-SUMMARY.md", "01-CONTEXT.md",
    ]
)  # fmt: skip


def _scan(plan_file: str, names: list[str], phase: str):
    """The pairing as it was before the index (git show onesource2:looprail/plans/phase.py):
    the reference's candidates, then a scan of every name."""

    from looprail import layout as ph

    base = plan_file.removesuffix(".md")
    candidates = [re.sub("PLAN", "SUMMARY", base, count=1, flags=re.I) + ".md"]
    candidates.append(base + "-SUMMARY.md")
    extended = re.match(r"(\d+)-PLAN-(\d+)", base, re.I)
    if extended:
        candidates.append(f"{extended[1]}-{extended[2]}-SUMMARY.md")
    stem = re.sub(r"-PLAN$", "", base, flags=re.I)
    canonical = ph.reference_canonical_id(stem)
    if canonical != stem:
        candidates.append(canonical + "-SUMMARY.md")
    for candidate in candidates:
        if candidate in names:
            return candidate, None
    plan_id = ph.plan_id_from_filename(plan_file) or stem
    keys = {ph.canonical_plan_id(plan_id), ph.canonical_plan_id(ph.reference_canonical_id(plan_id))}
    if re.fullmatch(ph.PLAN_ID_RE, plan_id) is None:
        keys.add(f"{ph.canonical_plan_id(phase)}-{ph.canonical_plan_id(plan_id)}")
    for name in names:
        if name.endswith("-SUMMARY.md") and ph.canonical_plan_id(name[:-11]) in keys:
            return name, f"{name} is read as this plan's SUMMARY; the reference does not pair them"
    return None, None


@settings(max_examples=examples(200), deadline=None)
@given(names=st.lists(_NAMES, unique=True), phase=st.sampled_from(["01", "1", "28"]))
def test_indexed_summary_pairing_is_the_scan(names, phase):
    from looprail.layout import Summaries, summary_of

    names = sorted(names)
    index = Summaries(names)
    for plan in (n for n in names if "PLAN" in n):
        assert summary_of(plan, index, phase) == summary_of(plan, names, phase)
        assert summary_of(plan, index, phase) == _scan(plan, names, phase)
