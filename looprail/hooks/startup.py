"""What stops `looprail run` from starting: a hook or gate that would otherwise be dropped
silently (`loop render-hooks` only warns, as the reference does; a run must not ship past them).
Each is one `Blocker` naming the file, what is wrong and the fix; `lint` reports the same."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from looprail.textsafe import one_line

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet


@dataclass(frozen=True)
class Blocker:
    code: str
    file: str
    path: str
    message: str
    fix: str

    def line(self) -> str:
        return one_line(f"{self.file}: {self.message}; fix: {self.fix}")


def blockers(registry: CapabilitySet) -> list[Blocker]:
    """Every reason a run must not start, in search-path order (`registry` with consent
    applied)."""
    out = [
        Blocker(
            "capability-folder-missing",
            str(root.path),
            "",
            "capability folder does not exist (named by --capabilities or LOOPRAIL_CAPABILITIES)",
            "correct the path, create the folder, or stop naming it",
        )
        for root in registry.missing_roots
    ]
    for failed in registry.failed:
        issue = failed.issues[0] if failed.issues else None
        first = (
            "unreadable" if issue is None else f"{issue.path}: " * bool(issue.path) + issue.reason
        )
        more = len(failed.issues) - 1
        extra = f" (and {more} more problem{'s' * (more > 1)})" if more > 0 else ""
        gates = f"; its gates at {', '.join(failed.gate_points)} would not be evaluated"
        out.append(
            Blocker(
                "capability-not-loaded",
                failed.file,
                issue.path if issue else "",
                f"capability {failed.id!r} ({failed.origin}) failed to load: {first}{extra}"
                + (gates if failed.gate_points else ""),
                "fix the manifest (`looprail capability validate`) or remove its folder "
                f"{os.path.dirname(failed.file) or failed.file}",
            )
        )
    for cid, lc in registry.capabilities.items():
        if lc.consent is False and lc.gate_points:
            points = ", ".join(lc.gate_points)
            out.append(
                Blocker(
                    "capability-gates-untrusted",
                    lc.manifest_file,
                    "$.gates",
                    f"project capability {cid!r} declares gates at {points} but is not used: "
                    f"{lc.inactive_reason or 'no consent'}",
                    f"review it and run `looprail trust`, or remove {lc.source}",
                )
            )
    return out
