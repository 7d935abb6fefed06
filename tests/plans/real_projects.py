"""`looprail phase plan-index N --raw` beside the reference's `phase-plan-index N --raw` on
every phase folder of the real GSD projects in `../shared/conformance/real-projects/`.

Each project is copied to a temporary folder (its files become `.planning/`); nothing is
written to the shared corpus. Used by `tests/plans/test_real_projects.py` and runnable on its
own for the agreement report:

    LOOPRAIL_REFERENCE=... .venv/bin/python -m tests.plans.real_projects [--strict]

`--strict` compares without the documented normalisations (docs/plans.md, "Differences from
the reference"), which is how far looprail's raw JSON is from the reference's byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import CONFORMANCE, run_cli

REAL_PROJECTS = CONFORMANCE / "real-projects"
REFERENCE = os.environ.get("LOOPRAIL_REFERENCE")

# The fields the reference's plan-index prints, and so the ones compared.
TOP_FIELDS = ("phase", "waves", "incomplete", "runnable", "has_checkpoints")
PLAN_FIELDS = (
    "id",
    "wave",
    "depends_on",
    "autonomous",
    "objective",
    "files_modified",
    "task_count",
    "has_summary",
    "halted",
    "blocked_by",
)


def projects() -> list[Path]:
    if not REAL_PROJECTS.is_dir():
        return []
    return sorted(p for p in REAL_PROJECTS.iterdir() if (p / ".planning" / "phases").is_dir())


def copy_project(source: Path, into: Path) -> Path:
    """A writable copy of the project's `.planning/` in `<into>/<name>/` (the corpus is
    read-only and its SOURCE.md is ours, not the project's)."""
    project = into / source.name
    for path in sorted((source / ".planning").rglob("*")):
        target = project / path.relative_to(source)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return project


def phase_tokens(project: Path) -> list[tuple[str, str]]:
    """(folder name, the phase number as written in it) for every phase folder."""
    out = []
    for entry in sorted((project / ".planning" / "phases").iterdir()):
        match = re.match(r"(\d+[A-Z]?(?:\.\d+)*)", entry.name)
        if entry.is_dir() and match:
            out.append((entry.name, match.group(1)))
    return out


