"""Differential: `looprail check artifacts|key-links PLAN` against the reference's `verify
artifacts|key-links PLAN` on every real plan with `must_haves` in
`../shared/conformance/real-projects/*/`, in a copy of the project (its `.planning/`, then all of
its `code/`: the files the plans name, at the commit the plans were written for).

Every verdict agrees, or the difference is one of docs/checks.md's "must_haves: differences from
the reference", and it is *proven* to be that one: the reference's reading (the value as its
line reader keeps it, or none where it drops it) is given to looprail's checker, which must then
print exactly what the reference printed. Skips without LOOPRAIL_REFERENCE (and node) or the
corpus. Also runnable for the report: `python -m tests.plans.test_musthaves_reference`.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from looprail.plans.musthaves import (
    Artifact,
    KeyLink,
    _check_artifact,
    _check_link,
    plan_must_haves,
)
from tests.support import CONFORMANCE, TESTS, run_cli

REAL_PROJECTS = CONFORMANCE / "real-projects"
REFERENCE = os.environ.get("LOOPRAIL_REFERENCE")
DRIVER = TESTS / "musthaves_driver.cjs"
COMMANDS = ("artifacts", "key-links")
pytestmark = pytest.mark.skipif(
    not (REFERENCE and shutil.which("node") and REAL_PROJECTS.is_dir()),
    reason="LOOPRAIL_REFERENCE (and node) and ../shared/conformance/real-projects needed",
)


@dataclass
class Case:
    root: Path
    plan: str  # relative to root
    command: str
    theirs: dict[str, Any]
    theirs_raw: str
    ours: dict[str, Any]
    ours_raw: str
    classes: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)


def build(into: Path) -> list[tuple[Path, str]]:
    """Each project copied (`.planning/`, then `code/` over it, as the corpus README says) and
    its plans that declare must_haves: (project root, plan path)."""
    plans = []
    for source in sorted(REAL_PROJECTS.iterdir()):
        if not (source / ".planning").is_dir():
            continue
        root = into / source.name
        shutil.copytree(source / ".planning", root / ".planning", symlinks=True)
        if (source / "code").is_dir():
            shutil.copytree(source / "code", root, dirs_exist_ok=True, symlinks=True)
        for plan in sorted((root / ".planning").rglob("*PLAN*.md")):
            if "must_haves" in plan.read_text(encoding="utf-8", errors="replace"):
                plans.append((root, plan.relative_to(root).as_posix()))
    return plans


def reference(jobs: list[dict[str, Any]], scratch: Path) -> list[dict[str, str]]:
    assert REFERENCE is not None
    results = scratch / "reference.jsonl"
    subprocess.run(
        ["node", str(DRIVER), REFERENCE, str(results)],
        input="".join(json.dumps(job) + "\n" for job in jobs),
        text=True,
        check=True,
        timeout=600,
    )
    return [json.loads(line) for line in results.read_text().splitlines()]


def _parsed(out: dict[str, str]) -> dict[str, Any]:
    if out["stderr"].startswith("driver: "):
        return {"crash": out["stderr"]}
    return json.loads(out["stdout"])


def _ours(root: Path, plan: str, command: str, *raw: str) -> tuple[int, str, str]:
    result = run_cli("check", command, plan, *raw, "--project", str(root))
    return result.returncode, result.stdout.strip(), result.stderr.strip()


def cases(scratch: Path) -> list[Case]:
    plans = build(scratch)
    jobs = [
        {"cwd": str(root), "plan": plan, "command": command, "raw": raw}
        for root, plan in plans
        for command in COMMANDS
        for raw in (False, True)
    ]
    outs = iter(reference(jobs, scratch))
    out: list[Case] = []
    for root, plan in plans:
        for command in COMMANDS:
            theirs, theirs_raw = _parsed(next(outs)), next(outs)["stdout"].strip()
            code, stdout, stderr = _ours(root, plan, command)
            ours = json.loads(stdout) if code == 0 else {"error": stderr.splitlines()[-1]}
            ours_raw = _ours(root, plan, command, "--raw")[1]
            out.append(Case(root, plan, command, theirs, theirs_raw, ours, ours_raw))
    for case in out:
        classify(case)
    return out


# --- the documented differences (docs/checks.md), each reproduced --------------------------


def as_written(text: str) -> list[str]:
    """How the reference's line reader may have kept a YAML string: as YAML reads it, with a
    double-quoted scalar's escapes kept (`app\\\\.use`), or single-quoted with its quotes."""
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]
    return [text, escaped, "'" + text.replace("'", "''") + "'"]


def _reading_class(ours: str | None, theirs: str | None) -> str:
    if ours == theirs:
        return ""
    if theirs is None:
        return "value dropped"
    if theirs.startswith("'"):
        return "single quotes kept"
    if theirs.startswith("["):
        return "flow list read as text"
    return "escapes kept"


def _quoted(prefix: str, detail: str, suffix: str = "") -> str | None:
    if detail.startswith(prefix) and detail.endswith(suffix):
        return detail[len(prefix) : len(detail) - len(suffix)]
    return None


