"""Project configuration: `<project>/.planning/config.json`, read and typed as the reference does.

Pure functions plus one reader at the edge. Only `os`, `json` and `math` are imported: this is on
the `render-hooks` start path. The rules (confirmed in the reference's config loader, federated
config merge and loop resolver; see docs/checks.md "Config semantics"):

- The file is read as UTF-8 with replacement characters for bad bytes, parsed as `JSON.parse`
  would (duplicate keys: the last one wins; numbers are doubles: `1e400` is Infinity, integers
  above 2**53 round; any depth). It is used only when it parses to an object; otherwise every
  key takes its default (and `load_project_config` says so in one warning).
- A key a capability declares (`type`, `default`, enum `values`) is typed: the value at its nested
  path counts only when it is a boolean/number/string/one of the enum's values as declared;
  anything else, `null` included, is the declared default. A key nobody declares is the raw value
  at its nested path, or absent.
- Then `when`/`activationKey` take JavaScript's `Boolean()`; `configValues` carry the value.

`render-hooks` stays fail-open (a malformed file is read as absent, with a warning, like the
reference); `run`, `lint` and `check` call `load_project_config_strict`, which stops on it.
"""

from __future__ import annotations

import json
import math
import os
import re  # already loaded by json: free on the hot path

from looprail.errors import (
    ConfigError,  # a plain module: nothing heavy on the hot path
)
from looprail.fsutil import read_bounded
from looprail.layout import PROJECT_CONFIG_FILE

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds on the render-hooks start path
    from collections.abc import Callable, Iterable
    from pathlib import Path
    from typing import Any, NoReturn

# Keys that must never resolve, whatever the file says (prototype-pollution parity).
FORBIDDEN_SEGMENTS = frozenset({"__proto__", "constructor", "prototype"})

# The reference reads any size; a Python object tree costs ~10x the file, so looprail stops at a
# generous bound (no real config comes near it) rather than exhaust memory. Over it: unreadable.
MAX_CONFIG_BYTES = 64 * 1024 * 1024
_MAX_SAFE_INTEGER = 2**53
# A file nested deeper than Python's C parser allows is parsed iteratively only up to this size.
MAX_DEEP_BYTES = 2 * 1024 * 1024


def config_path(project: str | Path) -> str:
    return os.path.join(os.fspath(project), PROJECT_CONFIG_FILE)


# --------------------------------------------------------------------------- JSON as JavaScript


def _js_int(text: str) -> int | float:
    """A JSON integer as a JavaScript double: exact up to 2**53, rounded above, Infinity past
    the double range."""
    if len(text) > 400:  # past 1.8e308 (JSON has no leading zeros); int() would refuse it
        return -math.inf if text.startswith("-") else math.inf
    value = int(text)
    if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
        return value
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json_js(text: str) -> Any:
    """`JSON.parse(text)` in Python values: duplicate keys keep the last value (at the first
    key's position), numbers are doubles, any nesting depth. Raises `json.JSONDecodeError`
    (with line and column) for text that `JSON.parse` refuses."""
    try:
        return json.loads(text, parse_int=_js_int, parse_constant=_no_constant)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError):
        # Deeper than the C parser's recursion limit, or NaN/Infinity (not JSON): the iterative
        # parser gives JSON.parse's answer at any depth and the exact position of an error. It
        # costs microseconds per nesting level, so a deeply nested file must be small: past
        # MAX_DEEP_BYTES it is refused (a deliberate difference; no real config is either).
        if len(text) > MAX_DEEP_BYTES:
            raise json.JSONDecodeError(
                f"nested too deeply for a file over {MAX_DEEP_BYTES >> 20} MiB", text, 0
            ) from None
        return _parse_iterative(text)


# Containers nested deeper than this are checked for syntax but kept empty: no key path is that
# long, and a 30 MB run of `[` would otherwise cost gigabytes of Python lists.
MAX_KEPT_DEPTH = 512


_WS = r"[ \t\n\r]*"
_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'


