"""`frontmatter.file_frontmatter`: the one way an artifact's frontmatter is read from disk
(the run's `verify_done` facts, `looprail status`, lint and the owed-artifact check), through
the bounded regular-file read."""

from __future__ import annotations

import os
import subprocess
import sys

from looprail.plans import frontmatter
from looprail.plans.frontmatter import file_frontmatter


def test_an_artifact_is_read(tmp_path):
    path = tmp_path / "01-VERIFICATION.md"
    path.write_text("---\nstatus: passed\nscore: 3\n---\n# body\n")
    assert file_frontmatter(path) == {"status": "passed", "score": 3}


def test_missing_unreadable_and_invalid_are_reasons(tmp_path):
    assert file_frontmatter(tmp_path / "nope.md") == "does not exist"
    assert file_frontmatter(tmp_path) == "cannot be read (not a regular file)"
    bad = tmp_path / "bad.md"
    bad.write_text("---\nstatus: [\n---\n")
    assert isinstance(file_frontmatter(bad), str)


def test_a_file_over_the_bound_is_not_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(frontmatter, "MAX_ARTIFACT_BYTES", 64)
    path = tmp_path / "big.md"
    path.write_text("---\nstatus: passed\n---\n" + "x" * 100)
    assert file_frontmatter(path) == "cannot be read (larger than 64 bytes)"


def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "VERIFICATION.md"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    probe = "import sys\nfrom looprail.plans.frontmatter import file_frontmatter\n"
    probe += "print(file_frontmatter(sys.argv[1]))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe, str(fifo)], capture_output=True, text=True, timeout=30
    )
    assert done.stdout.strip() == "cannot be read (not a regular file)", done.stderr
