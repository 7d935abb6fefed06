"""The twelve loop extension points and the agent roles each one may contribute into.

`execute:task` is deliberately not here: it is evaluated per task by the task-content resolver,
never through `render-hooks` (seed 004, ADR-3646)."""

from __future__ import annotations

POINTS: tuple[str, ...] = (
    "discuss:pre",
    "discuss:post",
    "plan:pre",
    "plan:post",
    "execute:pre",
    "execute:wave:pre",
    "execute:wave:post",
    "execute:post",
    "verify:pre",
    "verify:post",
    "ship:pre",
    "ship:post",
)

# From the reference's generated host contract: a contribution's `into` must be one of these.
_STEP_ROLES = {
    "discuss": ("orchestrator",),
    "plan": ("researcher", "planner", "checker"),
    "execute": ("executor", "verifier"),
    "verify": ("orchestrator",),
    "ship": ("orchestrator",),
}
POINT_ROLES: dict[str, tuple[str, ...]] = {p: _STEP_ROLES[p.split(":", 1)[0]] for p in POINTS}


def invalid_point_message(point: str) -> str:
    return f'Invalid loop point: "{point}". Valid points: {", ".join(POINTS)}'