def reference_index(project: Path, phase: str) -> dict[str, Any]:
    assert REFERENCE is not None
    result = subprocess.run(
        ["node", REFERENCE, "phase-plan-index", phase, "--raw"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        return {"error": (result.stderr or result.stdout).strip()}
    return json.loads(result.stdout)


def looprail_index(project: Path, phase: str) -> dict[str, Any]:
    result = run_cli("phase", "plan-index", phase, "--raw", "--project", str(project))
    if result.returncode != 0:
        return {"error": result.stderr.strip()}
    return json.loads(result.stdout)


# --- documented normalisations (docs/plans.md, "Differences from the reference") ------------
# Each is named after its entry in docs/plans.md. A normalisation maps looprail's index and the
# reference's to the values they must then agree on; nothing else is ignored.


def resolved_depends_on(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """`depends_on` is shown resolved to plan ids (`"01"` → `"01-01"`, `"15-01"` →
    `"15-01-error-handling"`, a finished plan of an earlier phase as written); the reference
    shows an entry it cannot match to a file name as written. Compared: the resolved ids must
    be what the entries name."""
    ids = {p["id"] for p in ours["plans"]}
    for mine, ref in zip(ours["plans"], theirs["plans"], strict=False):
        resolved = [d for d in mine["depends_on"] if d in ids]
        ref_in_phase = [d for d in ref["depends_on"] if d in ids]
        # An entry the reference matched to a plan of the phase must be resolved the same.
        assert set(ref_in_phase) <= set(resolved), (mine["id"], ref_in_phase, resolved)
        mine["depends_on"] = ref["depends_on"] = None


def objective_line(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """`objective` is the first non-blank line of `<objective>` (or of a heading-style
    objective); the reference takes the text after the tag, or `null`. Compared when the
    reference found one: looprail's must be that text, tag-stripped."""
    for mine, ref in zip(ours["plans"], theirs["plans"], strict=False):
        if ref["objective"] is not None and mine["objective"] is not None:
            tail = re.sub(r"</objective>.*$", "", ref["objective"]).strip()
            if tail and tail != mine["objective"]:
                return  # a real disagreement: leave both for the comparison to show
        mine["objective"] = ref["objective"] = None


def kept_waves(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Where the reference drops a declared dependency (a bare plan number, a short name, a
    fenced-YAML `depends_on`) looprail keeps it and warns; the waves then differ. Compared:
    only phases where looprail warned that a dependency is kept are normalised, and then the
    plan set of the waves must agree."""
    warned = any("the reference drops" in w for w in ours.get("warnings", []))
    if not warned:
        return
    for index in (ours, theirs):
        index["waves"] = sorted(pid for ids in index["waves"].values() for pid in ids)
        for plan in index["plans"]:
            plan["wave"] = None


NORMALISATIONS: tuple[Callable[[dict[str, Any], dict[str, Any]], None], ...] = (
    resolved_depends_on,
    objective_line,
    kept_waves,
)


def compared(index: dict[str, Any]) -> dict[str, Any]:
    if "error" in index:
        return {"error": index["error"]}
    return {
        **{key: index.get(key) for key in TOP_FIELDS},
        "plans": [{key: plan.get(key) for key in PLAN_FIELDS} for plan in index["plans"]],
    }


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = [key for key in TOP_FIELDS if a.get(key) != b.get(key)]
    if len(a["plans"]) != len(b["plans"]):
        return [*out, f"plans ({len(a['plans'])} vs {len(b['plans'])})"]
    for mine, ref in zip(a["plans"], b["plans"], strict=True):
        out += [f"{ref['id']}.{key}" for key in PLAN_FIELDS if mine[key] != ref[key]]
    return out


@dataclass
class Outcome:
    project: str
    folder: str
    phase: str
    ours: dict[str, Any]
    theirs: dict[str, Any]
    differs: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return "error" in self.ours and "error" not in self.theirs

    @property
    def agrees(self) -> bool:
        return not self.refused and not self.differs


def compare(project: Path, folder: str, phase: str, *, strict: bool = False) -> Outcome:
    ours, theirs = compared(looprail_index(project, phase)), compared(reference_index(project, phase))
    outcome = Outcome(project.name, folder, phase, ours, theirs)
    if "error" in ours or "error" in theirs:
        outcome.differs = [] if ("error" in ours) == ("error" in theirs) else ["error"]
        return outcome
    if not strict and len(ours["plans"]) == len(theirs["plans"]):
        ours_n, theirs_n = json.loads(json.dumps(ours)), json.loads(json.dumps(theirs))
        ours_n["warnings"] = looprail_index(project, phase).get("warnings", [])
        for normalise in NORMALISATIONS:
            normalise(ours_n, theirs_n)
        outcome.differs = differences(ours_n, theirs_n)
    else:
        outcome.differs = differences(ours, theirs)
    return outcome


def outcomes(root: Path, *, strict: bool = False) -> Iterator[Outcome]:
    for source in projects():
        project = copy_project(source, root)
        for folder, phase in phase_tokens(project):
            yield compare(project, folder, phase, strict=strict)


def main(argv: list[str]) -> int:
    strict = "--strict" in argv
    if not REFERENCE or not REAL_PROJECTS.is_dir():
        print("needs LOOPRAIL_REFERENCE and ../shared/conformance/real-projects", file=sys.stderr)
        return 2
    total = agree = refused = 0
    with tempfile.TemporaryDirectory() as tmp:
        for outcome in outcomes(Path(tmp), strict=strict):
            total += 1
            agree += outcome.agrees
            refused += outcome.refused
            if outcome.refused:
                print(f"REFUSED {outcome.project} {outcome.folder}: {outcome.ours['error']}")
            elif outcome.differs:
                print(f"DIFFERS {outcome.project} {outcome.folder}: {', '.join(outcome.differs)}")
    print(f"{agree}/{total} agree, {refused} refused ({'strict' if strict else 'documented'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
