"""The one resolver: which hooks are active at a point, in which order, and how they render.
`resolve` and `render` are pure functions over the capability set and the project's config;
nothing else decides activeness."""

# No `from __future__ import annotations`: the typed dicts below read their field types at run
# time (a string annotation would be compiled into a `typing.ForwardRef`).
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from looprail.config import (
    FORBIDDEN_SEGMENTS,
    MISSING,
    JSText,
    effective_value,
    is_active,
    js_dumps,
)
from looprail.errors import InvalidPointError
from looprail.hooks.capset import CapabilitySet, FailedCapability, Hook, key_active
from looprail.points import POINTS


class Envelope(TypedDict):
    """What `resolve` answers for one point (the render-hooks contract)."""

    point: str
    activeHooks: list[Hook]
    rendered: str | JSText  # a `JSText` when streamed
    warnings: NotRequired[list[str]]
    context: NotRequired[dict[str, str]]  # `render-hooks --phase`


def check_point(point: str) -> str:
    if point not in POINTS:
        raise InvalidPointError(point)
    return point


def cap_active(caps: CapabilitySet, cap_id: str, config: Mapping[str, Any] | None) -> bool:
    """A capability is active when it loaded, nothing (consent) switched it off, and its
    `activationKey`, if any, is truthy under the current config."""
    lc = caps.capabilities.get(cap_id)
    if lc is None or lc.consent is False:
        return False
    return key_active(lc.activation_key, config, caps.config)


def resolve(
    caps: CapabilitySet, config: Mapping[str, Any] | None, point: str, *, streamed: bool = False
) -> Envelope:
    """The envelope `{point, activeHooks, rendered, warnings?}` for one point.

    With `streamed`, `rendered` is a `JSText` (its `str()` is the text) for `js_dump` to write
    piece by piece: a fragment named by many hooks is then never copied once per hook."""
    check_point(point)
    table = caps.hooks_at(point)
    active: dict[str, bool] = {}
    hooks: list[Hook] = []
    for group in ("steps", "contributions", "gates"):
        for entry in table[group]:
            cid = entry["capId"]
            if cid not in active:
                active[cid] = cap_active(caps, cid, config)
            hook = _configured(entry, config, caps.config, point) if active[cid] else None
            if hook is not None:
                hooks.append(hook)
    envelope: Envelope = {
        "point": point,
        "activeHooks": hooks,
        "rendered": rendered_text(point, hooks) if streamed else render(point, hooks),
    }
    warnings = point_warnings(caps, point)
    if warnings:
        envelope["warnings"] = warnings
    return envelope


def _configured(
    entry: Hook, config: Mapping[str, Any] | None, defaults: Mapping[str, Any], point: str
) -> Hook | None:
    """The hook as the envelope lists it under `config` (its `configValues` resolved), or None
    when its `when` is falsy or its `pointFrom` names another point."""
    when = entry.get("when")
    if when is not None and not (
        isinstance(when, str) and when and is_active(when, config, defaults)
    ):
        return None
    point_from = entry.get("$pointFrom")
    if point_from is not None and effective_value(point_from, config, defaults) != point:
        return None
    hook = {k: v for k, v in entry.items() if not k.startswith("$")}
    if "configValues" in hook:
        resolved = {}
        for alias, key in hook["configValues"].items():
            if alias in FORBIDDEN_SEGMENTS or not isinstance(key, str):
                continue
            v = effective_value(key, config, defaults)
            if v is not MISSING:  # JSON.stringify drops undefined
                resolved[alias] = v
        if resolved:
            hook["configValues"] = resolved
        else:  # the reference omits an empty map
            del hook["configValues"]
    return hook


