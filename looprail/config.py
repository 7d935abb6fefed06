"""Project configuration: `<project>/.planning/config.json`, read and typed as the reference does
(docs/checks.md "Config semantics"): parsed as `JSON.parse` would, a declared key counting only
when its value fits its type, `when`/`activationKey` taking JavaScript's `Boolean()`.
`render-hooks` is fail-open (a malformed file is absent, with a warning); `run`, `lint` and
`check` stop on it (`load_project_config_strict`). On the `render-hooks` start path: light imports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprail.errors import ConfigError  # a plain module: nothing heavy on the hot path
from looprail.fsutil import read_bounded

# JSON as JavaScript lives in jsonload; hooks.resolve and cli.render_hooks import it from here.
from looprail.jsonload import JSText as JSText
from looprail.jsonload import js_dump as js_dump
from looprail.jsonload import js_dumps as js_dumps
from looprail.jsonload import js_number as js_number
from looprail.jsonload import json_type_name, parse_json_js
from looprail.layout import config_path

# Keys that must never resolve, whatever the file says (prototype-pollution parity).
FORBIDDEN_SEGMENTS = frozenset({"__proto__", "constructor", "prototype"})

# The reference reads any size; a Python object tree costs ~10x the file, so looprail stops at a
# generous bound (no real config comes near it). Over it: unreadable.
MAX_CONFIG_BYTES = 64 * 1024 * 1024


def _read_config(project: str | Path) -> tuple[str, Any]:
    """`(path, parsed value or MISSING when absent)`. Raises `ConfigError` for a file that exists
    but cannot be used (unreadable, not a regular file, too large, not JSON)."""
    path = config_path(project)
    try:
        raw = read_bounded(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(path, f"cannot be read ({exc.strerror or exc})") from None
    if raw is None:
        return path, MISSING
    try:
        # as Node's readFileSync(path, 'utf8'): bad bytes become U+FFFD, a BOM is kept (and
        # then fails to parse, as in the reference)
        return path, parse_json_js(raw.decode("utf-8", "replace"))
    except RecursionError:  # JSON.parse reads any depth; Python's parser stops at a depth
        # that depends on the Python version (docs/checks.md, "Config semantics")
        reason = "cannot be read (JSON nested too deeply for Python's parser)"
        raise ConfigError(path, reason) from None
    except json.JSONDecodeError as exc:
        doc, pos, msg = exc.doc, exc.pos, exc.msg
        comma = _trailing_comma(doc, pos)
        if comma is not None:
            pos, msg = comma
        line = doc.count("\n", 0, pos) + 1
        col = pos - doc.rfind("\n", 0, pos)
        raise ConfigError(path, f"not valid JSON ({msg})", line, col) from None


def _trailing_comma(doc: str, pos: int) -> tuple[int, str] | None:
    """(the comma's position, the reason) when the parse failed at a comma just before a closing
    bracket. Python's parser reports it at the bracket up to 3.12 and at the comma from 3.13,
    each in its own words; one reason for both."""
    blank = " \t\n\r"
    if doc[pos : pos + 1] in ("}", "]"):
        before = doc[:pos].rstrip(blank)
        if before.endswith(","):
            return len(before) - 1, f"trailing comma before {doc[pos]!r}"
    elif doc[pos : pos + 1] == ",":
        after = doc[pos + 1 :].lstrip(blank)
        if after[:1] in ("}", "]"):
            return pos, f"trailing comma before {after[0]!r}"
    return None


def load_project_config(project: str | Path) -> tuple[dict[str, Any] | None, list[str]]:
    """`(config or None, warnings)`, fail-open as the reference's `render-hooks`: absent →
    `(None, [])`; unreadable, not JSON or not an object → `(None, [one warning])`."""
    try:
        path, value = _read_config(project)
    except ConfigError as exc:
        return None, [f"{exc}; its settings were NOT applied, using defaults instead"]
    if value is MISSING:
        return None, []
    if isinstance(value, dict):
        return value, []
    return None, [
        f"{path}: top level is not a JSON object; its settings were NOT applied, using defaults"
    ]


def load_project_config_strict(project: str | Path) -> dict[str, Any] | None:
    """The config for `run`, `lint` and `check`: absent → None; an unusable file raises
    `ConfigError` (running a phase on defaults the user did not choose is worse than stopping)."""
    path, value = _read_config(project)
    if value is MISSING:
        return None
    if isinstance(value, dict):
        return value
    raise ConfigError(path, f"top level must be a JSON object, got {json_type_name(value)}", 1, 1)


def lookup(config: Any, dotted: str) -> Any:
    """The value at `dotted` in `config` (a path through nested objects), or `MISSING`. As the
    reference resolver: each segment an own key on the way (a literal dotted key is not a path),
    `FORBIDDEN_SEGMENTS` never resolve, and an array resolves `0`, `1`, … and `length`."""
    if not config or not isinstance(dotted, str) or not dotted:
        return MISSING
    node: Any = config
    for seg in dotted.split("."):
        if seg in FORBIDDEN_SEGMENTS:
            return MISSING
        if isinstance(node, dict):
            if seg not in node:
                return MISSING
            node = node[seg]
        elif isinstance(node, list):
            if seg == "length":
                node = len(node)
            elif seg.isdigit() and (seg == "0" or seg[0] != "0") and int(seg) < len(node):
                node = node[int(seg)]
            else:
                return MISSING
        else:
            return MISSING
    return node


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


def type_matches(value: Any, spec: Any) -> bool:
    """Does `value` fit a declared config key `spec` (`{"type", "values"?}`)? As the reference's
    federated config: boolean/number/string by JSON type, enum a string among `values`."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "enum":
        values = spec.get("values")
        return isinstance(value, str) and (not values or value in values)
    return False


def effective_value(key: str, config: Any, schema: Any) -> Any:
    """The value the reference resolves for a dotted `key`, or `MISSING`: for a key `schema`
    declares (`{"type", "default", "values"?}`) the config's value when it fits the type, else
    the default; for an undeclared key the raw value at its nested path."""
    spec = schema.get(key) if schema else None
    value = lookup(config, key) if config else MISSING
    if isinstance(spec, dict) and "default" in spec:
        if value is not MISSING and type_matches(value, spec):
            return value
        return spec["default"]
    return value


def js_truthy(value: Any) -> bool:
    """JavaScript's `Boolean(value)` for JSON values: false, 0, -0, NaN, "" and null are false;
    every object and array (even empty) is true."""
    if value is None or value is MISSING:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return not (value == 0 or value != value)  # NaN is the one value unequal to itself
    if isinstance(value, str):
        return value != ""
    return True  # dict, list: objects are truthy in JS


def is_active(key: str, config: Any, schema: Any) -> bool:
    """`when`/`activationKey`: `Boolean()` of the effective value (absent is false)."""
    return js_truthy(effective_value(key, config, schema))


# Settings the host loop itself reads (GSD core and looprail's own): the central schema. A
# capability may not declare one of these, or a key under one (manifest validation).
KNOWN_SETTINGS = frozenset(
    """
    mode granularity depth model_profile model_overrides commit_docs search_gitignored
    parallelization brave_search firecrawl exa_search git planning hooks agent_skills
    response_language resolve_model_ids context_window phase_naming project_code gates safety
    statusline features workstreams looprail workflow.inline_plan_threshold
    workflow.auto_advance workflow.verifier workflow.plan_check workflow.node_repair
    workflow.node_repair_budget workflow.discuss_mode workflow.skip_discuss workflow.text_mode
    workflow.research_before_questions workflow.subagent_timeout workflow.use_worktrees
    workflow.max_discuss_passes workflow._auto_chain_active
    """.split()  # noqa: SIM905  # a table of names: one a line would be 150 lines
)

# More keys the reference host reads or writes that are not capability keys: its central config
# schema (valid keys, dynamic-key families, runtime state) and the keys of its config template
# (the reference's `templates/config.json`, whose workflow.* feature keys capabilities
# declare). They are not typos, so `render-hooks` does not warn about them; they do not
# restrict manifests.
REFERENCE_SETTINGS = frozenset(
    """
    agent_skills_security.trusted_global_roots branching_strategy capabilities.auto_update
    capabilities.strict_known_registries claude_md_assembly claude_md_assembly.mode
    claude_md_path code_quality.fallow.enabled code_quality.fallow.mcp
    code_quality.fallow.profile code_quality.fallow.scope context dynamic_routing effort
    effort.default executor.stall_detect_interval_minutes executor.stall_threshold_minutes
    fast_mode fast_mode.enabled features.global_learnings features.thinking_partner
    gates.confirm_breakdown gates.confirm_phases gates.confirm_plan gates.confirm_project
    gates.confirm_roadmap gates.confirm_transition gates.execute_next_plan gates.issues_review
    git.base_branch git.branching_strategy git.create_tag git.milestone_branch_template
    git.phase_branch_template git.quick_branch_template granularities graphify.auto_update
    graphify.build_timeout graphify.graph_path hooks.context_warnings hooks.workflow_guard jina
    learnings.max_inject manager.flags.discuss manager.flags.execute manager.flags.plan
    model_policy model_policy.budget model_policy.high model_policy.low model_policy.medium
    model_policy.provider model_profile_overrides models multiRepo parallelization.enabled
    parallelization.max_concurrent_agents parallelization.min_plans_for_parallel
    parallelization.plan_level parallelization.skip_checkpoints parallelization.task_level
    perplexity phase_id_convention plan_review.source_grounding
    plan_review.source_grounding_authority planner.stall_detect_interval_minutes
    planner.stall_threshold_minutes planning.commit_docs planning.search_gitignored
    planning.sub_repos ref_search research review review.default_reviewers
    review.max_prompt_tokens review.max_prompt_tokens_per_reviewer runtime
    safety.always_confirm_destructive safety.always_confirm_external_services
    security.injection_blocking ship.pr_body_sections statusline.context_position
    statusline.show_context_tokens statusline.show_git statusline.show_last_command
    statusline.state_format tavily_search workflow.auto_prune_state workflow.build_command
    workflow.code_review_command workflow.context_coverage_gate workflow.context_guard_mode
    workflow.cross_ai_command workflow.cross_ai_execution workflow.cross_ai_timeout
    workflow.human_verify_mode workflow.mvp_mode workflow.nyquist_validation
    workflow.plan_bounce workflow.plan_bounce_passes workflow.plan_bounce_script
    workflow.plan_chunked workflow.plan_review_convergence workflow.research
    workflow.security_asvs_level workflow.security_block_on workflow.security_enforcement
    workflow.smart_zone_tokens workflow.specless_probe_fallback workflow.test_command
    workflow.test_gate_timeout workflow.worktree_skip_hooks
    """.split()  # noqa: SIM905  # a table of names: one a line would be 150 lines
)


def unknown_keys(config: Mapping[str, object], declared: Any) -> list[str]:
    """Leaf keys of `config` (dotted) that no capability declares and no known setting covers."""
    out: list[str] = []

    def known(dotted: str) -> bool:
        if dotted in declared or dotted in KNOWN_SETTINGS or dotted in REFERENCE_SETTINGS:
            return True
        parts = dotted.split(".")
        return any(
            ".".join(parts[:i]) in KNOWN_SETTINGS or ".".join(parts[:i]) in REFERENCE_SETTINGS
            for i in range(1, len(parts))
        )

    def walk(node: Mapping[str, object], prefix: str, depth: int) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if known(dotted):
                continue
            if isinstance(value, dict) and value and depth < 32:
                walk(value, dotted + ".", depth + 1)  # report the leaf, which names the typo
            else:
                out.append(dotted)

    walk(config, "", 0)
    return out
