"""The loop extension points and the agent roles each one may contribute into: the one place
the point vocabulary is declared. The manifest models' `Point` type (a `Literal` of these), the
loop spec, the CLI help and every message read it from here (a test checks that nothing else
spells the list out).

`execute:task` is deliberately not here: it is evaluated per task by the task-content resolver,
never through `render-hooks` (docs/contract.md, "execute:task").

Plain tuples only: this is on the `render-hooks` hot path, which does not import `typing`."""

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
"""The twelve extension points, in the order a phase reaches them (`execute:task` is apart:
it is the per-task resolver, not a point hooks are declared at)."""

# From the reference's generated host contract: a contribution's `into` must be one of these.
_STEP_ROLES = {
    "discuss": ("orchestrator",),
    "plan": ("researcher", "planner", "checker"),
    "execute": ("executor", "verifier"),
    "verify": ("orchestrator",),
    "ship": ("orchestrator",),
}
POINT_ROLES: dict[str, tuple[str, ...]] = {p: _STEP_ROLES[p.split(":", 1)[0]] for p in POINTS}


# The two points the wave sub-loop crosses once per wave.
WAVE_PRE, WAVE_POST = POINTS[5], POINTS[6]


def points_text() -> str:
    """`discuss:pre, discuss:post, …`: the points as messages and help list them."""
    return ", ".join(POINTS)


def invalid_point_message(point: str) -> str:
    return f'Invalid loop point: "{point}". Valid points: {points_text()}'
