"""`looprail/tracking.py` on hostile ROADMAPs: the edits are line by line with anchored
patterns, so a large file of near-matches costs linear time, and text outside what an edit
names (archived milestones, other phases, a row without a match) is left byte for byte."""

from __future__ import annotations

import time

from looprail.plans.tracking import Counts, phase_complete, plan_progress, requirements_complete

COUNTS = Counts(2, 2, ("01-01-SUMMARY.md", "01-02-SUMMARY.md"))


def test_near_matches_cost_linear_time():
    lines = [
        "- [ ] " * 20_000 + "Phase",  # a box, then no `Phase 1:` on the line
        "| Phase | " * 20_000,  # a row that never closes into a table
        "**Plans**: " + "1/" * 50_000,
        "#### Phase 1(x" + " (x" * 20_000,  # a tag that never closes
    ]
    text = "\n".join(lines * 5) + "\n"
    start = time.monotonic()
    out = plan_progress(text, "1", COUNTS, verified=True, today="2026-01-01")
    out = phase_complete(out, "1", COUNTS, today="2026-01-01")
    requirements_complete(text, ["REQ-01", "REQ-02"])
    assert time.monotonic() - start < 5
    assert out == text  # nothing in it names phase 1 as an edit needs it


def test_archived_milestones_and_other_phases_are_left_alone():
    archived = "<details>\n- [ ] **Phase 1: Old** - x\n| Phase | Status |\n</details>\n"
    current = (
        "- [ ] **Phase 1: New** - y\n- [ ] **Phase 10: Later** - z\n\n## Progress\n\n"
        "| Phase | Plans Complete | Status | Completed |\n|---|---|---|---|\n"
        "| 1. New | 0/2 | Not started | - |\n| 10. Later | 0/1 | Not started | - |\n"
    )
    out = phase_complete(archived + current, "1", COUNTS, today="2026-01-01")
    assert out.startswith(archived)
    assert "- [x] **Phase 1: New** - y (completed 2026-01-01)" in out
    assert "- [ ] **Phase 10: Later** - z\n" in out
    assert "| 1. New | 2/2 | Complete    | 2026-01-01 |" in out
    assert "| 10. Later | 0/1 | Not started | - |" in out


def test_a_deferred_requirement_keeps_its_checkbox():
    text = (
        "- [ ] **REQ-01**: a\n- [ ] **REQ-02**: b\n\n## Traceability\n\n"
        "| Requirement | Phase | Status |\n|---|---|---|\n"
        "| REQ-01 | Phase 1 | Pending |\n| REQ-02 | Phase 1 | Deferred |\n"
    )
    out = requirements_complete(text, ["REQ-01", "REQ-02"])
    assert "- [x] **REQ-01**" in out and "| REQ-01 | Phase 1 | Complete |" in out
    assert "- [ ] **REQ-02**" in out and "| REQ-02 | Phase 1 | Deferred |" in out
