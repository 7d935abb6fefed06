"""Execution report rows for native hooks: bounded identity and outcome data only.

A *hook row* is written for every started main shell (the exact `true`/`false` shortcuts count);
an *action row* for every selected Action and for every Action the loop guard (`maxSelections`)
held back (`guarded`). Rows never hold commands, message bodies, event payloads or invocation
ids, so they are safe to journal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from looprail.hooks.native.events import Outcome

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
