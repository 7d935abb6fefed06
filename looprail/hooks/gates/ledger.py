"""The broken-windows ledger `.planning/WINDOWS.md`, read as the reference's `gsd_run windows
status` reads it (docs/checks.md, "The broken-windows ledger"): a frontmatter of `key: value`
lines, then a ````` ````json ````` block of entries that the four counts must agree with."""

from __future__ import annotations

import json
import re
from typing import Any

from looprail.errors import LedgerError

SCHEMA_VERSION = 1
KINDS = frozenset(
    {
        "stub",
        "todo",
        "fixme",
        "skipped-test",
        "lint-warning",
        "unmet-truth",
        "unrun-verify",
        "deviation",
    }
)
STATUSES = ("open", "waived", "fixed")
COUNTS = ("open_count", "waived_count", "fixed_count", "total_count")
_FENCE_OPEN = "````json"
_FENCE_CLOSE = "````"
_LINE = re.compile(r"^([a-zA-Z0-9_]+):\s*(.*)$")


def parse_ledger(raw: str) -> int:
    """The `open_count` of a ledger text, all counts checked; `LedgerError` says why it is
    malformed."""
    fm = _frontmatter(raw)
    if not _is_number(fm.get("schema_version")) or fm["schema_version"] != SCHEMA_VERSION:
        got = json.dumps(fm.get("schema_version"))
        raise LedgerError(f"Ledger schema_version must be {SCHEMA_VERSION}; got {got}.")
    for key in COUNTS:
        value = fm.get(key)
        if not _is_integer(value):
            raise LedgerError(f"Ledger {key} must be an integer; got {json.dumps(value)}.")
    if not isinstance(fm.get("last_updated"), str):
        got = json.dumps(fm.get("last_updated"))
        raise LedgerError(f"Ledger last_updated must be a string; got {got}.")
    entries = _entries(raw)
    found = {s: sum(1 for e in entries if e["status"] == s) for s in STATUSES}
    declared = tuple(int(fm[k]) for k in COUNTS)
    derived = (found["open"], found["waived"], found["fixed"], len(entries))
    if declared != derived:
        raise LedgerError(
            "Ledger counts disagree with entries: frontmatter open/waived/fixed/total="
            f"{'/'.join(map(str, declared))} but entries yield {'/'.join(map(str, derived))}."
        )
    return declared[0]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return _is_number(value) and float(value).is_integer()


def _frontmatter(raw: str) -> dict[str, int | float | str]:
    if not raw.startswith(("---\r\n", "---\n")):
        raise LedgerError("Ledger missing frontmatter opening ---")
    head = raw.index("\n") + 1
    close = raw.find("\n---", head)
    if close == -1:
        raise LedgerError("Ledger missing frontmatter closing ---")
    out: dict[str, int | float | str] = {}
    for line in re.split(r"\r?\n", raw[head:close]):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match is None:
            raise LedgerError(f"Ledger frontmatter line is not key: value: {json.dumps(line)}")
        key, value = match.group(1), match.group(2).strip()
        if re.fullmatch(r"-?\d+", value):
            out[key] = int(value)
        elif re.fullmatch(r"-?\d+\.\d+", value):
            out[key] = float(value)
        elif len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            out[key] = value[1:-1]
        else:
            out[key] = value
    return out


def _entries(raw: str) -> list[dict[str, object]]:
    start = raw.find(_FENCE_OPEN)
    if start == -1:
        raise LedgerError("Ledger missing JSON code block for entries.")
    end = raw.find(_FENCE_CLOSE, start + len(_FENCE_OPEN))
    if end == -1:
        raise LedgerError("Ledger JSON code block not terminated.")
    try:
        parsed = json.loads(raw[start + len(_FENCE_OPEN) : end].strip())
    except (ValueError, RecursionError) as exc:
        raise LedgerError(f"Ledger JSON block failed to parse: {exc}") from None
    if not isinstance(parsed, list):
        raise LedgerError("Ledger JSON block must be an array.")
    for i, entry in enumerate(parsed):
        _check_entry(entry, i)
    return parsed


def _check_entry(entry: Any, i: int) -> None:
    if not isinstance(entry, dict):
        raise LedgerError(f"Ledger entry {i} is not an object.")
    for key in ("id", "kind", "phase", "file", "description", "status", "reason", "recorded_at"):
        if key not in entry:
            raise LedgerError(f"Ledger entry {i} missing required field: {key}")
    if not _is_integer(entry["id"]) or entry["id"] < 1:
        raise LedgerError(f"Ledger entry {i} has invalid id.")
    if not isinstance(entry["kind"], str) or entry["kind"] not in KINDS:
        raise LedgerError(f"Ledger entry {i} has invalid kind: {json.dumps(entry['kind'])}")
    if not isinstance(entry["status"], str) or entry["status"] not in STATUSES:
        raise LedgerError(f"Ledger entry {i} has invalid status: {json.dumps(entry['status'])}")
    if not isinstance(entry["description"], str) or not isinstance(entry["reason"], str):
        raise LedgerError(f"Ledger entry {i} has non-string description/reason.")
