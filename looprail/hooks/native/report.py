"""Execution report rows for native hooks: bounded identity and outcome data only.

A *hook row* is written for every started main shell (the exact `true`/`false` shortcuts count);
an *action row* for every selected Action and for every Action the loop guard (`maxSelections`)
held back (`guarded`). Rows never hold commands, message bodies, event payloads or invocation
ids, so they are safe to journal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from looprail.hooks.native.events import Outcome
from looprail.runtime.process import escape_untrusted

RowKind = Literal["hook", "action"]


@dataclass(frozen=True)
class ReportRow:
    kind: RowKind
    hook_ref: str
    event: str  # the owning hook's event (`hook_result` for a reaction)
    outcome: Outcome  # the owner's Hook Outcome
    code: int | None
    duration_s: float | None = None  # hook rows: a passing `when` plus the main shell
    action_type: str | None = None  # action rows
    guarded: bool = False  # action rows: not selected because maxSelections was reached
    origin_ref: str | None = None  # reactions: the hook whose result this hook observed
    origin_outcome: Outcome | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "type": self.kind,
            "hookRef": self.hook_ref,
            "event": self.event,
            "outcome": self.outcome,
            "code": self.code,
        }
        if self.kind == "hook":
            out["durationMs"] = round((self.duration_s or 0.0) * 1000)
        else:
            out["actionType"] = self.action_type
            out["guarded"] = self.guarded
        if self.origin_ref is not None:
            out["origin"] = {"hookRef": self.origin_ref, "outcome": self.origin_outcome}
        return out


def render_row(row: ReportRow) -> str:
    """One human line: `✓ local/lint 12ms`, `✗ local/env 3ms (exit 1)`,
    `→ local/env · message requested · block 1`, `⊘ … · not selected (maxSelections reached)`."""
    ref = escape_untrusted(row.hook_ref)
    origin = (
        f" · from {escape_untrusted(row.origin_ref)} {row.origin_outcome}"
        if row.origin_ref is not None
        else ""
    )
    code = "null" if row.code is None else str(row.code)
    if row.kind == "hook":
        ms = round((row.duration_s or 0.0) * 1000)
        if row.outcome == "pass":
            return f"✓ {ref} {ms}ms{origin}"
        return f"✗ {ref} {ms}ms ({row.outcome}, code {code}){origin}"
    if row.guarded:
        return (
            f"⊘ {ref} · {row.action_type} not selected (maxSelections reached) · "
            f"{row.outcome} {code}{origin}"
        )
    return f"→ {ref} · {row.action_type} requested · {row.outcome} {code}{origin}"


def summarize(rows: Iterable[ReportRow]) -> str:
    """One line: how many hooks ran, failed, and how many Actions were requested or guarded."""
    rows = list(rows)
    hooks = [r for r in rows if r.kind == "hook"]
    failed = sum(1 for r in hooks if r.outcome != "pass")
    requested = sum(1 for r in rows if r.kind == "action" and not r.guarded)
    guarded = sum(1 for r in rows if r.kind == "action" and r.guarded)
    ms = round(sum(r.duration_s or 0.0 for r in hooks) * 1000)
    parts = [f"ran {len(hooks)} native hook{'s' if len(hooks) != 1 else ''} in {ms}ms"]
    if failed:
        parts.append(f"{failed} failed")
    if requested:
        parts.append(f"requested {requested} Action{'s' if requested != 1 else ''}")
    if guarded:
        parts.append(f"guarded {guarded}")
    return ", ".join(parts)
