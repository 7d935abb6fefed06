"""`looprail task resolve-content`: the `execute:task` content resolver, with a binding exit code.

Exit 0 and one JSON line for the four results (`{"resolved": false}`, `no-resolver`, `empty`,
`resolved` with content); 1 with a one-line reason for an ambiguous prefix or a resolver that
failed, timed out or printed something unusable (a hard halt for the caller, never a
fallback); 2 for usage errors (missing option, plan outside the project or missing, no task with
that tracker-id).
"""

from __future__ import annotations

from looprail.cli._common import command, group, print_json, project_folder, warn
from looprail.config import load_project_config
from looprail.errors import UsageError
from looprail.hooks.task_content import halting_resolvers, resolve_task_content, runnable_resolvers
from looprail.plans.planfile import read_plan
from looprail.runtime.process import escape_untrusted
from looprail.trust import load_compiled


def register(sub) -> None:
    _, cmds = group(sub, "task", "per-task operations of the execute step")
    p = command(
        cmds,
        "resolve-content",
        _resolve_content,
        "resolve a task's content from its tracker (taskContentResolver)",
        "Resolve the content of the task with --task-id (its tracker-id) in --plan "
        "through the one capability whose taskContentResolver.trackerPrefix matches.",
    )
    # Not `required=True`: argparse would print a two-line usage error; ours is one line.
    p.add_argument("--plan", metavar="PATH", help="the PLAN.md (relative to --project)")
    p.add_argument("--task-id", metavar="TRACKER_ID", help="the task's tracker-id attribute")
    p.add_argument("--raw", action="store_true", help="print JSON only (the default output)")


def _resolve_content(args) -> int:
    if not args.plan:
        raise UsageError("task resolve-content: --plan is required")
    if not args.task_id:
        raise UsageError("task resolve-content: --task-id is required")
    project = project_folder(args.project, resolve=True)
    plan = _plan_inside(project, args.plan)
    _require_task(plan, args.task_id, project)

    _, warnings = load_project_config(project)  # its warnings, as a run shows them
    caps = load_compiled(project, args.capabilities)
    warn(*warnings, *caps.warnings)
    # As in a run: a project capability's resolver runs only with the user's consent (`looprail
    # trust`); without it the task halts rather than silently falling back to the inline plan.
    result = resolve_task_content(
        args.task_id, runnable_resolvers(caps), cwd=project, unloadable=halting_resolvers(caps)
    )
    print_json(result.to_json())
    return 0


def _plan_inside(project, given: str):
    """The plan's real path, refusing anything (symlinks and `..` included) outside `project`."""
    real = (project / given).resolve()  # an absolute path stays itself
    if not real.is_relative_to(project):
        raise UsageError(f"--plan: {_shown(given)} is outside the project {project}")
    try:
        is_file = real.is_file()
    except OSError:  # a name the OS refuses (too long, say)
        is_file = False
    if not is_file:
        raise UsageError(f"--plan: {_shown(given)} does not exist")
    return real


def _shown(text: str) -> str:
    return escape_untrusted(text if len(text) <= 200 else text[:200] + "…")


def _require_task(plan, tracker_id: str, project) -> None:
    shown = str(plan.relative_to(project))
    parsed = read_plan(plan, display=shown)
    if not any(task.tracker_id == tracker_id for task in parsed.tasks):
        raise UsageError(
            f"{shown}: no task with tracker-id '{escape_untrusted(tracker_id)}' in the plan"
        )