def _parse_iterative(s: str) -> Any:
    # not at the top: the render-hooks entry loads this module (its import budget)
    import re
    from json.decoder import scanstring  # type: ignore[attr-defined]  # exported, not in typeshed
    from typing import cast  # only deep files take this path: not the hot path

    # `[ \t\n\r]*` matches at every position, so the match is never None.
    skip = cast("Callable[[str, int], re.Match[str]]", re.compile(_WS).match)
    number = re.compile(r"(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?").match
    # Runs of openers (with an object's first key) and of closers, consumed in one step below
    # MAX_KEPT_DEPTH, so a pathological `[[[[…` file is checked at C speed, not per character.
    opener_run = re.compile(rf"(?:\[{_WS}|\{{{_WS}{_STRING}{_WS}:{_WS}){{1,4096}}").match
    closer_run = re.compile(rf"(?:[\]}}]{_WS}){{1,4096}}").match
    strings = re.compile(_STRING)
    n = len(s)

    def fail(msg: str, pos: int) -> NoReturn:
        raise json.JSONDecodeError(msg, s, pos)

    def key_at(pos: int) -> tuple[str, int]:
        if pos >= n or s[pos] != '"':
            fail("Expecting property name enclosed in double quotes", pos)
        key, pos = scanstring(s, pos + 1, True)
        pos = skip(s, pos).end()
        if pos >= n or s[pos] != ":":
            fail("Expecting ':' delimiter", pos)
        return key, skip(s, pos + 1).end()

    stack: list[list[Any]] = []  # kept containers: [container, pending key, closer]
    deep = bytearray()  # closers of the containers below MAX_KEPT_DEPTH (syntax only)
    pos = skip(s, 0).end()
    while True:
        if pos >= n:
            fail("Expecting value", pos)
        c = s[pos]
        if (c == "{" or c == "[") and len(stack) >= MAX_KEPT_DEPTH:
            m = opener_run(s, pos)
            if m is not None:
                openers = strings.sub("", m.group())
                deep += openers.translate(
                    {91: 93, 123: 125, 32: None, 9: None, 10: None, 13: None, 58: None}
                ).encode()
                pos = m.end()
                if pos >= n or s[pos] != "]" or deep[-1] != 93:
                    continue
                del deep[-1]  # the run ended with an empty array
                value: Any = []
                pos += 1
            else:
                pos = skip(s, pos + 1).end()  # `{}`, or an object with a malformed first key
                if pos < n and s[pos] == ("}" if c == "{" else "]"):
                    value = {} if c == "{" else []
                    pos += 1
                else:
                    key_at(pos)  # raises
        elif c == "{" or c == "[":
            closer = "}" if c == "{" else "]"
            pos = skip(s, pos + 1).end()
            if pos < n and s[pos] == closer:
                value = {} if c == "{" else []
                pos += 1
            else:
                entry: list[Any] = [{} if c == "{" else [], None, closer]
                if c == "{":
                    entry[1], pos = key_at(pos)
                stack.append(entry)
                continue
        elif c == '"':
            value, pos = scanstring(s, pos + 1, True)
        elif c == "t" and s[pos : pos + 4] == "true":
            value, pos = True, pos + 4
        elif c == "f" and s[pos : pos + 5] == "false":
            value, pos = False, pos + 5
        elif c == "n" and s[pos : pos + 4] == "null":
            value, pos = None, pos + 4
        else:
            m = number(s, pos)
            if m is None:
                fail("Expecting value", pos)
            integer, frac, exp = m.groups()
            value = float(m.group()) if frac or exp else _js_int(integer)
            pos = m.end()
        while True:  # attach `value` to its container; close the containers that end here
            pos = skip(s, pos).end()
            if deep:
                if pos < n and s[pos] == ",":
                    pos = skip(s, pos + 1).end()
                    if deep[-1] == 125:
                        _, pos = key_at(pos)
                    break
                m = closer_run(s, pos)
                if m is None:
                    fail("Expecting ',' delimiter", pos)
                run = m.group()
                closers = run.translate({32: None, 9: None, 10: None, 13: None}).encode()
                k = min(len(closers), len(deep))
                if deep[len(deep) - k :] != closers[:k][::-1]:
                    i = next(i for i in range(k) if deep[-1 - i] != closers[i])
                    fail("Expecting ',' delimiter", pos + _offset_of(run, closers, i))
                last = deep[len(deep) - k]
                del deep[len(deep) - k :]
                pos += _offset_of(run, closers, k) if k < len(closers) else len(run)
                value = ({} if last == 125 else []) if not deep else None
                continue
            if not stack:
                if pos != n:
                    fail("Extra data", pos)
                return value
            top = stack[-1]
            container, closer = top[0], top[2]
            if closer == "}":
                container[top[1]] = value
            else:
                container.append(value)
            if pos < n and s[pos] == ",":
                pos = skip(s, pos + 1).end()
                if closer == "}":
                    top[1], pos = key_at(pos)
                break
            if pos < n and s[pos] == closer:
                pos += 1
                stack.pop()
                value = container
                continue
            fail("Expecting ',' delimiter", pos)


