"""Differential: `looprail phase plan-index N --raw` against the reference's
`phase-plan-index N --raw` on seeded, generated phases (dependency DAGs, complete and halted
SUMMARYs). Compared: `phase`, `waves`, `incomplete`, `runnable`, `has_checkpoints` and per plan
`id`, `wave`, `has_summary`, `halted`, `blocked_by`. Skips without LOOPRAIL_REFERENCE (and node).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from looprail.cli import main

REFERENCE = os.environ.get("LOOPRAIL_REFERENCE")
pytestmark = pytest.mark.skipif(
    not (REFERENCE and shutil.which("node")), reason="LOOPRAIL_REFERENCE (and node) needed"
)

SUMMARY_STATUSES = [
    None,  # no SUMMARY
    None,
    "complete",
    "halted",
    "Halted # designed stop",
    "'halted'",
    "halted#nospace",
]


def generate_phase(root: Path, seed: int, phase: str = "01") -> Path:
    """A phase of 1–7 plans; each may depend on earlier ones (full ids), and may have a
    SUMMARY whose status is drawn from SUMMARY_STATUSES."""
    rng = random.Random(seed)
    project = root / f"p{seed}"
    folder = project / ".planning" / "phases" / f"{phase}-gen"
    folder.mkdir(parents=True)
    count = rng.randint(1, 7)
    for n in range(1, count + 1):
        plan = f"{phase}-{n:02d}"
        earlier = [f"{phase}-{k:02d}" for k in range(1, n)]
        deps = rng.sample(earlier, k=rng.randint(0, min(2, len(earlier))))
        autonomous = rng.random() > 0.15
        (folder / f"{plan}-PLAN.md").write_text(
            "---\n"
            f"phase: {phase}-gen\nplan: {n:02d}\ntype: execute\n"
            f"depends_on: {json.dumps(deps)}\nfiles_modified: [f{n}.txt]\n"
            f"autonomous: {'true' if autonomous else 'false'}\n"
            "---\n"
            f"<objective>\nPlan {n}\n</objective>\n<tasks>\n"
            '<task type="auto"><name>t</name></task>\n</tasks>\n'
        )
        status = rng.choice(SUMMARY_STATUSES)
        if status is not None or rng.random() < 0.1:
            body = f"---\nstatus: {status}\n---\n" if status else "no frontmatter\n"
            (folder / f"{plan}-SUMMARY.md").write_text(body)
    return project


def ours(project: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["phase", "plan-index", "1", "--raw", "--project", str(project)]) == 0
    return json.loads(capsys.readouterr().out)


def theirs(project: Path) -> dict:
    result = subprocess.run(
        ["node", REFERENCE, "phase-plan-index", "1", "--raw"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(result.stdout)


def compared(index: dict) -> dict:
    keys = ("id", "wave", "has_summary", "halted", "blocked_by")
    return {
        "phase": index["phase"],
        "waves": index["waves"],
        "incomplete": index["incomplete"],
        "runnable": index["runnable"],
        "has_checkpoints": index["has_checkpoints"],
        "plans": [{k: p[k] for k in keys} for p in index["plans"]],
    }


@pytest.mark.parametrize("seed", range(16))
def test_plan_index_equals_the_references(tmp_path, capsys, seed):
    project = generate_phase(tmp_path, seed)
    assert compared(ours(project, capsys)) == compared(theirs(project))


def test_a_bare_dependency_is_the_one_deliberate_difference_and_is_warned(tmp_path, capsys):
    project = generate_phase(tmp_path, 0)
    folder = project / ".planning" / "phases" / "01-gen"
    for p in folder.glob("*"):
        p.unlink()
    for n, deps in ((1, []), (2, ["01"])):
        (folder / f"01-0{n}-PLAN.md").write_text(
            f"---\nplan: 0{n}\ndepends_on: {json.dumps(deps)}\n---\n<objective>x</objective>\n"
        )
    mine, reference = ours(project, capsys), theirs(project)
    assert mine["waves"] == {"1": ["01-01"], "2": ["01-02"]}  # looprail resolves "01"
    assert reference["waves"] == {"1": ["01-01", "01-02"]}  # the reference drops it
    assert any("the reference drops a bare plan number" in w for w in mine["warnings"])
