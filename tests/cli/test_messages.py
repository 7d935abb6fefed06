"""Messages that neither swamp nor break (issue 39): "inputs changed" on resume is bounded,
`report` states the halt reason once, and a gate's multi-line message keeps the report's rows
one line each."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.support import (
    EXAMPLE,
    EXAMPLE_CAPS,
    feature,
    run_cli,
    write_capability,
    write_config,
    write_exe,
)

# A blocking query gate at verify:pre whose check answers with a page of text.
PAGE = ["REQ-01 has no test", "REQ-02 has no test", "REQ-03 has no test", "see the audit"]


@pytest.fixture
def halted(tmp_path: Path):
    """The example with its own copy of the capabilities, halted at ship:pre."""
    project = Path(shutil.copytree(EXAMPLE, tmp_path / "hello"))
    caps = Path(shutil.copytree(EXAMPLE_CAPS, tmp_path / "caps"))
    config = json.loads((project / ".planning" / "config.json").read_text())
    config["release"]["allow_ship"] = False
    write_config(project, config)
    done = run_cli("run", str(project), "--phase", "1", "--capabilities", str(caps), "-q")
    assert done.returncode == 1 and "ship:pre" in done.stderr, done.stderr
    return project, caps


def test_resume_names_a_few_changed_inputs_and_counts_the_rest(halted) -> None:
    project, caps = halted
    for n in range(12):  # a checkout that touched many files of a capability
        (caps / "style-guide" / "fragments" / f"extra-{n:02}.md").write_text(f"note {n}\n")
    done = run_cli("resume", str(project), "--capabilities", str(caps))
    line = next(ln for ln in done.stderr.splitlines() if "inputs changed:" in ln)
    listed = line.split("inputs changed: ", 1)[1]
    assert listed.endswith("; and 9 more"), line
    assert listed.count("added: ") == 3  # the first three, by path


def test_report_states_the_halt_reason_once(halted) -> None:
    project, _ = halted
    text = run_cli("report", str(project)).stdout
    assert text.count("release.allow_ship is false") == 1, text
    assert "  reason: blocked at ship:pre by gate release-gate: config key" in text
    gate = next(ln for ln in text.splitlines() if ln.startswith("    ✗  gate "))
    assert re.search(r"blocked +\d+ms  \(the halt reason, above\)$", gate), gate
    assert "\nHalts\n" not in text  # the one halt is the header's


def test_a_multi_line_gate_message_keeps_every_row_one_line(tmp_path: Path) -> None:
    project = Path(shutil.copytree(EXAMPLE, tmp_path / "hello"))
    caps = Path(shutil.copytree(EXAMPLE_CAPS, tmp_path / "caps"))
    gate = {
        "point": "verify:pre",
        "check": {"query": "coverage"},
        "blocking": True,
        "onError": "halt",
    }
    write_capability(caps, feature("coverage-gate", gates=[gate]))
    message = json.dumps({"block": True, "message": "\n".join(PAGE)})
    write_exe(project / ".looprail" / "checks" / "coverage", f"cat <<'EOF'\n{message}\nEOF\n")
    done = run_cli("run", str(project), "--phase", "1", "--capabilities", str(caps), "-q")
    assert done.returncode == 1, done.stderr
    text = run_cli("report", str(project)).stdout
    rows = text.split("\nPoints\n", 1)[1].split("\n\n", 1)[0].splitlines()
    # every row of the table is a point or a hook: nothing spills onto a line of its own
    assert all(re.match(r"  \S+:\S+  \(\d+ dispatch|    [✓✗!-] ", row) for row in rows), rows
    (row,) = [r for r in rows if "coverage-gate" in r]
    assert row.endswith("(the halt reason, above)"), row
    # the header has it all, each line of the message under the first
    header = text.split("\n\n", 1)[0]
    assert "  reason: blocked at verify:pre by gate coverage-gate: REQ-01 has no test" in header
    for later in PAGE[1:]:
        assert f"\n          {later}" in header
    assert json.loads(run_cli("report", str(project), "--json").stdout)  # the full form reads
