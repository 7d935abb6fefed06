"""The loop extension points and the agent roles each one may contribute into: the one place
the point vocabulary is declared (the manifests' `Point` type, the loop spec, the CLI help and
every message read it from here; a test checks that nothing else spells the list out).

`execute:task` is deliberately not a point: it is evaluated per task by the task-content
resolver, never through `render-hooks` (docs/contract.md, "execute:task").

Plain tuples only: this is on the `render-hooks` hot path, which does not import `typing`."""

from __future__ import annotations

# Each step of a phase, in order, with the roles a contribution's `into` may name there (from
# the reference's generated host contract).
_STEP_ROLES = {
    "discuss": ("orchestrator",),
    "plan": ("researcher", "planner", "checker"),
    "execute": ("executor", "verifier"),
    "verify": ("orchestrator",),
    "ship": ("orchestrator",),
}

# The two points the wave sub-loop crosses once per wave.
WAVE_PRE, WAVE_POST = "execute:wave:pre", "execute:wave:post"

POINTS: tuple[str, ...] = tuple(
    point
    for step in _STEP_ROLES
    for point in (
        f"{step}:pre",
        *((WAVE_PRE, WAVE_POST) if step == "execute" else ()),
        f"{step}:post",
    )
)
"""The extension points, in the order a phase reaches them: each step's `pre` and `post`, and
the wave points inside `execute`."""

POINT_ROLES: dict[str, tuple[str, ...]] = {p: _STEP_ROLES[p.split(":", 1)[0]] for p in POINTS}


def points_text() -> str:
    """`discuss:pre, discuss:post, …`: the points as messages and help list them."""
    return ", ".join(POINTS)


def invalid_point_message(point: str) -> str:
    return f'Invalid loop point: "{point}". Valid points: {points_text()}'
