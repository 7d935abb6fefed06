"""The loop extension points and the agent roles each one may contribute into: the one place
the point vocabulary is declared. The `Point` type, the loop spec, the CLI help and every
message read it from here (a test checks that nothing else spells the list out).

`execute:task` is deliberately not here: it is evaluated per task by the task-content resolver,
never through `render-hooks` (docs/contract.md, "execute:task").

Only the tuple exists at run time on the `render-hooks` hot path (no `typing` import); `Point`,
the same values as a `Literal`, is built on first use."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - for type checkers; a test checks it equals POINTS
    from typing import Literal

    Point = Literal[
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
    ]

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


def __getattr__(name: str) -> object:
    # `Point` at run time (pydantic fields): the Literal of POINTS, built on first use.
    if name == "Point":
        from typing import Literal

        point = Literal[POINTS]  # type: ignore[valid-type]
        globals()["Point"] = point
        return point
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
