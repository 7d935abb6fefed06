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
from collections.abc import Iterator
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


def executor_prompts(project: Path, token: str) -> Iterator[tuple[Any, Any, Any, str]]:
    """(plan, task, its work, its executor prompt) for each non-checkpoint task of phase `token`,
    as a run builds them (`task_work`, `build_request`, `build_prompt`)."""
    from looprail.machine.tasks import task_work
    from looprail.plans import load_phase
    from looprail.runtime.prompts import build_prompt
    from looprail.runtime.request import DispatchContext, build_request

    phase = load_phase(project, token)
    for plan in phase.plans:
        for task in plan.tasks:
            if task.is_checkpoint:
                continue
            work = task_work(plan, task, project)
            ctx = DispatchContext(
                project=project,
                phase_number=phase.number,
                phase_dir=phase.dir,
                point="execute:task",
                plan_id=plan.id,
            )
            request = build_request("task", work.key, ctx, role="executor", task=work)
            yield plan, task, work, build_prompt(request, project)


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
# Each is named after its entry in docs/plans.md, checks that the difference is exactly that one
# (else it leaves both sides alone and the comparison shows the difference), and then maps both
# sides to the same value. Nothing else is ignored.

_KEPT = re.compile(r"^(?P<file>\S+?): depends_on '(?P<dep>[^']*)' is read as plan (?P<target>\S+);")
_FENCED = re.compile(r"^(?P<file>\S+?):\d+: the frontmatter is in a ```yaml block")
_PAIRED = re.compile(r"^(?P<file>\S+?): (?P<summary>\S+) is read as this plan's SUMMARY;")


def _plan_id_of(file: str) -> str:
    name = file.rsplit("/", 1)[-1]
    return "PLAN" if name == "PLAN.md" else name.removesuffix("-PLAN.md")


def _frontmatter(project: Path, phase_dir: str, plan_id: str) -> str:
    name = "PLAN.md" if plan_id in ("PLAN", "") else f"{plan_id}-PLAN.md"
    text = (project / phase_dir / name).read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---\n"):
        return ""
    end = text.find("\n---", 4)
    return text[4:end] if end != -1 else ""


def bare_plan_md(ours: dict, theirs: dict, ctx: dict) -> bool:
    """A bare `PLAN.md` is plan `PLAN` in looprail; the reference's id for it is `""`."""
    if not any(p["id"] == "PLAN" for p in ours["plans"]):
        return False
    if not (Path(ctx["project"]) / ours["phase_dir"] / "PLAN.md").is_file():
        return False
    rename = {"PLAN": ""}
    for plan in ours["plans"]:
        plan["id"] = rename.get(plan["id"], plan["id"])
    ours["waves"] = {w: [rename.get(i, i) for i in ids] for w, ids in ours["waves"].items()}
    for key in ("incomplete", "runnable"):
        ours[key] = [rename.get(i, i) for i in ours[key]]
    return True


def summary_pairing(ours: dict, theirs: dict, ctx: dict) -> bool:
    """looprail pairs `28-01-SUMMARY.md` with `01-PLAN.md` (and zero padding aside); the
    reference does not, so it lists the plan as incomplete."""
    paired = {_plan_id_of(m["file"]) for w in ctx["warnings"] if (m := _PAIRED.match(w))}
    paired = {"" if p == "PLAN" else p for p in paired}
    if not paired:
        return False
    for plan in theirs["plans"]:
        if plan["id"] in paired and not plan["has_summary"]:
            plan["has_summary"] = True
    for key in ("incomplete", "runnable"):
        theirs[key] = [i for i in theirs[key] if i not in paired]
    return True


