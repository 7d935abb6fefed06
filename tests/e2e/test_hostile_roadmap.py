"""A hostile ROADMAP.md (issue 40, point 5), which `status`, `run` without `--phase` and every
dashboard refresh read. It is read as config.json is: a FIFO, `/dev/zero` through a link, a
folder or an oversize file gets one line and is never read (nothing hangs, no memory is
exhausted); it is parsed in linear time (300 KB of checkboxes on one line); a phase number of
any length is one line, never a traceback. Through the CLI in real processes, each bounded;
and the checkbox reader is checked against the reference's pattern on generated text."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from looprail.plans.roadmap import ROADMAP_LIMIT, roadmap_phases
from tests.support.agents import looprail

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX")


def project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "p"
    (root / ".planning" / "phases").mkdir(parents=True)
    return root, root / ".planning" / "ROADMAP.md"


def status(root: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent)}
    return looprail("status", *args, cwd=root, env=env, process=True, timeout=timeout)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder", "oversize"])
def test_a_roadmap_that_is_not_a_small_regular_file_is_one_line_never_read(
    tmp_path: Path, kind: str
) -> None:
    root, roadmap = project(tmp_path)
    if kind == "fifo":
        os.mkfifo(roadmap)
    elif kind == "dev-zero":
        roadmap.symlink_to("/dev/zero")
    elif kind == "folder":
        roadmap.mkdir()
    else:
        with open(roadmap, "wb") as fh:
            fh.truncate(ROADMAP_LIMIT + 1)  # sparse: large, and nothing to read
    for args in ([], ["--json"]):
        done = status(root, *args)  # says what it can, and why not the phases, in one line
        assert done.returncode == 0, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "ROADMAP.md: cannot be read" in lines[0], done.stderr
    done = looprail("run", cwd=root, env={"PATH": os.environ["PATH"]}, process=True, timeout=30)
    assert done.returncode != 0 and "ROADMAP.md: cannot be read" in done.stderr, done.stderr


def test_300_kb_of_checkboxes_on_one_line_is_read_at_once(tmp_path: Path) -> None:
    root, roadmap = project(tmp_path)
    roadmap.write_text("## Phase 1: One\n" + "- [ ] " * 50_000 + "\n")
    start = time.monotonic()
    done = status(root)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 20
    assert "1 not started" in done.stdout


@pytest.mark.parametrize("digits", [4_400, 20_000])
def test_a_phase_number_of_any_length_is_never_a_traceback(tmp_path: Path, digits: int) -> None:
    root, roadmap = project(tmp_path)
    number = "1" * digits
    roadmap.write_text(f"- [x] Phase {number}: Big\n## Phase {number}: Big\n## Phase 2: Two\n")
    for args in ([], ["--json"]):
        done = status(root, *args)
        assert "Traceback" not in done.stderr, done.stderr[-500:]
        assert done.returncode == 0, done.stderr
    phases = roadmap_phases(roadmap.read_text())
    assert phases == [(number, "Big", True), ("2", "Two", False)]


# The reference's checkbox pattern, for small texts where its backtracking does not matter
# (`Phase` and its number on one line, as looprail reads them).
REFERENCE = re.compile(r"-\s*\[(x| )\]\s*.*Phase[^\S\n]+(\d+[A-Z]?(?:\.\d+)*)[:\s]", re.I)
PIECES = [
    "- [x] ",
    "- [ ] ",
    "-[X]",
    "Phase ",
    "Phase 1",
    "2",
    ".3",
    "A",
    ":",
    " ",
    "\n",
    "x",
    "## ",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
@example(["## ", "Phase ", "2", ":"])  # phase 1's heading becomes phase 2's name
def test_checkboxes_read_as_the_reference_pattern_does(pieces: list[str]) -> None:
    text = "".join(pieces) + "\n## Phase 1: One\n## Phase 2: Two\n## Phase 3: Three\n"
    expected: dict[str, bool] = {}
    for box in REFERENCE.finditer(text):
        number = box.group(2).lstrip("0") or "0"
        if re.fullmatch(r"\d+", number):  # the headings' numbers
            expected[number] = box.group(1).lower() == "x"
    got = {n: checked for n, _, checked in roadmap_phases(text) if n in ("1", "2", "3")}
    # A generated line ending in `Phase N:` takes the next line for its name, as the reference's
    # heading pattern does, so phase 1's heading may be read as a name; 2's and 3's never are.
    assert {"2", "3"} <= set(got)
    assert got == {n: expected.get(n, False) for n in got}