def point_warnings(caps: CapabilitySet, point: str) -> list[str]:
    """Fail-open warnings, in the reference's shape: a capability that failed to load (an invalid
    manifest, an `engines.gsd` range this engine does not satisfy, …) and declared a gate here.
    An id that fails the id grammar is withheld: it never appears inside a suggested command."""
    out = []
    for failed in caps.failed:
        if point not in failed.gate_points:
            continue
        cid, origin = failed.id, failed.origin
        reason = _sanitize_reason(failed.issues[0] if failed.issues else "invalid")
        folder = _root_of(failed)
        if re.match(_CAP_ID, cid) is None:
            label = f"with an invalid id (withheld) under {folder}"
            fix = f"Remove the offending capability folder under {folder}, or fix the load error."
        else:
            label = f'"{cid}"'
            if origin in ("project", "global"):
                flag = " --global" if origin == "global" else ""
                fix = f"Run `looprail capability remove{flag} {cid}` to remove it, or fix the "
                fix += "load error."
            else:  # a --capabilities folder: looprail does not delete those
                fix = f"Remove its folder under {folder}, or fix the load error."
        out.append(
            f"capability {label} failed to load ({reason}); its gate at {point} is SKIPPED "
            f"and NOT enforced (failing open). {fix}"
        )
    return out


_CAP_ID = r"[a-z][a-z0-9-]*\Z"  # the reference's id grammar (LOAD_FAIL_CAP_ID_RE)


def _sanitize_reason(reason: Any) -> str:
    """Control characters and backticks out, whitespace collapsed, at most 300 characters: a
    third-party reason cannot break out of the warning line."""
    text = "".join(" " if ch < " " or ch in "\x7f`" else ch for ch in str(reason))
    return " ".join(text.split())[:300] or "(no reason given)"


def _root_of(failed: FailedCapability) -> str:
    file = failed.file
    root = os.path.dirname(os.path.dirname(file)) if file else "the capability folders"
    return _sanitize_reason(root)


def active_cap(
    caps: CapabilitySet, config: Mapping[str, Any] | None, point: str, cap_id: str
) -> bool:
    """`--active-cap`: does `cap_id` have any active hook at `point`?"""
    return any(h["capId"] == cap_id for h in resolve(caps, config, point)["activeHooks"])


def _check_label(check: Any) -> str:
    """The reference's `check=` text: JSON for an object, `String()` for a scalar."""
    if check is None:
        return "(none)"
    return check if isinstance(check, str) else js_dumps(check)


def _fragment_lines(frag: Mapping[str, Any], what: str) -> list[str]:
    if frag.get("inline"):
        return [frag["inline"]]
    if frag.get("path"):
        return [
            f"_{what} fragment path is declared but not rendered by loop-resolver: {frag['path']}_"
        ]
    return []


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
    return js_dumps(ref)


def render(point: str, hooks: Sequence[Mapping[str, Any]]) -> str:
    """The deterministic markdown of an envelope (`rendered`), byte for byte as the reference."""
    return "\n".join(_render_lines(point, hooks))


def rendered_text(point: str, hooks: Sequence[Mapping[str, Any]]) -> JSText:
    """`render(point, hooks)` as pieces, never joined: each line is the hook's own string (a
    fragment's text is shared, not copied), with the newlines between them."""
    lines = _render_lines(point, hooks)

    def pieces() -> Iterator[str]:
        for i, line in enumerate(lines):
            if i:
                yield "\n"
            yield line

    return JSText(pieces)


def _render_lines(point: str, hooks: Sequence[Mapping[str, Any]]) -> list[str]:
    if not hooks:
        return [f"_No active hooks at {point}._"]
    lines: list[str] = []
    step_no = 0
    for hook in hooks:
        kind = hook["kind"]
        frag = hook.get("fragment") or {}
        if kind == "step":
            step_no += 1
            ref = hook.get("ref")
            label = _ref_label(ref if isinstance(ref, dict) else {})
            lines.append(f"### Step {step_no}: {label} ({hook['capId']})")
            lines += _meta_lines(hook)
            text = _fragment_lines(frag, "Step")
            lines += ["", *text, ""] if text else [""]
        elif kind == "contribution":
            lines.append(
                f'<contribution from="{hook["capId"]}" into="{hook.get("into", "(unset)")}">'
            )
            lines += _fragment_lines(frag, "Contribution")
            lines += _meta_lines(hook)
            lines += ["</contribution>", ""]
        else:
            blocking = "true" if hook.get("blocking") is True else "false"
            lines.append(
                f"**Gate** ({hook['capId']}): check={_check_label(hook.get('check'))}, "
                f"blocking={blocking}, onError={hook.get('onError', 'skip')}"
            )
            if hook.get("when"):
                lines.append(f"- when: `{hook['when']}`")
            lines.append("")
    while lines and lines[-1] == "":
        lines.pop()
    return lines
