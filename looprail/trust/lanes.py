"""A reviewer lane as declared: its config values (budget, timeout, model and effort), its
argv and its availability probe. `looprail.trust.reviewer` selects lanes and runs them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from looprail.config import MISSING, lookup
from looprail.runtime.process import ProcessResult, escape_untrusted, find_program, run_bounded

DEFAULT_TIMEOUT_MS = 600_000
MAX_TIMEOUT_MS = 2 * 60 * 60 * 1000
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")

Spawn = Callable[..., ProcessResult]
Which = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Lane:
    """A declared reviewer lane: the `reviewer` body of capability `cap_id`."""

    cap_id: str
    body: Mapping[str, Any]

    @property
    def slug(self) -> str:
        return str(self.body.get("slug"))

    @property
    def invoke(self) -> Mapping[str, Any]:
        invoke = self.body.get("invoke")
        return invoke if isinstance(invoke, Mapping) else {}


def lane_budget(lane: Lane, config: Mapping[str, Any] | None) -> int | None:
    """The lane's prompt budget in tokens: its `promptBudgetKey` config value (`-1` falls back
    to `review.max_prompt_tokens`); None or 0 means unbounded."""
    key = lane.body.get("promptBudgetKey")
    if not isinstance(key, str) or not key:
        return None
    value = _number(config, key)
    if value is not None and value != -1:
        return int(value)
    fallback = _number(config, "review.max_prompt_tokens")
    return int(fallback) if fallback is not None else None


def lane_timeout_s(lane: Lane, config: Mapping[str, Any] | None) -> float:
    """`timeoutConfigKey`'s value (ms), never below `timeoutFloorMs`, bounded above."""
    floor = lane.body.get("timeoutFloorMs")
    floor_ms = floor if isinstance(floor, int) and not isinstance(floor, bool) and floor > 0 else 0
    key = lane.body.get("timeoutConfigKey")
    configured = _number(config, key) if isinstance(key, str) and key else None
    ms = max(floor_ms, int(configured) if configured and configured > 0 else 0)
    return min(ms or DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS) / 1000


def _number(config: Mapping[str, Any] | None, key: str) -> float | None:
    value = lookup(dict(config) if config else None, key)
    if value is MISSING or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _string(config: Mapping[str, Any] | None, key: Any) -> str | None:
    if not isinstance(key, str) or not key:
        return None
    value = lookup(dict(config) if config else None, key)
    return value if isinstance(value, str) and value and not _CONTROL.search(value) else None


def lane_argv(
    lane: Lane, binary: str, config: Mapping[str, Any] | None, *, review_path: str, prompt_path: str
) -> list[str] | str:
    """The lane's argv: `invoke.args` with the whole-element placeholders expanded (an element
    that merely contains one is left as written, never templated):

    - `{{model}}` → `[modelArg, model]` (or `[model]` without `modelArg`) when the config sets
      `modelConfigKey`, else nothing;
    - `{{effort}}` → the same with `effortArg` and `effortConfigKey` (default
      `review.efforts.<slug>`), only when `effortChannel` is `argv`;
    - `{{output}}` → `[outputArg, <review path>]` when `outputChannel` is `file-arg`;
    - `{{prompt}}` → one element naming the prompt file when `promptChannel` is
      `argv-file-ref`.

    Returns a reason (str) when the invoke shape is malformed."""
    invoke = lane.invoke
    args = invoke.get("args")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return "invoke.args must be a list of strings"
    model_key = lane.body.get("modelConfigKey")
    effort_key = invoke.get("effortConfigKey") or lane.body.get("effortConfigKey")
    model = _string(config, model_key)
    effort = None
    if invoke.get("effortChannel") == "argv":
        effort = _string(config, effort_key or f"review.efforts.{lane.slug}")
    refused = _option_like(("model", model_key, model), ("effort", effort_key, effort))
    if refused:
        return refused
    to_file = invoke.get("outputChannel", "stdout") == "file-arg"
    prompt_ref = f"Read the review request in {prompt_path} and follow it."
    by_file = invoke.get("promptChannel") == "argv-file-ref"
    expansions = {
        "{{model}}": _flagged(invoke.get("modelArg"), model),
        "{{effort}}": _flagged(invoke.get("effortArg"), effort),
        "{{output}}": _flagged(invoke.get("outputArg"), review_path) if to_file else [],
        "{{prompt}}": [prompt_ref] if by_file else [],
    }
    argv = [binary]
    for arg in args:
        argv += expansions.get(arg, [arg])
    return argv


def _option_like(*values: tuple[str, object, str | None]) -> str | None:
    """Why a config value may not be passed, else None. A project's config is not the user's:
    a value starting with '-' would be read by the CLI as an option of its own
    (`--dangerously-skip-permissions`), not as a model or an effort."""
    for name, key, value in values:
        if value is not None and value.startswith("-"):
            return (
                f"config value {escape_untrusted(value)!r} for the {name} "
                f"({escape_untrusted(str(key or name))}) starts with '-' and would be read as an "
                "option; refused"
            )
    return None


def _flagged(flag: Any, value: str | None) -> list[str]:
    if value is None:
        return []
    return [flag, value] if isinstance(flag, str) and flag else [value]


def probe_lane(
    lane: Lane, *, spawn: Spawn = run_bounded, which: Which = find_program
) -> str | None:
    """None when the lane is available, else why not. `command-exists` looks the binary up on
    PATH; `command-capability` also runs `<binary> --help` (bounded) and looks for `needle` in
    its output; `http-reachable` is never available (looprail makes no network requests)."""
    if lane.body.get("transport") == "openai-http":
        return None  # selected, then reported as unsupported_transport: nothing is contacted
    for binary in lane.body.get("requiresBinaries") or ():
        if not isinstance(binary, str) or which(binary) is None:
            return f"required binary {escape_untrusted(str(binary))} not found on PATH"
    probe = lane.body.get("probe")
    probe = probe if isinstance(probe, Mapping) else {}
    kind = probe.get("kind")
    if kind == "http-reachable":
        return "http-reachable probe: looprail makes no network requests"
    binary = probe.get("binary") or lane.invoke.get("binary")
    if not isinstance(binary, str) or not binary:
        return "probe names no binary"
    found = which(binary)
    if found is None:
        return f"{escape_untrusted(binary)} not found on PATH"
    if kind == "command-exists":
        return None
    if kind == "command-capability":
        timeout = probe.get("timeoutMs")
        needle = probe.get("needle")
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
            return "command-capability probe needs a positive timeoutMs"
        if not isinstance(needle, str) or not needle:
            return "command-capability probe needs a needle"
        result = spawn([found, "--help"], timeout_s=min(timeout, MAX_TIMEOUT_MS) / 1000)
        if result.spawn_error or result.timed_out:
            return f"{escape_untrusted(binary)} --help {result.describe_failure()}"
        if needle not in result.stdout + result.stderr:
            return f"{escape_untrusted(binary)} --help does not mention {escape_untrusted(needle)}"
        return None
    return f"unknown probe kind {escape_untrusted(str(kind))}"