def _offset_of(run: str, closers: bytes, count: int) -> int:
    """Offset in `run` (closers and whitespace) of its closer number `count`."""
    if len(closers) == len(run):
        return count
    seen = 0
    for offset, ch in enumerate(run):
        if ch in "]}":
            if seen == count:
                return offset
            seen += 1
    return len(run)


def decode_utf8(raw: bytes) -> str:
    """Node's `readFileSync(path, 'utf8')`: bad bytes become U+FFFD, a BOM is kept (and then
    fails to parse, as it does in the reference)."""
    return raw.decode("utf-8", "replace")


def js_number(value: float | int) -> str:
    """`String(n)`/`JSON.stringify(n)` of a JavaScript number (Infinity/NaN give `null`)."""
    if isinstance(value, int):
        if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            return "null"
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr() is the shortest round-trip digit string, as ECMAScript's Number::toString uses;
    # only the layout differs (1e+21 vs 1e21, 1.5e-7 vs 1.5e-07, 100 vs 100.0).
    mantissa, _, exp = repr(abs(value)).partition("e")
    int_part, _, frac = mantissa.partition(".")
    every = int_part + frac
    digits = every.lstrip("0")
    n = len(int_part) + (int(exp) if exp else 0) - (len(every) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * -n + digits
    else:
        e = n - 1
        frac_digits = "." + digits[1:] if k > 1 else ""
        out = f"{digits[0]}{frac_digits}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + out


def _js_string(value: str) -> str:
    out = _dumps_str(value)
    # JSON.stringify escapes lone surrogates; Python would write them raw (not encodable).
    if _SURROGATE.search(value):
        out = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    return out


_dumps_str = json.encoder.encode_basestring
_SURROGATE = re.compile("[\ud800-\udfff]")


class JSText:
    """A JSON string value given as its pieces, in order (their concatenation is the string).

    `js_dump` writes each piece as it comes, so a value that repeats one big text (a fragment
    named by many hooks) is never held whole: JSON string escaping is per character, so the
    escaped pieces concatenate to the escaped whole. `str()` joins them."""

    __slots__ = ("_pieces",)

    def __init__(self, pieces: Callable[[], Iterable[str]]):
        self._pieces = pieces

    def pieces(self) -> Iterable[str]:
        return self._pieces()

    def __str__(self) -> str:
        return "".join(self._pieces())


# A string at least this long is escaped once per dump however often the value names it.
_SHARED_MIN = 1 << 16
# Small parts are gathered to about this size before a write (one write per token is slow).
_WRITE_CHUNK = 1 << 16


def js_dump(value: Any, write: Callable[[str], object], indent: int | None = None) -> None:
    """`JSON.stringify(value, null, indent)` written through `write` piece by piece (no trailing
    newline), byte for byte as `js_dumps`. Memory stays near the largest single string in
    `value`, not the size of the output: a long string that `value` names many times (the same
    object) is escaped once and written each time, and `JSText` values are never joined."""
    pending: list[str] = []
    size = 0

    def put(part: str) -> None:
        nonlocal size
        if len(part) >= _WRITE_CHUNK:
            flush()
            write(part)
            return
        pending.append(part)
        size += len(part)
        if size >= _WRITE_CHUNK:
            flush()

    def flush() -> None:
        nonlocal size
        if pending:
            write("".join(pending))
            pending.clear()
            size = 0

    _emit(value, put, indent)
    flush()


def js_dumps(value: Any, indent: int | None = None) -> str:
    """`JSON.stringify(value, null, indent)` for JSON-shaped Python values, byte for byte."""
    parts: list[str] = []
    _emit(value, parts.append, indent)
    return "".join(parts)


def _emit(value: Any, put: Callable[[str], object], indent: int | None) -> None:
    sep_item, sep_key = (",", ":") if indent is None else (",", ": ")
    # A long string escaped once per dump however often it is named. The entry keeps the string
    # alive, so its id cannot be reused by another string meanwhile.
    shared: dict[int, tuple[str, str]] = {}

    def escaped(v: str, quoted: bool = True) -> str:
        if len(v) < _SHARED_MIN:
            return _js_string(v) if quoted else _js_string(v)[1:-1]
        key = id(v) if quoted else ~id(v)
        hit = shared.get(key)
        if hit is None:
            out = _js_string(v)
            hit = shared[key] = (v, out if quoted else out[1:-1])
        return hit[1]

    def emit(v: Any, level: int) -> None:
        if v is None:
            put("null")
        elif v is True:
            put("true")
        elif v is False:
            put("false")
        elif isinstance(v, (int, float)):
            put(js_number(v))
        elif isinstance(v, str):
            put(escaped(v))
        elif isinstance(v, JSText):
            put('"')
            for piece in v.pieces():
                put(escaped(piece, quoted=False))
            put('"')
        elif isinstance(v, (list, tuple, dict)):
            items = list(v.items()) if isinstance(v, dict) else list(v)
            open_, close = ("{", "}") if isinstance(v, dict) else ("[", "]")
            if not items:
                put(open_ + close)
                return
            inner = "" if indent is None else "\n" + " " * (indent * (level + 1))
            outer = "" if indent is None else "\n" + " " * (indent * level)
            put(open_)
            for i, item in enumerate(items):
                if i:
                    put(sep_item)
                put(inner)
                if isinstance(v, dict):
                    put(_js_string(str(item[0])) + sep_key)
                    emit(item[1], level + 1)
                else:
                    emit(item, level + 1)
            put(outer + close)
        else:
            raise TypeError(f"not JSON: {type(v).__name__}")

    emit(value, 0)


# --------------------------------------------------------------------------- loading


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
        return path, parse_json_js(decode_utf8(raw))
    except json.JSONDecodeError as exc:
        doc, pos, msg = exc.doc, exc.pos, exc.msg
        before = doc[:pos].rstrip(" \t\n\r")
        if doc[pos : pos + 1] in ("}", "]") and before.endswith(","):
            pos, msg = len(before) - 1, f"trailing comma before {doc[exc.pos]!r}"
        line = doc.count("\n", 0, pos) + 1
        col = pos - doc.rfind("\n", 0, pos)
        raise ConfigError(path, f"not valid JSON ({msg})", line, col) from None


def load_project_config(project: str | Path) -> tuple[dict[str, Any] | None, list[str]]:
    """Read `.planning/config.json` fail-open, as the reference's `render-hooks` does.

    Returns `(config or None, warnings)`: absent → `(None, [])`; unreadable, not JSON or not an
    object → `(None, [one warning])`, and every key takes its default."""
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
    """Read `.planning/config.json` for `run`, `lint` and `check`: absent → None; a file that
    exists but cannot be used raises `ConfigError` (file, line and column where known), because
    running a whole phase on defaults the user did not choose is worse than stopping."""
    path, value = _read_config(project)
    if value is MISSING:
        return None
    if isinstance(value, dict):
        return value
    raise ConfigError(path, f"top level must be a JSON object, got {_json_type(value)}", 1, 1)


def _json_type(value: Any) -> str:
    # not at the top: the render-hooks entry loads this module (its import budget)
    from looprail.jsonload import json_type_name

    return json_type_name(value)


# --------------------------------------------------------------------------- lookup and typing


def lookup(config: Any, dotted: str) -> Any:
    """The value at `dotted` in `config` (a path through nested objects), or `MISSING`.

    As the reference resolver: each segment must be an own key of an object on the way
    (`{"workflow.research": true}`, a literal dotted key, is not `workflow.research`), and
    `__proto__`/`constructor`/`prototype` segments never resolve. Arrays are objects in
    JavaScript: a segment `0`, `1`, … or `length` resolves in one. A key present with `null`
    is found (and is falsy)."""
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
    """The value the reference resolves for a dotted `key`, or `MISSING`.

    `schema` maps each declared key to `{"type", "default", "values"?}`. A declared key is the
    config's value when it fits the declared type, else the declared default (`null`, `0` for a
    boolean, `"HIGH"` outside an enum all give the default). An undeclared key is the raw value
    at its nested path, or `MISSING`."""
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
        return not (value == 0 or (isinstance(value, float) and math.isnan(value)))
    if isinstance(value, str):
        return value != ""
    return True  # dict, list: objects are truthy in JS


def is_active(key: str, config: Any, schema: Any) -> bool:
    """`when`/`activationKey`: `Boolean()` of the effective value (absent is false)."""
    return js_truthy(effective_value(key, config, schema))


# Settings the host loop itself reads (GSD core and looprail's own): the central schema. A
# capability may not declare one of these, or a key under one (manifest validation).
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

# More keys the reference host reads or writes that are not capability keys: its central config
# schema (valid keys, dynamic-key families, runtime state) and the keys of its config template
# (the reference's `templates/config.json`, whose workflow.* feature keys capabilities
# declare). They are not typos, so `render-hooks` does not warn about them; they do not
# restrict manifests.
REFERENCE_SETTINGS = frozenset(
    {
        "agent_skills_security.trusted_global_roots",
        "branching_strategy",
        "capabilities.auto_update",
        "capabilities.strict_known_registries",
        "claude_md_assembly",
        "claude_md_assembly.mode",
        "claude_md_path",
        "code_quality.fallow.enabled",
        "code_quality.fallow.mcp",
        "code_quality.fallow.profile",
        "code_quality.fallow.scope",
        "context",
        "dynamic_routing",
        "effort",
        "effort.default",
        "executor.stall_detect_interval_minutes",
        "executor.stall_threshold_minutes",
        "fast_mode",
        "fast_mode.enabled",
        "features.global_learnings",
        "features.thinking_partner",
        "gates.confirm_breakdown",
        "gates.confirm_phases",
        "gates.confirm_plan",
        "gates.confirm_project",
        "gates.confirm_roadmap",
        "gates.confirm_transition",
        "gates.execute_next_plan",
        "gates.issues_review",
        "git.base_branch",
        "git.branching_strategy",
        "git.create_tag",
        "git.milestone_branch_template",
        "git.phase_branch_template",
        "git.quick_branch_template",
        "granularities",
        "graphify.auto_update",
        "graphify.build_timeout",
        "graphify.graph_path",
        "hooks.context_warnings",
        "hooks.workflow_guard",
        "jina",
        "learnings.max_inject",
        "manager.flags.discuss",
        "manager.flags.execute",
        "manager.flags.plan",
        "model_policy",
        "model_policy.budget",
        "model_policy.high",
        "model_policy.low",
        "model_policy.medium",
        "model_policy.provider",
        "model_profile_overrides",
        "models",
        "multiRepo",
        "parallelization.enabled",
        "parallelization.max_concurrent_agents",
        "parallelization.min_plans_for_parallel",
        "parallelization.plan_level",
        "parallelization.skip_checkpoints",
        "parallelization.task_level",
        "perplexity",
        "phase_id_convention",
        "plan_review.source_grounding",
        "plan_review.source_grounding_authority",
        "planner.stall_detect_interval_minutes",
        "planner.stall_threshold_minutes",
        "planning.commit_docs",
        "planning.search_gitignored",
        "planning.sub_repos",
        "ref_search",
        "research",
        "review",
        "review.default_reviewers",
        "review.max_prompt_tokens",
        "review.max_prompt_tokens_per_reviewer",
        "runtime",
        "safety.always_confirm_destructive",
        "safety.always_confirm_external_services",
        "security.injection_blocking",
        "ship.pr_body_sections",
        "statusline.context_position",
        "statusline.show_context_tokens",
        "statusline.show_git",
        "statusline.show_last_command",
        "statusline.state_format",
        "tavily_search",
        "workflow.auto_prune_state",
        "workflow.build_command",
        "workflow.code_review_command",
        "workflow.context_coverage_gate",
        "workflow.context_guard_mode",
        "workflow.cross_ai_command",
        "workflow.cross_ai_execution",
        "workflow.cross_ai_timeout",
        "workflow.human_verify_mode",
        "workflow.mvp_mode",
        "workflow.nyquist_validation",
        "workflow.plan_bounce",
        "workflow.plan_bounce_passes",
        "workflow.plan_bounce_script",
        "workflow.plan_chunked",
        "workflow.plan_review_convergence",
        "workflow.research",
        "workflow.security_asvs_level",
        "workflow.security_block_on",
        "workflow.security_enforcement",
        "workflow.smart_zone_tokens",
        "workflow.specless_probe_fallback",
        "workflow.test_command",
        "workflow.test_gate_timeout",
        "workflow.worktree_skip_hooks",
    }
)


def unknown_keys(config: dict[str, Any], declared: Any) -> list[str]:
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

    def walk(node: dict[str, Any], prefix: str, depth: int) -> None:
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
