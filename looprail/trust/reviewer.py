"""Reviewer lanes (`review-lane dispatch-step`; docs/contract.md): external CLIs declared in a
capability's `reviewer` body, run for a step that carries `supportsReviewerLanes: true`, one
bounded subprocess per lane (one lane's failure never cancels its siblings). Effects go through
the seams `spawn` and `which` (fakes in tests).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from looprail.errors import UsageError
from looprail.fsutil import atomic_write
from looprail.hooks.resolve import InvalidPointError, resolve
from looprail.runtime.process import escape_untrusted, find_program, run_bounded, tail
from looprail.trust.lanes import (
    _CONTROL,
    Lane,
    Spawn,
    Which,
    lane_argv,
    lane_budget,
    lane_timeout_s,
    probe_lane,
)
from looprail.trust.store import is_inside

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
MAX_PATHS_BYTES = 4 << 20
STDERR_TAIL = 2000
_SLUG = re.compile(r"^[a-z][a-z0-9_-]*\Z")


@dataclass(frozen=True)
class LaneResult:
    """What one lane did: `reason` None when it wrote a review."""

    slug: str
    ok: bool
    reason: str | None
    detail: str
    review_path: str | None = None
    err_path: str | None = None

    def to_json(self) -> dict[str, object]:
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

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"dispatched": self.dispatched, "ok": self.ok}
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
    """What `review-lane dispatch-step` asks for."""

    cap_id: str | None
    point: str | None
    explicit: tuple[str, ...]
    paths: tuple[str, ...]
    repo_root: str | None
    depth: str | None
    base_sha: str | None
    run_dir: str | None = None  # None: a fresh temporary folder
    cwd: str | None = None  # None: the repo root


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
    slugs = (s for item in items for s in re.split(r"[\s,]+", item.strip().lower()) if s)
    return tuple(dict.fromkeys(slugs))


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
        if not is_inside(lexical, root) or not is_inside(os.path.realpath(lexical), real_root):
            return PATH_ESCAPES_REPO_ROOT
    return None


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
    """The prompt's size in tokens, as the budgets count them."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


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


@dataclass(frozen=True)
class _Run:
    """What every lane of one dispatch shares."""

    prompt: str
    prompt_path: str
    run_dir: str
    cwd: str
    tokens: int
    spawn: Spawn
    which: Which


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
    if not request.cap_id or not request.point:
        said = "review-lane dispatch-step: --cap-id without --point; nothing runs"
        warnings = (said,) if request.cap_id else ()
        return DispatchResult(False, True, TRAIT_NOT_ENABLED, warnings=warnings)
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
    provenance = _provenance(request)
    if isinstance(provenance, str):
        return DispatchResult(False, False, provenance, selection)
    prompt = build_prompt(*provenance, request.paths)
    try:
        run_dir = request.run_dir or tempfile.mkdtemp(prefix="looprail-review-")
        os.makedirs(run_dir, exist_ok=True)
        prompt_path = os.path.join(run_dir, PROMPT_FILE)
        atomic_write(prompt_path, prompt)
    except OSError:
        return DispatchResult(False, False, PROMPT_WRITE_FAILED, selection)
    cwd = request.cwd or provenance[0]
    run = _Run(prompt, prompt_path, run_dir, cwd, estimate_tokens(prompt), spawn, which)
    results, planned = _run_lanes(chosen, config, run)
    ok = not selection["errors"] and all(r.ok for r in results)
    return DispatchResult(planned, ok, None, selection, results)


def _run_lanes(
    chosen: Sequence[Lane], config: Mapping[str, Any] | None, run: _Run
) -> tuple[tuple[LaneResult, ...], bool]:
    """Every chosen lane's result, and whether any got to run."""
    results: list[LaneResult] = []
    planned = False
    for lane in chosen:
        try:
            result, ran = _run_lane(lane, config, run)
        except Exception as exc:  # one lane must never take its siblings down
            detail = escape_untrusted(str(exc) or type(exc).__name__)
            result, ran = LaneResult(lane.slug, False, "invoke_failed", detail), True
        planned = planned or ran
        results.append(result)
    return tuple(results), planned


def _provenance(request: DispatchRequest) -> tuple[str, str, str] | str:
    """(repo root, depth, base SHA) of a request that may run, else the reason it may not."""
    if not request.repo_root:
        return MISSING_PROVENANCE
    path_problem = check_paths(request.repo_root, request.paths)
    if path_problem:
        return path_problem
    if not request.depth or not request.base_sha:
        return MISSING_PROVENANCE
    given = (request.depth, request.base_sha, request.repo_root, request.run_dir or "")
    if any(_CONTROL.search(v) for v in given):
        return INVALID_PROVENANCE
    return request.repo_root, request.depth, request.base_sha


