"""`looprail trust` and `looprail revoke`: consent to a project's third-party capabilities and
its `.looprail/hooks.json`, after seeing what they can run (see docs/security.md)."""

from __future__ import annotations

from looprail.cli._common import command, project_folder, warn
from looprail.cli.capability import check_lines, confirm
from looprail.layout import LOOPRAIL_DIR, PROJECT_CONFIG_FILE
from looprail.plans.taskchecks import project_checks
from looprail.trust import revoke as withdraw
from looprail.trust.audit import render_text
from looprail.trust.consent import agent_settings_text, commit_consent, plan_consent


def register(sub) -> None:
    p = command(
        sub,
        "trust",
        trust,
        "review and consent to the project's own capabilities, hooks.json and agent settings",
        f"Print the audit of every project capability (<project>/{LOOPRAIL_DIR}/"
        f"capabilities), of the project's {LOOPRAIL_DIR}/hooks.json and of the agent settings "
        f"in {PROJECT_CONFIG_FILE} that change what runs or widen permissions (binary, args, "
        "permissionMode, allowedTools, sandbox, approvalMode) that have no valid consent "
        "(never consented, or changed since), then ask for consent (--yes answers yes; without "
        "a terminal --yes is required). Consent is bound to the exact content: changing any "
        "file makes it inactive again until you trust it again.",
        positional=True,
    )
    p.add_argument("--yes", "-y", action="store_true", help="consent without asking")
    p = command(
        sub,
        "revoke",
        revoke,
        "withdraw consent (all of the project's, or the named capabilities)",
        "Withdraw consent for capabilities ID… of the project, with --hooks for "
        "its hooks.json, with --agent-settings for its agent settings; with none of them, "
        "everything consented to in the project.",
    )
    p.add_argument("ids", nargs="*", metavar="ID", help="capability ids (default: everything)")
    p.add_argument("--hooks", action="store_true", help="withdraw consent for hooks.json")
    p.add_argument(
        "--agent-settings",
        action="store_true",
        help="withdraw consent for the project's agent settings (looprail.agents.<cli>)",
    )


def trust(args) -> int:
    project = project_folder(args.project)
    # Not consented to (they are the project's own commands, like its test suite), but never
    # run unseen: a cloned project's PLAN.md is data (docs/security.md).
    for line in check_lines(project_checks(project)):
        print(line)
    plan = plan_consent(project, args.capabilities)
    warn(*plan.skipped, *plan.refused)
    if plan.empty:
        if plan.refused:
            print(f"nothing consented in {project.resolve()}")
            return 1
        print(f"nothing to review in {project.resolve()}: everything that can run is consented to")
        return 0

    if plan.capabilities or plan.hooks is not None:
        print(render_text(plan.audit()))
    for line in agent_settings_text(plan.agents):
        print(line)
    if plan.agents:  # said even with --yes, like a shell
        warn(
            "consenting to agent settings that change what runs or what the agent may do: "
            + "; ".join(f"{a.name} {', '.join(a.pending)}" for a in plan.agents)
        )
    shells = plan.shells
    if shells:  # printed even with --yes: consent is never given to a shell unawares
        warn(f"consenting to shell or interpreter code: {'; '.join(shells)}")
    if not confirm(args, plan.question()):
        print("nothing consented")
        return 1
    print(f"trusted: {', '.join(commit_consent(plan))}")
    return 0


def revoke(args) -> int:
    project = project_folder(args.project)
    removed = withdraw(
        project, args.ids or None, hooks=args.hooks, agent_settings=args.agent_settings
    )
    if not removed:
        print(f"nothing to revoke in {project.resolve()}")
        return 0
    for what in removed:
        print(f"revoked: {what}")
    return 0
