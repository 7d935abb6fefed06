"""A plan's `must_haves` and the check that the tree has them, with the reference's semantics
(`verify artifacts` / `verify key-links`; the rules: docs/checks.md, "must_haves")."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from looprail.errors import PlanError
from looprail.fsutil import read_bounded
from looprail.plans.folders import looks_like_plan, plan_superseded
from looprail.plans.jsregex import js_regex
from looprail.plans.planfile import Plan, read_plan

# A file larger than this is not read whole to look for a string: it fails with a reason.
MAX_CHECKED_BYTES = 8 * 1024 * 1024
# The reference's details, word for word (hosts may match on them).
SOURCE_MISSING = (
    "Source file not found (from: must be a relative file path; describe components/endpoints "
    "in via:)"
)
SOURCE_PENDING = (
    "Source file not yet created — declared in files_modified of a same-or-later-wave plan"
)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Artifact(_Frozen):
    """One `must_haves.artifacts` entry."""

    path: str
    provides: str | None = None
    min_lines: int | None = None
    contains: list[str] = []
    exports: list[str] = []


class KeyLink(_Frozen):
    """One `must_haves.key_links` entry (`from` is a Python keyword: `source`)."""

    source: str = Field(alias="from")
    to: str = ""
    via: str = ""
    pattern: str | None = None


class MustHaves(_Frozen):
    """A plan's must_haves as read; `notes` say what could not be read ("field: reason")."""

    truths: list[str] = []
    artifacts: list[Artifact] = []
    key_links: list[KeyLink] = []
    notes: list[str] = []


class ArtifactVerdict(_Frozen):
    path: str
    exists: bool
    issues: list[str]
    passed: bool


class ArtifactsReport(_Frozen):
    """`looprail check artifacts` (the reference's `verify artifacts` fields, in its order)."""

    all_passed: bool
    passed: int
    total: int
    artifacts: list[ArtifactVerdict]


class LinkVerdict(_Frozen):
    source: str = Field(serialization_alias="from")
    to: str
    via: str
    verified: bool
    detail: str
    pending: bool | None = None  # only printed when true, as the reference does


class KeyLinksReport(_Frozen):
    """`looprail check key-links` (the reference's `verify key-links` fields, in its order)."""

    all_verified: bool
    verified: int
    pending: int
    total: int
    links: list[LinkVerdict]


def report_json(report: ArtifactsReport | KeyLinksReport) -> dict[str, Any]:
    """The report as the reference prints it (`from`, and `pending` on a link only when set)."""
    return report.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- reading --------------------------------------------------------------------------------


def read_must_haves(plan: Plan) -> MustHaves:
    """The plan's must_haves (pure). A list is read as truths; an entry that cannot be checked
    is left out with a note."""
    value = plan.must_haves
    if value is None:
        return MustHaves()
    if isinstance(value, list):
        return MustHaves(truths=[str(v) for v in value if _scalar(v)])
    if not isinstance(value, dict):
        return MustHaves(notes=["must_haves: not a mapping (invalid YAML?); nothing to check"])
    notes: list[str] = []
    truths = value.get("truths")
    artifacts = [
        _artifact(item, f"must_haves.artifacts[{i}]", notes)
        for i, item in _items(value, "artifacts", notes)
    ]
    links = [
        _key_link(item, f"must_haves.key_links[{i}]", notes)
        for i, item in _items(value, "key_links", notes)
    ]
    return MustHaves(
        truths=[str(t) for t in truths if _scalar(t)] if isinstance(truths, list) else [],
        artifacts=[a for a in artifacts if a is not None],
        key_links=[k for k in links if k is not None],
        notes=notes,
    )


def _items(value: dict[str, Any], key: str, notes: list[str]) -> list[tuple[int, Any]]:
    items = value.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        notes.append(f"must_haves.{key}: not a list; nothing to check")
        return []
    return list(enumerate(items))


