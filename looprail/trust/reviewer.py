"""Reviewer lanes: `review-lane dispatch-step`, for a step that opts in with
`supportsReviewerLanes: true` (the reference's review lane; docs/contract.md).

A reviewer lane is an external CLI (or HTTP model) declared in a capability's `reviewer` body. A
workflow that wants external reviews of a step names the lanes (`--explicit`) and the step
(`--cap-id`, `--point`); this module decides whether anything runs, and runs it:

1. the trait: resolve the point with the one resolver (`hooks.resolve.resolve`, as
   `render-hooks` does) and find that capability's active step; only the literal `true` opts in,
   anything else is the no-op `trait_not_enabled`;
2. selection: each named slug must be a lane of an active (consented) capability whose probe
   says it is available; nothing named is `no_lanes_selected`, nothing available is
   `selection_failed`;
3. the request: a non-empty file list without control characters, every path inside the repo
   root (`invalid_paths`, `path_escapes_repo_root`), a depth and a base SHA
   (`missing_provenance`; control characters are `invalid_provenance`);
4. one metadata-only prompt (repo root, depth, base SHA, files, four fixed prohibitions) written
   once to the run folder; then per lane: budget check (`budget_exceeded`) and a bounded
   subprocess. One lane's failure never cancels its siblings.

The result is `{dispatched, ok, reason?, selection, results: [{slug, ok, reason, detail,
reviewPath, errPath}]}`. Effects go through two injectable seams, `spawn` (default
`run_bounded`) and `which` (default `find_program`: `shutil.which` over absolute PATH
entries only), so unit tests drive it with fakes.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from looprail.config import MISSING, lookup
from looprail.errors import UsageError
from looprail.fsutil import atomic_write
from looprail.hooks.resolve import InvalidPointError, resolve
from looprail.runtime.process import (
    ProcessResult,
    escape_untrusted,
    find_program,
    run_bounded,
    tail,
)

if TYPE_CHECKING:
    from typing import TypedDict

    from looprail.hooks.capset import CapabilitySet

    class Unavailable(TypedDict):
        slug: str
        reason: str

    class Selection(TypedDict):
        """The selection record of a dispatch (`select_lanes`)."""

        source: str
        requested: list[str]
        selected: list[str]
        unavailable: list[Unavailable]
        errors: list[str]


TRAIT_NOT_ENABLED = "trait_not_enabled"
NO_LANES_SELECTED = "no_lanes_selected"
SELECTION_FAILED = "selection_failed"
INVALID_PATHS = "invalid_paths"
PATH_ESCAPES_REPO_ROOT = "path_escapes_repo_root"
MISSING_PROVENANCE = "missing_provenance"
INVALID_PROVENANCE = "invalid_provenance"
PROMPT_WRITE_FAILED = "prompt_write_failed"
# Reasons that mean "nothing to do": the command exits 0 with them.
NO_OP_REASONS = frozenset({TRAIT_NOT_ENABLED, NO_LANES_SELECTED, SELECTION_FAILED})

PROHIBITIONS = (
    "Do not modify any file.",
    "Do not run tests.",
    "Do not start background processes.",
    "Make a single read-only pass: do not poll or wait, return your findings once.",
)
DEPTH_MEANING = {
    "quick": "scan for obvious problems (secrets, dangerous calls, debug leftovers) without "
    "reading whole files",
    "standard": "read each changed file in context for bugs, security and quality problems",
    "deep": "standard, plus cross-file analysis: call chains, types at boundaries, error "
    "propagation",
}
PROMPT_FILE = "review-prompt.md"
CHARS_PER_TOKEN = 4
DEFAULT_TIMEOUT_MS = 600_000
MAX_TIMEOUT_MS = 2 * 60 * 60 * 1000
MAX_PATHS_BYTES = 4 << 20
STDERR_TAIL = 2000
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_SLUG = re.compile(r"^[a-z][a-z0-9_-]*\Z")
_PLACEHOLDERS = ("{{model}}", "{{effort}}", "{{output}}", "{{prompt}}")

Spawn = Callable[..., ProcessResult]
Which = Callable[[str], "str | None"]


# ── data ─────────────────────────────────────────────────────────────────────────────────────


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


@dataclass(frozen=True)
class LaneResult:
    slug: str
    ok: bool
    reason: str | None
    detail: str
    review_path: str | None = None
    err_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "ok": self.ok,
            "reason": self.reason,
            "detail": self.detail,
            "reviewPath": self.review_path,
            "errPath": self.err_path,
        }


@dataclass(frozen=True)
class DispatchResult:
    dispatched: bool
    ok: bool
    reason: str | None = None
    selection: Selection | None = None
    results: tuple[LaneResult, ...] = ()
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dispatched": self.dispatched, "ok": self.ok}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.selection is not None:
            out["selection"] = self.selection
        out["results"] = [r.to_json() for r in self.results]
        return out

    @property
    def exit_code(self) -> int:
        """0 for a dispatch (lane failures are in `results`) and for the no-op reasons; 1 when
        the request itself was refused (paths, provenance, the prompt file)."""
        return 1 if self.reason is not None and self.reason not in NO_OP_REASONS else 0


@dataclass(frozen=True)
class DispatchRequest:
    cap_id: str | None
    point: str | None
    explicit: tuple[str, ...]
    paths: tuple[str, ...]
    repo_root: str | None
    depth: str | None
    base_sha: str | None
    run_dir: str | None = None  # None: a fresh temporary folder
    cwd: str | None = None  # None: the repo root


# ── pure pieces ──────────────────────────────────────────────────────────────────────────────


def lanes_of(caps: CapabilitySet, config: Mapping[str, Any] | None) -> dict[str, Lane]:
    """The roster: slug → lane, from every capability with a reviewer body that is active
    under `config` (consent applied first, so an unconsented project lane is not on it)."""
    out: dict[str, Lane] = {}
    for cid in sorted(caps.capabilities):
        body = caps.capabilities[cid].reviewer
        active = caps.why_inactive(cid, config) is None
        if active and isinstance(body, Mapping) and isinstance(body.get("slug"), str):
            out.setdefault(body["slug"], Lane(cid, body))
    return out


def parse_slugs(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """`--explicit`: slugs separated by commas or whitespace, lower-cased, first one wins."""
    if text is None:
        return ()
    items = [text] if isinstance(text, str) else list(text)
    out: list[str] = []
    for item in items:
        for slug in re.split(r"[\s,]+", item.strip().lower()):
            if slug and slug not in out:
                out.append(slug)
    return tuple(out)


def explicit_from_argv(argv: Sequence[str], lanes: Mapping[str, Lane]) -> tuple[str, ...]:
    """The slugs a workflow's own CLI flags name (`--codex --agy` → `antigravity, codex`),
    sorted; flags that name no lane are ignored."""
    by_flag = {
        str(flag).lower(): lane.slug
        for lane in lanes.values()
        for flag in lane.body.get("flags") or ()
    }
    return tuple(sorted({by_flag[a.lower()] for a in argv if a.lower() in by_flag}))


def trait_enabled(
    compiled: CapabilitySet, config: Mapping[str, Any] | None, cap_id: str, point: str
) -> bool:
    """Does `cap_id` have an active step at `point` carrying exactly `supportsReviewerLanes:
    true`? Resolved by the one resolver, as `loop render-hooks` resolves it."""
    return any(
        hook.get("capId") == cap_id
        and hook.get("kind") == "step"
        and hook.get("supportsReviewerLanes") is True
        for hook in resolve(compiled, config, point)["activeHooks"]
    )


def check_paths(repo_root: str, paths: Sequence[str]) -> str | None:
    """None when every path is a non-empty string without control characters and stays inside
    `repo_root`, both lexically and after following symlinks (also for a path that does not
    exist: a deleted file under a symlinked folder must not lead out); else the reason."""
    if not paths:
        return INVALID_PATHS
    root = os.path.abspath(repo_root)
    real_root = os.path.realpath(root)
    for p in paths:
        if not isinstance(p, str) or not p or _CONTROL.search(p):
            return INVALID_PATHS
        lexical = os.path.normpath(os.path.join(root, p))
        if not _within(lexical, root):
            return PATH_ESCAPES_REPO_ROOT
        if not _within(os.path.realpath(lexical), real_root):
            return PATH_ESCAPES_REPO_ROOT
    return None


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def build_prompt(repo_root: str, depth: str, base_sha: str, paths: Sequence[str]) -> str:
    """The review request: metadata only (never file contents) and the four prohibitions."""
    meaning = DEPTH_MEANING.get(depth, DEPTH_MEANING["standard"])
    return "\n".join(
        [
            "## Source review request",
            "",
            f"Repository root: {repo_root}",
            f"Review depth: {depth}",
            f"Base SHA: {base_sha}",
            "",
            "Review the changes each file below has relative to the base SHA, at the requested",
            f"depth ({meaning}). Report every bug, security issue and code-quality problem,",
            "each with the file path and line number(s) it concerns; a finding without a",
            "file:line citation cannot be checked and will be discarded.",
            "",
            "### Files in scope",
            *(f"- {p}" for p in paths),
            "",
            "### Rules",
            *(f"{i}. {rule}" for i, rule in enumerate(PROHIBITIONS, 1)),
            "",
        ]
    )


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


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
    lane: Lane,
    binary: str,
    config: Mapping[str, Any] | None,
    *,
    review_path: str,
    prompt_path: str,
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
    expansions: dict[str, list[str]] = {}
    model = _string(config, lane.body.get("modelConfigKey"))
    expansions["{{model}}"] = _flagged(invoke.get("modelArg"), model)
    effort = None
    if invoke.get("effortChannel") == "argv":
        key = invoke.get("effortConfigKey") or lane.body.get("effortConfigKey")
        effort = _string(config, key or f"review.efforts.{lane.slug}")
    expansions["{{effort}}"] = _flagged(invoke.get("effortArg"), effort)
    # A project's config is not the user's: a value starting with '-' would be read by the CLI
    # as an option of its own (`--dangerously-skip-permissions`), not as a model or an effort.
    for name, key, value in (
        ("model", lane.body.get("modelConfigKey"), model),
        ("effort", invoke.get("effortConfigKey") or lane.body.get("effortConfigKey"), effort),
    ):
        if value is not None and value.startswith("-"):
            return (
                f"config value {escape_untrusted(value)!r} for the {name} "
                f"({escape_untrusted(str(key or name))}) starts with '-' and would be read as an "
                "option; refused"
            )
    output_channel = invoke.get("outputChannel", "stdout")
    expansions["{{output}}"] = (
        _flagged(invoke.get("outputArg"), review_path) if output_channel == "file-arg" else []
    )
    expansions["{{prompt}}"] = (
        [f"Read the review request in {prompt_path} and follow it."]
        if invoke.get("promptChannel") == "argv-file-ref"
        else []
    )
    argv = [binary]
    for arg in args:
        argv += expansions[arg] if arg in _PLACEHOLDERS else [arg]
    return argv


def _flagged(flag: Any, value: str | None) -> list[str]:
    if value is None:
        return []
    return [flag, value] if isinstance(flag, str) and flag else [value]


# ── selection ────────────────────────────────────────────────────────────────────────────────


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


def select_lanes(
    explicit: Sequence[str],
    lanes: Mapping[str, Lane],
    *,
    spawn: Spawn = run_bounded,
    which: Which = find_program,
) -> tuple[list[Lane], Selection]:
    """The lanes to run among the explicitly requested slugs, and the selection record
    `{source, requested, selected, unavailable: [{slug, reason}], errors}`."""
    selected: list[Lane] = []
    unavailable: list[Unavailable] = []
    for slug in explicit:
        lane = lanes.get(slug) if _SLUG.match(slug) else None
        why = "no active capability declares this lane" if lane is None else None
        if lane is not None:
            why = probe_lane(lane, spawn=spawn, which=which)
        if why is None and lane is not None:
            selected.append(lane)
        else:
            unavailable.append({"slug": escape_untrusted(slug), "reason": why or "unavailable"})
    selection: Selection = {
        "source": "explicit",
        "requested": [escape_untrusted(s) for s in explicit],
        "selected": [lane.slug for lane in selected],
        "unavailable": unavailable,
        "errors": [f"{u['slug']}: {u['reason']}" for u in unavailable],
    }
    return selected, selection


# ── the dispatch ─────────────────────────────────────────────────────────────────────────────


def dispatch_step(
    request: DispatchRequest,
    *,
    compiled: CapabilitySet,
    config: Mapping[str, Any] | None,
    lanes: Mapping[str, Lane],
    spawn: Spawn = run_bounded,
    which: Which = find_program,
) -> DispatchResult:
    """Decide and run (see the module docstring). Raises `UsageError` only for a point that is
    not one of the points (`points.POINTS`); everything else is a result."""
    warnings: list[str] = []
    if not request.cap_id or not request.point:
        if request.cap_id and not request.point:
            warnings.append("review-lane dispatch-step: --cap-id without --point; nothing runs")
        return DispatchResult(False, True, TRAIT_NOT_ENABLED, warnings=tuple(warnings))

    try:
        enabled = trait_enabled(compiled, config, request.cap_id, request.point)
    except InvalidPointError as exc:
        raise UsageError(f"--point: {exc}") from None
    if not enabled:
        return DispatchResult(False, True, TRAIT_NOT_ENABLED)

    chosen, selection = select_lanes(request.explicit, lanes, spawn=spawn, which=which)
    if not chosen:
        failed = bool(selection["errors"])
        reason = SELECTION_FAILED if failed else NO_LANES_SELECTED
        return DispatchResult(False, not failed, reason, selection)

    def refuse(reason: str) -> DispatchResult:
        return DispatchResult(False, False, reason, selection)

    if not request.repo_root:
        return refuse(MISSING_PROVENANCE)
    path_problem = check_paths(request.repo_root, request.paths)
    if path_problem:
        return refuse(path_problem)
    if not request.depth or not request.base_sha:
        return refuse(MISSING_PROVENANCE)
    provenance = (request.depth, request.base_sha, request.repo_root, request.run_dir or "")
    if any(_CONTROL.search(v) for v in provenance):
        return refuse(INVALID_PROVENANCE)

    prompt = build_prompt(request.repo_root, request.depth, request.base_sha, request.paths)
    try:
        run_dir = _run_dir(request.run_dir)
        prompt_path = os.path.join(run_dir, PROMPT_FILE)
        _write_text(prompt_path, prompt)
    except OSError:
        return refuse(PROMPT_WRITE_FAILED)

    tokens = estimate_tokens(prompt)
    results: list[LaneResult] = []
    any_failed = bool(selection["errors"])
    planned = False
    for lane in chosen:
        try:
            result, ran = _run_lane(
                lane,
                config,
                prompt=prompt,
                prompt_path=prompt_path,
                tokens=tokens,
                run_dir=run_dir,
                cwd=request.cwd or request.repo_root,
                spawn=spawn,
                which=which,
            )
        except Exception as exc:  # one lane must never take its siblings down
            result, ran = LaneResult(lane.slug, False, "invoke_failed", _one_line(exc)), True
        planned = planned or ran
        any_failed = any_failed or not result.ok
        results.append(result)
    return DispatchResult(planned, not any_failed, None, selection, tuple(results))


def _run_dir(given: str | None) -> str:
    if given:
        os.makedirs(given, exist_ok=True)
        return given

    return tempfile.mkdtemp(prefix="looprail-review-")


def _write_text(path: str, text: str) -> None:
    atomic_write(path, text)


def _one_line(exc: BaseException) -> str:
    return escape_untrusted(str(exc) or type(exc).__name__)


def _run_lane(
    lane: Lane,
    config: Mapping[str, Any] | None,
    *,
    prompt: str,
    prompt_path: str,
    tokens: int,
    run_dir: str,
    cwd: str,
    spawn: Spawn,
    which: Which,
) -> tuple[LaneResult, bool]:
    """One lane: plan → budget → invoke. Returns the result and whether it got to run."""
    slug = lane.slug
    review_path = os.path.join(run_dir, f"{slug}-REVIEW.md")
    err_path = os.path.join(run_dir, f"{slug}.err")
    if lane.body.get("transport") != "spawn":
        transport = escape_untrusted(str(lane.body.get("transport")))
        return LaneResult(
            slug,
            False,
            "unsupported_transport",
            f"transport {transport!r} is not supported (looprail makes no HTTP requests)",
        ), False
    invoke = lane.invoke
    channel = invoke.get("promptChannel", "stdin")
    if channel == "none":
        return LaneResult(
            slug,
            False,
            "prompt_channel_unsupported",
            f"lane {slug!r} declares promptChannel 'none' and cannot take the scoped prompt",
        ), False
    if channel not in ("stdin", "argv-file-ref"):
        detail = f"unknown promptChannel {escape_untrusted(str(channel))}"
        return LaneResult(slug, False, "malformed_lane", detail), False
    output_channel = invoke.get("outputChannel", "stdout")
    if output_channel not in ("stdout", "file-arg"):
        detail = f"unknown outputChannel {escape_untrusted(str(output_channel))}"
        return LaneResult(slug, False, "malformed_lane", detail), False
    budget = lane_budget(lane, config)
    if budget and tokens > budget:
        return LaneResult(
            slug,
            False,
            "budget_exceeded",
            f"estimated {tokens} tokens exceeds the budget {budget} of lane {slug!r}",
        ), False
    binary = invoke.get("binary")
    found = which(binary) if isinstance(binary, str) and binary else None
    if found is None:
        shown = escape_untrusted(str(binary))
        return LaneResult(slug, False, "unavailable", f"{shown} not found on PATH"), False
    argv = lane_argv(lane, found, config, review_path=review_path, prompt_path=prompt_path)
    if isinstance(argv, str):
        return LaneResult(slug, False, "malformed_lane", argv), False
    if output_channel == "file-arg" and os.path.lexists(review_path):
        os.unlink(review_path)  # a stale review must not pass for this run's
    timeout_s = lane_timeout_s(lane, config)
    run = spawn(
        argv,
        timeout_s=timeout_s,
        stdin=prompt if channel == "stdin" else None,
        cwd=cwd,
    )
    _write_text(err_path, run.stderr)
    paths = {"review_path": review_path, "err_path": err_path}
    if run.spawn_error:
        detail = f"could not start: {escape_untrusted(run.spawn_error)}"
        return LaneResult(slug, False, "spawn_failed", detail, **paths), True
    if run.timed_out:
        detail = f"timed out after {timeout_s:g}s and was killed"
        return LaneResult(slug, False, "timeout", detail, **paths), True
    if run.exit_code != 0:
        last = escape_untrusted(tail(run.stderr.strip(), 300))
        detail = f"exited {run.exit_code}" + (f": {last}" if last else "")
        return LaneResult(slug, False, "exit_nonzero", detail, **paths), True
    review = run.stdout if output_channel == "stdout" else _read_review(review_path)
    if not review.strip():
        if lane.body.get("emptyOutput") == "stub-with-stderr":
            said = tail(run.stderr.strip(), STDERR_TAIL) or "(no stderr)"
            _write_text(review_path, f"_{slug} produced no review._\n\nstderr:\n\n{said}\n")
        return LaneResult(slug, False, "empty_output", "the lane produced no review", **paths), True
    if output_channel == "stdout":
        _write_text(review_path, review)
    detail = "review written" + (" (output truncated at the cap)" if run.truncated else "")
    return LaneResult(slug, True, None, detail, **paths), True


def _read_review(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(8 << 20).decode("utf-8", errors="replace")
    except OSError:
        return ""


__all__ = [
    "NO_OP_REASONS",
    "PROHIBITIONS",
    "DispatchRequest",
    "DispatchResult",
    "Lane",
    "LaneResult",
    "build_prompt",
    "check_paths",
    "dispatch_step",
    "estimate_tokens",
    "explicit_from_argv",
    "lane_argv",
    "lane_budget",
    "lane_timeout_s",
    "lanes_of",
    "parse_slugs",
    "probe_lane",
    "select_lanes",
    "trait_enabled",
]