def kept_dependencies(ours: dict, theirs: dict, ctx: dict) -> bool:
    """Where the reference does not read a declared dependency (a bare plan number, `1-2`, a
    short-named plan's `28-01`: warned "the reference drops it"; a multi-line flow list
    `depends_on: [` it reads as empty), looprail keeps the edge, so its waves differ. Checked:
    the reference's waves are looprail's graph without exactly those edges."""
    kept: set[tuple[str, str]] = set()
    for w in ctx["warnings"]:
        if m := _KEPT.match(w):
            kept.add((_plan_id_of(m["file"]), m["target"]))
    fenced = _fenced_plans(ctx)
    for plan in ours["plans"]:
        fm = _frontmatter(ctx["project"], ours["phase_dir"], plan["id"])
        if plan["id"] in fenced or re.search(r"^depends_on:\s*\[\s*$", fm, re.M):
            kept.update((plan["id"], d) for d in plan["depends_on"])
    # An edge also declared in a form the reference reads is not kept only by looprail.
    from looprail.layout import reference_canonical_id

    for mine, ref in zip(ours["plans"], theirs["plans"], strict=False):
        for entry in ref["depends_on"]:
            for src, target in list(kept):
                if src == mine["id"] and entry.lower() in (
                    target.lower(),
                    reference_canonical_id(target).lower(),
                ):
                    kept.discard((src, target))
    if not kept:
        return False
    ids = [p["id"] for p in ours["plans"]]
    deps = {
        p["id"]: [d for d in p["depends_on"] if d in ids and (p["id"], d) not in kept]
        for p in ours["plans"]
    }
    level: dict[str, int] = {}
    for _ in ids:  # longest path, plans are few
        for pid in ids:
            level[pid] = max((level.get(d, 0) + 1 for d in deps[pid]), default=0)
    offset = (
        0
        if any(p.get("declared_wave") == 0 and p["id"] not in fenced for p in ours["plans"])
        else 1
    )
    expected: dict[str, list[str]] = {}
    for pid in ids:
        expected.setdefault(str(level[pid] + offset), []).append(pid)
    norm = {"PLAN": ""}
    expected = {w: [norm.get(i, i) for i in v] for w, v in expected.items()}
    if expected != theirs["waves"]:
        return False
    ours["waves"] = theirs["waves"]
    for plan in ours["plans"]:
        plan["wave"] = (
            level[norm.get(plan["id"], plan["id"])] + offset
            if plan["id"] in level
            else next((int(w) for w, v in expected.items() if plan["id"] in v), plan["wave"])
        )
    return True


def _fenced_plans(ctx: dict) -> set[str]:
    return {_plan_id_of(m["file"]) for w in ctx["warnings"] if (m := _FENCED.match(w))}


def fenced_frontmatter(ours: dict, theirs: dict, ctx: dict) -> bool:
    """A plan without frontmatter whose fenced ```yaml block declares values: looprail uses
    them, the reference reads defaults (no dependencies, autonomous, no files). Its waves are
    `kept_dependencies`'."""
    fenced = _fenced_plans(ctx)
    if not fenced:
        return False
    for mine, ref in zip(ours["plans"], theirs["plans"], strict=False):
        defaults = ref["depends_on"] == [] and ref["files_modified"] == []
        if mine["id"] in fenced and ref["autonomous"] is True and defaults:
            mine["depends_on"], mine["files_modified"] = [], []
            mine["autonomous"] = True
    ours["has_checkpoints"] = any(not p["autonomous"] for p in ours["plans"])
    return True


def masked_tasks(ours: dict, theirs: dict, ctx: dict) -> bool:
    """`task_count` counts `<task>` elements; the reference counts `<task` anywhere, in code
    fences and comments too. Checked: looprail's count is the count outside code."""
    from looprail.plans.scan import mask_code as _mask_code

    changed = False
    for mine, ref in zip(ours["plans"], theirs["plans"], strict=False):
        if mine["task_count"] == ref["task_count"]:
            continue
        name = "PLAN.md" if mine["id"] in ("PLAN", "") else f"{mine['id']}-PLAN.md"
        text = (Path(ctx["project"]) / ours["phase_dir"] / name).read_text(errors="replace")
        raw = len(re.findall(r"<task[\s>]", text, re.I))
        masked = len(re.findall(r"<task[\s>]", _mask_code(text), re.I))
        if ref["task_count"] == raw and mine["task_count"] == masked:
            mine["task_count"] = ref["task_count"]
            changed = True
    return changed


def resolved_depends_on(ours: dict, theirs: dict, ctx: dict) -> bool:
    """`depends_on` is shown resolved to plan ids of the phase (`"01"` → `"01-01"`, `"15-01"`
    → `"15-01-error-handling"`), then the entries naming none, as written; the reference shows
    an entry it cannot match to a whole id as written. Checked: each entry of the reference's
    is the looprail one or names it."""
    from looprail.layout import canonical_plan_id, reference_canonical_id

    changed = False
    for mine, ref in zip(ours["plans"], theirs["plans"], strict=False):
        if set(mine["depends_on"]) == set(ref["depends_on"]):
            mine["depends_on"] = ref["depends_on"]
            continue
        mapped = []
        for dep in ref["depends_on"]:
            hit = next(
                (
                    o
                    for o in mine["depends_on"]
                    if o.lower() == dep.lower()
                    or reference_canonical_id(o).lower() == dep.lower()
                    or canonical_plan_id(reference_canonical_id(o)).endswith(
                        "-" + canonical_plan_id(dep)
                    )
                    or canonical_plan_id(f"{ours['phase']}-{o}") == canonical_plan_id(dep)
                    or canonical_plan_id(reference_canonical_id(o)) == canonical_plan_id(dep)
                ),
                None,
            )
            mapped.append(hit if hit is not None else dep)
        if set(mapped) == set(mine["depends_on"]):
            mine["depends_on"] = ref["depends_on"]
            changed = True
    return changed