def _scalar(value: object) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _text(value: object) -> str | None:
    return str(value) if _scalar(value) else None


def _texts(item: dict[str, Any], key: str, where: str, notes: list[str]) -> list[str]:
    """A string or a list of strings; an empty value checks nothing (as in the reference)."""
    value = item.get(key)
    if value is None or value == "":
        return []
    values = value if isinstance(value, list) else [value]
    out = [t for v in values if (t := _text(v)) is not None]
    if len(out) != len(values):
        notes.append(f"{where}.{key}: an entry is not text; left out")
    return out


def _artifact(item: object, where: str, notes: list[str]) -> Artifact | None:
    if not isinstance(item, dict):
        notes.append(f"{where}: text, not a mapping with a path; not checked")
        return None
    if not isinstance(item.get("path"), str) or not item["path"]:
        notes.append(f"{where}: no path; not checked")
        return None
    min_lines = item.get("min_lines")
    if min_lines is not None and (isinstance(min_lines, bool) or not isinstance(min_lines, int)):
        digits = str(min_lines).strip()
        min_lines = int(digits) if digits.isdigit() else None
        if min_lines is None:
            notes.append(f"{where}.min_lines: not a whole number; not checked")
    return Artifact(
        path=item["path"],
        provides=_text(item.get("provides")),
        min_lines=min_lines,
        contains=_texts(item, "contains", where, notes),
        exports=_texts(item, "exports", where, notes),
    )


def _key_link(item: object, where: str, notes: list[str]) -> KeyLink | None:
    if not isinstance(item, dict):
        notes.append(f"{where}: not a mapping (from, to, via, pattern); not checked")
        return None
    pattern = _text(item.get("pattern"))
    return KeyLink(  # no `from`: checked, and fails as a missing source
        source=_text(item.get("from")) or "",
        to=_text(item.get("to")) or "",
        via=_text(item.get("via")) or "",
        pattern=pattern or None,
    )


def promised_files(plan: Plan, phase_plans: Iterable[Plan]) -> frozenset[str]:
    """The `files_modified` of the phase's plans whose declared wave is at least this plan's
    (its own without one: 1; others without one are not counted, as in the reference)."""
    wave = plan.wave if plan.wave is not None else 1
    return frozenset(
        path.strip()
        for other in phase_plans
        if other.wave is not None and other.wave >= wave
        for path in other.files_modified
        if path.strip()
    )


# --- checking -------------------------------------------------------------------------------


def check_artifacts(must: MustHaves, root: str | os.PathLike[str]) -> ArtifactsReport:
    """Each artifact against the files under `root` (the project, or the plan's worktree)."""
    verdicts = [_check_artifact(artifact, Path(root)) for artifact in must.artifacts]
    passed = sum(v.passed for v in verdicts)
    return ArtifactsReport(
        all_passed=passed == len(verdicts), passed=passed, total=len(verdicts), artifacts=verdicts
    )


def _check_artifact(artifact: Artifact, root: Path) -> ArtifactVerdict:
    found = read_project_file(root, artifact.path)
    if not isinstance(found, str):
        issue = "File not found" if found.missing else found.reason
        return ArtifactVerdict(
            path=artifact.path, exists=not found.missing, issues=[issue], passed=False
        )
    issues: list[str] = []
    lines = found.count("\n") + 1
    if artifact.min_lines and lines < artifact.min_lines:
        issues.append(f"Only {lines} lines, need {artifact.min_lines}")
    issues += [f"Missing pattern: {text}" for text in artifact.contains if text not in found]
    issues += [f"Missing export: {name}" for name in artifact.exports if name not in found]
    return ArtifactVerdict(path=artifact.path, exists=True, issues=issues, passed=not issues)


