"""`looprail.plans.roadmap`, the one reader of ROADMAP.md: the phases its headings name, the
checkboxes that mark one done, archived milestones left out, sentinels skipped; and the
section of one phase (what `roadmap_req_ids` reads the requirement ids from)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from looprail.plans.roadmap import roadmap_phases, roadmap_req_ids, roadmap_section

ROADMAP = """\
# Roadmap

- [x] **Phase 1: Setup** — done
- [ ] **Phase 2: Core**
- [X] Phase 02.1: Hotfix (1/1 plans)

<details>
<summary>v0 shipped</summary>

## Phase 7: Archived

</details>

## Phase 0: Pre-milestone
## Phase 01: Setup
### Phase 2 (core work): Core
#### Phase 02.1: Hotfix (INSERTED)
## Phase 999.1: Backlog idea
## Phase 3 without a colon
## Phase 1: Setup again
"""


def test_the_phases_the_headings_name():
    assert roadmap_phases(ROADMAP) == [
        ("1", "Setup", True),
        ("2", "Core", False),
        ("2.1", "Hotfix", True),
    ]


def test_a_roadmap_without_phase_headings_names_none():
    assert roadmap_phases("# Roadmap\n\n- [x] Phase 1: only a checkbox\n") == []


@given(number=st.integers(1, 998), padded=st.booleans(), hashes=st.integers(2, 4))
def test_any_heading_spelling_is_one_phase(number, padded, hashes):
    spelled = f"{number:02d}" if padded else str(number)
    text = f"{'#' * hashes} Phase {spelled}: Name\n\nbody\n"
    assert roadmap_phases(text) == [(str(number), "Name", False)]


def test_the_section_of_a_phase_and_its_requirement_ids(tmp_path):
    text = "## Phase 1: A\n**Requirements**: R-1, R-2\n## Phase 10: B\n**Requirements**: R-9\n"
    assert roadmap_section(text, "1") == ": A\n**Requirements**: R-1, R-2\n"
    assert roadmap_section(text, "01") == roadmap_section(text, "1")
    assert roadmap_section(text, "2") is None
    (tmp_path / ".planning").mkdir()
    (tmp_path / ".planning" / "ROADMAP.md").write_text(text)
    assert roadmap_req_ids(tmp_path, "1") == "R-1, R-2"
    assert roadmap_req_ids(tmp_path, "10") == "R-9"
    assert roadmap_req_ids(tmp_path, "3") == ""