def objective_line(ours: dict, theirs: dict, ctx: dict) -> bool:
    """`objective` is the first non-blank line of `<objective>`; the reference's is the text
    after the tag up to the line's end (`</objective>` and all, when on one line)."""
    changed = False
    for mine, ref in zip(ours["plans"], theirs["plans"], strict=False):
        if mine["objective"] == ref["objective"] or ref["objective"] is None:
            continue
        if re.sub(r"\s*</objective>.*$", "", ref["objective"]).strip() == mine["objective"]:
            mine["objective"] = ref["objective"]
            changed = True
    return changed


def yaml_flow_lists(ours: dict, theirs: dict, ctx: dict) -> bool:
    """`files_modified: [` with the items on the following lines (a YAML flow list) is read by
    looprail's YAML parser; the reference's line reader reads it as empty."""
    changed = False
    for mine, ref in zip(ours["plans"], theirs["plans"], strict=False):
        if mine["files_modified"] != ref["files_modified"] and ref["files_modified"] == []:
            fm = _frontmatter(ctx["project"], ours["phase_dir"], mine["id"] or "PLAN")
            if re.search(r"^files[-_]modified:\s*\[\s*$", fm, re.M):
                mine["files_modified"] = []
                changed = True
    return changed


def implicit_tasks(ours: dict, theirs: dict, ctx: dict) -> bool:
    """A plan without `<task>` elements or `## Task N` headings still runs: each `<feature>` is
    a task, else the whole plan is one; the reference counts 0 tasks."""
    changed = False
    for mine, ref in zip(ours["plans"], theirs["plans"], strict=False):
        if ref["task_count"] == 0 and mine["task_count"] >= 1:
            name = "PLAN.md" if mine["id"] in ("PLAN", "") else f"{mine['id']}-PLAN.md"
            text = (Path(ctx["project"]) / ours["phase_dir"] / name).read_text(errors="replace")
            if not re.search(r"<task[\s>]|##\s*Task\s*\d+", text, re.I):
                features = len(re.findall(r"<feature>", text))
                if mine["task_count"] == max(features, 1):
                    mine["task_count"] = 0
                    changed = True
    return changed


NORMALISATIONS = (
    bare_plan_md,
    summary_pairing,
    kept_dependencies,
    resolved_depends_on,
    objective_line,
    yaml_flow_lists,
    fenced_frontmatter,
    implicit_tasks,
    masked_tasks,
)


def compared(index: dict[str, Any]) -> dict[str, Any]:
    if "error" in index:
        return {"error": index["error"]}
    return {
        **{key: index.get(key) for key in TOP_FIELDS},
        "phase_dir": index.get("phase_dir"),
        "plans": [
            {key: plan.get(key) for key in (*PLAN_FIELDS, "declared_wave")}
            for plan in index["plans"]
        ],
    }


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    if "error" in a or "error" in b:
        return [] if a.get("error") and b.get("error") else ["error"]
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
    applied: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return "error" in self.ours and "error" not in self.theirs

    @property
    def agrees(self) -> bool:
        return not self.refused and not self.differs


def _padded_copy(project: Path, folder: str) -> Path:
    """The project with this phase folder's number padded (`1-x` → `01-x`), as the reference
    finds it."""
    match = re.match(r"(\d+)(.*)", folder)
    assert match
    copy = project.parent / f"{project.name}--{folder}"
    if not copy.exists():
        shutil.copytree(project, copy)
        (copy / ".planning" / "phases" / folder).rename(
            copy / ".planning" / "phases" / (match.group(1).zfill(2) + match.group(2))
        )
    return copy


def compare(project: Path, folder: str, phase: str, *, strict: bool = False) -> Outcome:
    raw = looprail_index(project, phase)
    ours, theirs = compared(raw), compared(reference_index(project, phase))
    outcome = Outcome(project.name, folder, phase, ours, theirs)
    if strict:
        outcome.differs = differences(ours, theirs)
        return outcome
    if (
        theirs.get("error") == "Phase not found"
        and "error" not in ours
        and re.match(r"\d(?!\d)", folder)
    ):
        # unpadded_folder: the reference finds no `1-foundation`; compared with its reading of
        # the same folder padded.
        theirs = compared(reference_index(_padded_copy(project, folder), phase))
        outcome.applied.append("unpadded_folder")
    if "error" in ours or "error" in theirs:
        outcome.theirs = theirs
        outcome.differs = differences(ours, theirs)
        return outcome
    ctx = {"project": project, "warnings": raw.get("warnings", [])}
    for normalise in NORMALISATIONS:
        if normalise(ours, theirs, ctx):
            outcome.applied.append(normalise.__name__)
    # has_checkpoints follows the plans' `autonomous`, compared plan by plan above
    outcome.ours, outcome.theirs = ours, theirs
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
            elif outcome.applied and "-v" in argv:
                print(f"AGREES  {outcome.project} {outcome.folder} ({', '.join(outcome.applied)})")
    print(f"{agree}/{total} agree, {refused} refused ({'strict' if strict else 'documented'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
