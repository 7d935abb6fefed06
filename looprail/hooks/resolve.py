"""The one resolver: which hooks are active at a point, in which order, and how they render.

`resolve` and `render` are pure functions over the compiled registry (plain JSON data, see
`registry.compile_registry`) and the project's config. `loop render-hooks`, the state machine
and `review-lane dispatch-step` all call `resolve`; nothing else decides activeness.

This module imports nothing heavy: it is on the `render-hooks` hot path.
"""

from __future__ import annotations

import json
import math

from looprail.config import MISSING, js_truthy, lookup
from looprail.points import POINTS, invalid_point_message

TYPE_CHECKING = False
if TYPE_CHECKING:  # not imported at run time: this module is on the render-hooks hot path
    from collections.abc import Mapping
    from typing import Any


class InvalidPointError(ValueError):
    def __init__(self, point: str):
        super().__init__(invalid_point_message(point))
        self.point = point


def check_point(point: str) -> str:
    if point not in POINTS:
        raise InvalidPointError(point)
    return point


def _value(key: str, config: Mapping[str, Any] | None, defaults: Mapping[str, Any]) -> Any:
    v = lookup(config, key) if config else MISSING
    if v is not MISSING:
        return v
    return defaults.get(key, MISSING)


def _truthy(key: str, config: Mapping[str, Any] | None, defaults: Mapping[str, Any]) -> bool:
    v = _value(key, config, defaults)
    return False if v is MISSING else js_truthy(v)


def cap_active(compiled: Mapping[str, Any], cap_id: str, config: Mapping[str, Any] | None) -> bool:
    """A capability is active when it loaded, nothing (consent) switched it off, and its
    `activationKey`, if any, is truthy under the current config."""
    cap = compiled["caps"].get(cap_id)
    if cap is None or cap.get("consent") is False:
        return False
    key = cap.get("activationKey")
    return not key or _truthy(key, config, compiled["defaults"])


def resolve(
    compiled: Mapping[str, Any], config: Mapping[str, Any] | None, point: str
) -> dict[str, Any]:
    """The envelope `{point, activeHooks, rendered, warnings?}` for one point."""
    check_point(point)
    defaults = compiled["defaults"]
    table = compiled["points"][point]
    active: dict[str, bool] = {}
    hooks: list[dict[str, Any]] = []
    for group in ("steps", "contributions", "gates"):
        for entry in table[group]:
            cid = entry["capId"]
            if cid not in active:
                active[cid] = cap_active(compiled, cid, config)
            if not active[cid]:
                continue
            when = entry.get("when")
            if when is not None and not (
                isinstance(when, str) and when and _truthy(when, config, defaults)
            ):
                continue
            point_from = entry.get("$pointFrom")
            if point_from is not None and _value(point_from, config, defaults) != point:
                continue
            hook = {k: v for k, v in entry.items() if not k.startswith("$")}
            if "configValues" in hook:
                resolved = {}
                for alias, key in hook["configValues"].items():
                    v = _value(key, config, defaults)
                    if v is not MISSING:  # JSON.stringify drops undefined
                        resolved[alias] = v
                hook["configValues"] = resolved
            hooks.append(hook)
    envelope: dict[str, Any] = {
        "point": point,
        "activeHooks": hooks,
        "rendered": render(point, hooks),
    }
    warnings = point_warnings(compiled, point)
    if warnings:
        envelope["warnings"] = warnings
    return envelope


def point_warnings(compiled: Mapping[str, Any], point: str) -> list[str]:
    """Fail-open warnings: a capability that failed to load and declared a gate here."""
    out = []
    for failed in compiled.get("failed", ()):
        if point in failed.get("gatePoints", ()):
            out.append(
                f"capability {failed['id']!r} ({failed['origin']}) failed to load, so its gate at "
                f"{point} was not evaluated; fix it or run `looprail capability remove "
                f"{failed['id']}` ({failed['issues'][0] if failed['issues'] else 'invalid'})"
            )
    return out


def active_cap(
    compiled: Mapping[str, Any], config: Mapping[str, Any] | None, point: str, cap_id: str
) -> bool:
    """`--active-cap`: does `cap_id` have any active hook at `point`?"""
    return any(h["capId"] == cap_id for h in resolve(compiled, config, point)["activeHooks"])


# --------------------------------------------------------------------------- rendering


def _js_number(value: Any) -> Any:
    """Make floats print as JavaScript would (1.0 → 1)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _js_number(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_number(v) for v in value]
    return value


def js_stringify(value: Any) -> str:
    """`JSON.stringify(value)`: compact, key order kept, non-ASCII kept."""
    return json.dumps(_js_number(value), separators=(",", ":"), ensure_ascii=False)


def _meta_lines(hook: Mapping[str, Any]) -> list[str]:
    lines = []
    if hook.get("produces"):
        lines.append("- produces: " + ", ".join(hook["produces"]))
    if hook.get("consumes"):
        lines.append("- consumes: " + ", ".join(hook["consumes"]))
    if hook.get("when"):
        lines.append(f"- when: `{hook['when']}`")
    if hook.get("onError"):
        lines.append(f"- onError: {hook['onError']}")
    return lines


def _ref_label(ref: Mapping[str, Any]) -> str:
    if ref.get("skill"):
        return f"skill:{ref['skill']}"
    if ref.get("agent"):
        return f"agent:{ref['agent']}"
    return js_stringify(ref)


def render(point: str, hooks: list[Mapping[str, Any]]) -> str:
    """The deterministic markdown of an envelope (`rendered`), byte for byte as the reference."""
    if not hooks:
        return f"_No active hooks at {point}._"
    lines: list[str] = []
    step_no = 0
    for hook in hooks:
        kind = hook["kind"]
        frag = hook.get("fragment") or {}
        if kind == "step":
            step_no += 1
            lines.append(f"### Step {step_no}: {_ref_label(hook['ref'])} ({hook['capId']})")
            lines += _meta_lines(hook)
            if "inline" in frag:
                lines += ["", frag["inline"]]
            elif "path" in frag:
                lines += [
                    "",
                    "_Step fragment path is declared but not rendered by loop-resolver: "
                    f"{frag['path']}_",
                ]
            lines.append("")
        elif kind == "contribution":
            lines.append(
                f'<contribution from="{hook["capId"]}" into="{hook.get("into") or "(unset)"}">'
            )
            if frag.get("inline"):
                lines.append(frag["inline"])
            elif frag.get("path"):
                lines.append(
                    "_Contribution fragment path is declared but not rendered by loop-resolver: "
                    f"{frag['path']}_"
                )
            lines += _meta_lines(hook)
            lines += ["</contribution>", ""]
        else:
            blocking = "true" if hook.get("blocking") is True else "false"
            lines.append(
                f"**Gate** ({hook['capId']}): check={js_stringify(hook.get('check'))}, "
                f"blocking={blocking}, onError={hook.get('onError') or 'skip'}"
            )
            if hook.get("when"):
                lines.append(f"- when: `{hook['when']}`")
            lines.append("")
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines)
