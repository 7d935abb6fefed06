"""Project configuration: `<project>/.planning/config.json`, dotted-key lookup and JavaScript
truthiness. Pure functions plus one loader at the edge.

A malformed config file is treated as absent with one warning (never a crash): the reference
does the same, and a host calls `render-hooks` many times per loop, so one typo must not stop it.
"""

from __future__ import annotations

import json
import math
import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds on the render-hooks start path
    from pathlib import Path
    from typing import Any

# Keys that must never resolve, whatever the file says (prototype-pollution parity).
FORBIDDEN_SEGMENTS = frozenset({"__proto__", "constructor", "prototype"})

_MISSING = object()
MAX_CONFIG_BYTES = 8 * 1024 * 1024


def config_path(project: str | Path) -> str:
    return os.path.join(os.fspath(project), ".planning", "config.json")


def load_project_config(project: str | Path) -> tuple[dict[str, Any] | None, list[str]]:
    """Read `.planning/config.json`. Returns `(config or None, warnings)`.

    Absent file → `(None, [])`. Unreadable, not JSON, or not an object → `(None, [one warning])`.
    """
    path = config_path(project)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return None, []
    except OSError as exc:
        return None, [f"{path}: cannot read ({exc.strerror}); treating config as absent"]
    if len(raw) > MAX_CONFIG_BYTES:
        return None, [f"{path}: larger than 8 MiB; treating config as absent"]
    from looprail.jsonload import loads_strict

    try:
        value, dupes = loads_strict(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        reason = (
            exc.msg
            if isinstance(exc, json.JSONDecodeError)
            else "not UTF-8"
            if isinstance(exc, UnicodeDecodeError)
            else str(exc)
        )
        return None, [f"{path}: not valid JSON ({reason}); treating config as absent"]
    except RecursionError:
        return None, [f"{path}: JSON nested too deeply; treating config as absent"]
    if dupes:
        # Which of two values wins differs between readers: refuse to guess.
        return None, [f"{path}: duplicate key {dupes[0]!r}; treating config as absent"]
    if not isinstance(value, dict):
        return None, [f"{path}: top level is not a JSON object; treating config as absent"]
    return value, []


def lookup(config: dict[str, Any] | None, dotted: str) -> Any:
    """The value at `dotted` in `config` (a path through nested objects), or `MISSING`.

    As the reference resolver: each segment must be an own key of an object on the way
    (`{"workflow.research": true}`, a literal dotted key, is not `workflow.research`), and
    `__proto__`/`constructor`/`prototype` segments never resolve. A key present with `null`
    is found (and is falsy)."""
    if not config or not isinstance(dotted, str) or not dotted:
        return MISSING
    node: Any = config
    for seg in dotted.split("."):
        if seg in FORBIDDEN_SEGMENTS or not isinstance(node, dict) or seg not in node:
            return MISSING
        node = node[seg]
    return node


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


def js_truthy(value: Any) -> bool:
    """JavaScript's `Boolean(value)` for JSON values: false, 0, -0, NaN, "" and null are false;
    every object and array (even empty) is true."""
    if value is None or value is MISSING:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return not (value == 0 or (isinstance(value, float) and math.isnan(value)))
    if isinstance(value, str):
        return value != ""
    return True  # dict, list: objects are truthy in JS


# Settings the host loop itself reads (GSD core and looprail's own). A config key that is neither
# one of these nor declared by a capability is probably a typo, so it gets a warning.
KNOWN_SETTINGS = frozenset(
    {
        "mode",
        "granularity",
        "depth",
        "model_profile",
        "model_overrides",
        "commit_docs",
        "search_gitignored",
        "parallelization",
        "brave_search",
        "firecrawl",
        "exa_search",
        "git",
        "planning",
        "hooks",
        "agent_skills",
        "response_language",
        "resolve_model_ids",
        "context_window",
        "phase_naming",
        "project_code",
        "gates",
        "safety",
        "statusline",
        "features",
        "workstreams",
        "looprail",
        "workflow.inline_plan_threshold",
        "workflow.auto_advance",
        "workflow.verifier",
        "workflow.plan_check",
        "workflow.node_repair",
        "workflow.node_repair_budget",
        "workflow.discuss_mode",
        "workflow.skip_discuss",
        "workflow.text_mode",
        "workflow.research_before_questions",
        "workflow.subagent_timeout",
        "workflow.use_worktrees",
        "workflow.max_discuss_passes",
        "workflow._auto_chain_active",
    }
)


def unknown_keys(config: dict[str, Any], declared: Any) -> list[str]:
    """Leaf keys of `config` (dotted) that no capability declares and no known setting covers."""
    out: list[str] = []

    def known(dotted: str) -> bool:
        if dotted in declared or dotted in KNOWN_SETTINGS:
            return True
        parts = dotted.split(".")
        return any(".".join(parts[:i]) in KNOWN_SETTINGS for i in range(1, len(parts)))

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if known(dotted):
                continue
            if isinstance(value, dict) and value:
                walk(value, dotted + ".")  # report the leaf, which names the typo
            else:
                out.append(dotted)

    walk(config, "")
    return out