def _run_lane(lane: Lane, config: Mapping[str, Any] | None, run: _Run) -> tuple[LaneResult, bool]:
    """One lane: plan → budget → invoke. Returns the result and whether it got to run."""
    slug = lane.slug
    review_path = os.path.join(run.run_dir, f"{slug}-REVIEW.md")
    argv = _lane_plan(lane, config, run, review_path)
    if isinstance(argv, LaneResult):
        return argv, False
    to_file = lane.invoke.get("outputChannel", "stdout") == "file-arg"
    if to_file and os.path.lexists(review_path):
        os.unlink(review_path)  # a stale review must not pass for this run's
    timeout_s = lane_timeout_s(lane, config)
    stdin = run.prompt if lane.invoke.get("promptChannel", "stdin") == "stdin" else None
    proc = run.spawn(argv, timeout_s=timeout_s, stdin=stdin, cwd=run.cwd)
    err_path = os.path.join(run.run_dir, f"{slug}.err")
    atomic_write(err_path, proc.stderr)

    def failed(reason: str, detail: str) -> tuple[LaneResult, bool]:
        return LaneResult(slug, False, reason, detail, review_path, err_path), True

    if proc.spawn_error:
        return failed("spawn_failed", f"could not start: {escape_untrusted(proc.spawn_error)}")
    if proc.timed_out:
        return failed("timeout", f"timed out after {timeout_s:g}s and was killed")
    if proc.exit_code != 0:
        last = escape_untrusted(tail(proc.stderr.strip(), 300))
        return failed("exit_nonzero", f"exited {proc.exit_code}" + (f": {last}" if last else ""))
    review = _read_review(review_path) if to_file else proc.stdout
    if not review.strip():
        if lane.body.get("emptyOutput") == "stub-with-stderr":
            said = tail(proc.stderr.strip(), STDERR_TAIL) or "(no stderr)"
            atomic_write(review_path, f"_{slug} produced no review._\n\nstderr:\n\n{said}\n")
        return failed("empty_output", "the lane produced no review")
    if not to_file:
        atomic_write(review_path, review)
    detail = "review written" + (" (output truncated at the cap)" if proc.truncated else "")
    return LaneResult(slug, True, None, detail, review_path, err_path), True


def _lane_plan(
    lane: Lane, config: Mapping[str, Any] | None, run: _Run, review_path: str
) -> list[str] | LaneResult:
    """The argv of a lane that may run, else why it may not (a result: it never ran)."""
    slug, invoke = lane.slug, lane.invoke
    channel = invoke.get("promptChannel", "stdin")
    output_channel = invoke.get("outputChannel", "stdout")
    if lane.body.get("transport") != "spawn":
        transport = escape_untrusted(str(lane.body.get("transport")))
        detail = f"transport {transport!r} is not supported (looprail makes no HTTP requests)"
        return LaneResult(slug, False, "unsupported_transport", detail)
    if channel == "none":
        detail = f"lane {slug!r} declares promptChannel 'none' and cannot take the scoped prompt"
        return LaneResult(slug, False, "prompt_channel_unsupported", detail)
    for name, value, known in (
        ("promptChannel", channel, ("stdin", "argv-file-ref")),
        ("outputChannel", output_channel, ("stdout", "file-arg")),
    ):
        if value not in known:
            detail = f"unknown {name} {escape_untrusted(str(value))}"
            return LaneResult(slug, False, "malformed_lane", detail)
    budget = lane_budget(lane, config)
    if budget and run.tokens > budget:
        detail = f"estimated {run.tokens} tokens exceeds the budget {budget} of lane {slug!r}"
        return LaneResult(slug, False, "budget_exceeded", detail)
    binary = invoke.get("binary")
    found = run.which(binary) if isinstance(binary, str) and binary else None
    if found is None:
        detail = f"{escape_untrusted(str(binary))} not found on PATH"
        return LaneResult(slug, False, "unavailable", detail)
    argv = lane_argv(lane, found, config, review_path=review_path, prompt_path=run.prompt_path)
    return LaneResult(slug, False, "malformed_lane", argv) if isinstance(argv, str) else argv


def _read_review(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(8 << 20).decode("utf-8", errors="replace")
    except OSError:
        return ""