def explain_link(root: Path, link: KeyLink, promised: frozenset[str], theirs: dict) -> str | None:
    """The reading of the link under which looprail's checker prints the reference's verdict,
    named; None when there is none."""
    detail = theirs["detail"]
    seen = _quoted('Pattern "', detail, '" not found in source or target')
    seen = seen if seen is not None else _quoted("Invalid regex pattern: ", detail)
    for pattern in [link.pattern, seen, None] if link.pattern else [None]:
        reread = link.model_copy(update={"pattern": pattern})
        mine = _check_link(reread, root, promised).model_dump(by_alias=True, exclude_none=True)
        names = [_reading_class(link.pattern, pattern)]
        for key in ("from", "to", "via"):
            if mine[key] != theirs.get(key) and theirs.get(key) in as_written(mine[key]):
                names.append(_reading_class(mine[key], theirs[key]))
                mine[key] = theirs[key]
        if mine == theirs:
            return _named(names)
        if pattern == seen and (root / link.to).is_dir() and detail.startswith("Invalid regex"):
            return _named([*names, "folder read as a file"])  # it throws inside the regex try
    return None


def _named(names: list[str]) -> str:
    return " + ".join(sorted({n for n in names if n}))


def _list_class(ours: list[str], theirs: list[str]) -> str:
    if ours == theirs:
        return ""
    return _reading_class(ours[0] if ours else None, theirs[0] if theirs else None)


def explain_artifact(root: Path, artifact: Artifact, theirs: dict) -> str | None:
    """The reading of `contains`/`exports` under which looprail's checker prints the
    reference's verdict, named; None when there is none."""
    issues = theirs["issues"]
    contains = [artifact.contains, []]
    contains += [[w] for c in artifact.contains[:1] for w in as_written(c)]
    contains += [[t] for i in issues if (t := _quoted("Missing pattern: ", i))]
    exports = [artifact.exports, []]
    exports += [[t] for i in issues if (t := _quoted("Missing export: ", i))]
    for c in contains:
        for e in exports:
            reread = artifact.model_copy(update={"contains": c, "exports": e})
            if _check_artifact(reread, root).model_dump() == theirs:
                return _named([_list_class(artifact.contains, c), _list_class(artifact.exports, e)])
    return None


def classify(case: Case) -> None:
    ours, theirs = case.ours, case.theirs
    if "error" in ours or "error" in theirs or "crash" in theirs:
        case.classes.append(_plan_level(case))
        return
    items = "artifacts" if case.command == "artifacts" else "links"
    if len(ours[items]) != len(theirs[items]):
        case.unexplained.append(f"{len(ours[items])} vs {len(theirs[items])} {items}")
        return
    must, promised = plan_must_haves(case.root / case.plan)
    specs = must.artifacts if items == "artifacts" else must.key_links
    for spec, mine, ref in zip(specs, ours[items], theirs[items], strict=True):
        if mine == ref:
            continue
        if isinstance(spec, Artifact):
            why = explain_artifact(case.root, spec, ref)
        else:
            why = explain_link(case.root, spec, promised, ref)
        if not why:
            case.unexplained.append(f"{mine} vs {ref}")
        else:
            case.classes.append(why)


def _plan_level(case: Case) -> str:
    ours, theirs = case.ours, case.theirs
    block = "artifacts" if case.command == "artifacts" else "key_links"
    if ours.get("error", "").endswith(f"must_haves.{block}: none to check") and theirs.get(
        "error", ""
    ).startswith(f"No must_haves.{block} found"):
        return "none to check: one line, exit 1"
    if (
        ours.get("error", "").endswith(f"must_haves.{block}: none to check")
        and theirs.get("total") == 0
    ):
        return "text entries: the reference passes 0 of 0"
    if "invalid YAML frontmatter" in ours.get("error", "") and "error" not in theirs:
        return "plan refused: frontmatter is not YAML"
    if "EISDIR" in theirs.get("crash", "") and any(
        not a["passed"] and a["issues"] == ["Is a folder, not a file"]
        for a in ours.get("artifacts", [])
    ):
        return "folder: the reference crashes"
    case.unexplained.append(f"{ours} vs {theirs}")
    return "?"


# --- the tests -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    return cases(tmp_path_factory.mktemp("musthaves"))


def test_every_verdict_agrees_or_is_a_documented_difference(compared: list[Case]) -> None:
    assert len(compared) >= 2 * 100  # the corpus has 126 plans with must_haves
    unexplained = [f"{c.plan} {c.command}: {u}" for c in compared for u in c.unexplained]
    assert not unexplained, "\n".join(unexplained[:20])


def test_raw_agrees_wherever_the_json_does(compared: list[Case]) -> None:
    for case in compared:
        if not case.classes and "error" not in case.ours:
            assert case.ours_raw == case.theirs_raw, case.plan
        elif "error" in case.ours:
            assert case.ours_raw == "", case.plan  # one line on stderr, nothing on stdout


def test_each_documented_difference_is_named_in_the_docs(compared: list[Case]) -> None:
    docs = (TESTS.parent / "docs" / "checks.md").read_text()
    for name in {n for c in compared for n in c.classes}:
        for part in name.split(" + "):
            assert f"**{part}**" in docs, part


def main() -> int:
    if pytestmark.args[0]:
        print("needs LOOPRAIL_REFERENCE, node and ../shared/conformance/real-projects")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        found = cases(Path(tmp))
    counts = collections.Counter(n for c in found for n in c.classes)
    agree = sum(not c.classes and not c.unexplained for c in found)
    print(f"{agree}/{len(found)} agree field for field; differences by class:")
    for name, n in counts.most_common():
        print(f"  {n:4}  {name}")
    for c in found:
        for u in c.unexplained:
            print(f"UNEXPLAINED {c.plan} {c.command}: {u}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
