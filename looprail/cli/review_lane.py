"""`looprail review-lane dispatch-step|explicit-from-argv`: external reviewer lanes for a step
that opts in with `supportsReviewerLanes: true` (see `looprail.trust.reviewer`)."""

from __future__ import annotations

import sys

from looprail.cli._common import command, group, print_json, warn
from looprail.config import load_project_config
from looprail.trust import load_compiled
from looprail.trust.reviewer import (
    INVALID_PATHS,
    MAX_PATHS_BYTES,
    DispatchRequest,
    lanes_of,
    parse_slugs,
)
from looprail.trust.reviewer import dispatch_step as dispatch
from looprail.trust.reviewer import explicit_from_argv as from_argv


def register(sub) -> None:
    _, cmds = group(sub, "review-lane", "external reviewer lanes for opted-in steps")
    p = command(
        cmds,
        "dispatch-step",
        dispatch_step,
        "run the named reviewer lanes for one step, if that step opts in",
        "Resolve the active hooks at --point with the same resolver as "
        "`loop render-hooks`; only when --cap-id's step there carries supportsReviewerLanes: "
        "true, run each lane named by --explicit (that is available) on the files listed on "
        "stdin (one path per line, inside --repo-root), each as a bounded subprocess given a "
        "metadata-only prompt. Prints {dispatched, ok, reason?, selection, results}. Exit 0 for "
        "a dispatch and for the no-op reasons (trait_not_enabled, no_lanes_selected, "
        "selection_failed); 1 when the request is refused (invalid_paths, "
        "path_escapes_repo_root, missing_provenance, invalid_provenance, prompt_write_failed).",
    )
    p.add_argument("--cap-id", metavar="ID", help="the capability whose step this is")
    p.add_argument("--point", metavar="POINT", help="the loop point of that step")
    p.add_argument("--explicit", metavar="SLUGS", default="", help="lane slugs, comma-separated")
    p.add_argument("--repo-root", metavar="DIR", help="the repository under review")
    p.add_argument("--depth", metavar="D", help="review depth (quick, standard, deep)")
    p.add_argument("--base-sha", metavar="SHA", help="the diff base")
    p.add_argument(
        "--run-dir", metavar="DIR", help="where prompt, reviews and .err files go (default: new)"
    )
    p.add_argument("--cwd", metavar="DIR", help="working folder of the lanes (default: repo root)")
    p.add_argument("--raw", action="store_true", help="print the JSON result (for hosts)")
    p = command(
        cmds,
        "explicit-from-argv",
        explicit_from_argv,
        "map a workflow's CLI flags to lane slugs (comma-separated)",
        "Print the slugs of the lanes whose `flags` appear among ARGS, sorted and "
        "comma-separated (empty when none), e.g. `--codex --agy` → `antigravity,codex`.",
    )
    p.add_argument("argv", nargs="*", metavar="ARGS", help="the workflow's own arguments")


def _lanes(args):
    config, warnings = load_project_config(args.project)
    caps = load_compiled(args.project, args.capabilities)
    return lanes_of(caps, config), config, warnings, caps


def _read_paths() -> tuple[str, ...] | None:
    """One path per line from stdin (blank lines skipped, CRLF accepted); None when unreadable."""
    if sys.stdin is None or sys.stdin.isatty():
        return ()
    raw = sys.stdin.buffer.read(MAX_PATHS_BYTES + 1)
    if len(raw) > MAX_PATHS_BYTES:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = (line.removesuffix("\r") for line in text.split("\n"))
    return tuple(line for line in lines if line != "")


def dispatch_step(args) -> int:
    if args.cap_id and not args.point:
        warn("review-lane dispatch-step: --cap-id without --point; nothing runs")
    paths = _read_paths()
    lanes, config, config_warnings, compiled = _lanes(args)
    warn(*config_warnings)
    request = DispatchRequest(
        cap_id=args.cap_id,
        point=args.point,
        explicit=parse_slugs(args.explicit),
        paths=paths if paths is not None else ("\x00",),  # unreadable input: invalid_paths
        repo_root=args.repo_root,
        depth=args.depth,
        base_sha=args.base_sha,
        run_dir=args.run_dir,
        cwd=args.cwd,
    )
    result = dispatch(request, compiled=compiled, config=config, lanes=lanes)
    if paths is None and result.reason == INVALID_PATHS:
        warn("review-lane dispatch-step: the file list on stdin is not UTF-8 or too large")
    if args.raw:
        print_json(result.to_json())
    else:
        _print_summary(result)
    return result.exit_code


def _print_summary(result) -> None:
    if not result.dispatched:
        print(f"no lanes ran: {result.reason or 'nothing dispatched'}")
    for r in result.results:
        state = "ok" if r.ok else f"FAILED ({r.reason})"
        where = f" → {r.review_path}" if r.ok and r.review_path else ""
        print(f"{r.slug}: {state}: {r.detail}{where}")
    for u in (result.selection or {}).get("unavailable", ()):
        print(f"{u['slug']}: unavailable: {u['reason']}")


def explicit_from_argv(args) -> int:
    lanes, _, _, _ = _lanes(args)
    print(",".join(from_argv(args.argv, lanes)))
    return 0