def check_key_links(
    must: MustHaves, root: str | os.PathLike[str], promised: frozenset[str] = frozenset()
) -> KeyLinksReport:
    """Each key link against the files under `root`; `promised` (`promised_files`) are files a
    plan of this or a later wave will write: a missing source among them is pending."""
    verdicts = [_check_link(link, Path(root), promised) for link in must.key_links]
    verified = sum(v.verified for v in verdicts)
    pending = sum(bool(v.pending) for v in verdicts)
    return KeyLinksReport(
        all_verified=verified + pending == len(verdicts),
        verified=verified,
        pending=pending,
        total=len(verdicts),
        links=verdicts,
    )


def _check_link(link: KeyLink, root: Path, promised: frozenset[str]) -> LinkVerdict:
    verified, detail = _link_verdict(link, root)
    pending = None
    if detail == SOURCE_MISSING and link.source.strip() and link.source.strip() in promised:
        pending, detail = True, SOURCE_PENDING
    return LinkVerdict(
        source=link.source,
        to=link.to,
        via=link.via,
        verified=verified,
        detail=detail,
        pending=pending,
    )


def _link_verdict(link: KeyLink, root: Path) -> tuple[bool, str]:
    """(verified, the reference's detail) of one link; promised sources are not known here."""
    source = read_project_file(root, link.source)
    if isinstance(source, Unread) and not source.missing:
        return False, f"Source {source.reason[:1].lower()}{source.reason[1:]}"
    if not isinstance(source, str) or not source:  # missing or empty: `!sourceContent`
        return False, SOURCE_MISSING
    if link.pattern is None:
        found = link.to in source
        return found, "Target referenced in source" if found else "Target not referenced in source"
    try:
        regex = js_regex(link.pattern)
    except (re.error, OverflowError, RecursionError):
        return False, f"Invalid regex pattern: {link.pattern}"
    if regex.search(source):
        return True, "Pattern found in source"
    target = read_project_file(root, link.to) if link.to else None
    if isinstance(target, str) and regex.search(target):
        return True, "Pattern found in target"
    return False, f'Pattern "{link.pattern}" not found in source or target'


class Unread(_Frozen):
    """Why a file named by a must-have was not read: missing, or `reason`."""

    missing: bool
    reason: str = ""


def read_project_file(root: Path, rel: str) -> str | Unread:
    """The text of `rel` under `root` (a leading `/` stays inside, as node's `path.join`), or
    why not: missing, a folder, outside the project, not a regular file, or too large."""
    top = os.path.realpath(root)
    real = os.path.realpath(os.path.join(top, rel.lstrip("/")))
    if os.path.commonpath([top, real]) != top:
        return Unread(missing=False, reason="Is outside the project: not read")
    try:
        raw = read_bounded(real, MAX_CHECKED_BYTES)
    except OSError as exc:
        if os.path.isdir(real):
            return Unread(missing=False, reason="Is a folder, not a file")
        return Unread(missing=False, reason=f"Cannot be read: {exc.strerror or exc}")
    if raw is None:  # no such file (or a symlink to nothing)
        return Unread(missing=True)
    return raw.decode("utf-8", errors="replace")


# --- one plan file, as the contract commands read it ---------------------------------------


def plan_must_haves(
    plan_file: str | os.PathLike[str], *, display: str | None = None
) -> tuple[MustHaves, frozenset[str]]:
    """The must_haves of the PLAN.md at `plan_file` and the files the plans beside it promise
    (`promised_files`; an unreadable neighbour promises nothing). PlanError (one line) when
    the plan cannot be read (`display`: how it names the file)."""
    path = Path(plan_file)
    plan = read_plan(path, display=display)
    neighbours: list[Plan] = []
    for name in sorted(os.listdir(path.parent)) if path.parent.is_dir() else []:
        if looks_like_plan(name) and name != path.name:
            try:
                neighbour = read_plan(path.parent / name)
            except PlanError:
                continue
            if not plan_superseded(neighbour):
                neighbours.append(neighbour)
    return read_must_haves(plan), promised_files(plan, [plan, *neighbours])
