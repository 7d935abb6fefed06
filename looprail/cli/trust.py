"""`looprail trust` and `looprail revoke`: consent to a project's third-party capabilities and
its `.looprail/hooks.json`, after seeing what they can run (see docs/security.md)."""

from __future__ import annotations

from looprail.cli._common import add_project_options


def register(sub) -> None:
    p = sub.add_parser(
        "trust",
        help="review and consent to the project's own capabilities and hooks.json",
        description="Print the audit of every project capability (<project>/.looprail/"
        "capabilities) and of the project's .looprail/hooks.json that has no valid consent "
        "(never consented, or changed since), then ask for consent (--yes answers yes; without "
        "a terminal --yes is required). Consent is bound to the exact content: changing any "
        "file makes it inactive again until you trust it again.",
    )
    p.add_argument("--yes", "-y", action="store_true", help="consent without asking")
    add_project_options(p)
    p.set_defaults(handler=trust)

    p = sub.add_parser(
        "revoke",
        help="withdraw consent (all of the project's, or the named capabilities)",
        description="Withdraw consent for capabilities ID… of the project, or, with --hooks, for "
        "its hooks.json; with neither, everything consented to in the project.",
    )
    p.add_argument("ids", nargs="*", metavar="ID", help="capability ids (default: everything)")
    p.add_argument("--hooks", action="store_true", help="withdraw consent for hooks.json")
    add_project_options(p)
    p.set_defaults(handler=revoke)


def trust(args) -> int:
    from pathlib import Path

    from looprail.audit import (
        Audit,
        audit_capability,
        audit_hooks_file,
        render_text,
        suspect_surfaces,
    )
    from looprail.cli._common import warn
    from looprail.cli.capability import confirm
    from looprail.config import load_project_config
    from looprail.errors import LooprailError, UsageError
    from looprail.hooks.compiled import PROJECT
    from looprail.hooks.native.config import project_hooks_path, read_hooks_file
    from looprail.hooks.registry import load_registry
    from looprail.trust import (
        CHANGED,
        TrustError,
        apply_consent,
        consent_state,
        folder_hash,
        grant,
        hooks_hash,
        hooks_state,
    )

    project = Path(args.project)
    if not project.is_dir():
        raise UsageError(f"--project: {project} is not a directory")
    before = _project_folder_hashes(project)
    config, _ = load_project_config(project)
    registry = load_registry(project, args.capabilities, config=config)
    apply_consent(registry)  # so the audit says why each one is inactive

    pending, hashes, skipped, refused = [], {}, [], []
    for cid in sorted(registry.capabilities):
        lc = registry.capabilities[cid]
        if lc.origin != PROJECT:
            continue
        reason = consent_state(project, cid, lc.source)
        if reason is None:
            continue
        cap_audit = audit_capability(lc)
        try:
            digest = folder_hash(lc.source)
        except TrustError as exc:
            refused.append(f"capability {cid}: cannot be consented to: {exc}")
            continue
        if before.get(cid) != digest:
            raise LooprailError(f"{lc.source}: changed while it was being read; run trust again")
        suspects = suspect_surfaces(cap_audit.surfaces)
        if suspects:
            first = suspects[0]
            refused.append(
                f"capability {cid}: {lc.source / 'capability.json'}: {first.where}: "
                f"{first.runs}: {first.refused}; not consented (fix or remove it)"
            )
            continue
        pending.append(cap_audit)
        hashes[cid] = digest
    for failed in registry.failed:
        if failed.origin == PROJECT:
            skipped.append(f"capability {failed.id}: failed to load, nothing from it runs")
    for shadow in registry.shadowed:
        if shadow.origin == PROJECT:  # consenting would change nothing: say so, never "trusted"
            skipped.append(f"{shadow.reason}; not reviewed, consent would not make it run")

    hooks_pending = None
    hooks_digest = None
    state = hooks_state(project)
    if state is not None and state.startswith("cannot be consented to"):
        refused.append(f"hooks.json: {state}")
    elif state is not None and state != "no project hooks file":
        hooks_now = hooks_hash(project)  # before reading: consent covers what the audit shows
        hooks_file = read_hooks_file(project_hooks_path(project), scope="project")
        if hooks_file.status != "valid":
            issue = hooks_file.issues[0] if hooks_file.issues else "invalid"
            refused.append(f"hooks.json: invalid, none of its hooks run ({issue}); fix it first")
        else:
            hooks_pending = audit_hooks_file(hooks_file, trusted=False)
            hooks_digest = hooks_now

    for line in [*skipped, *refused]:
        warn(line)
    if not pending and hooks_pending is None:
        if refused:
            print(f"nothing consented in {project.resolve()}")
            return 1
        print(f"nothing to review in {project.resolve()}: everything that can run is consented to")
        return 0

    shown = Audit(tuple(pending), (hooks_pending,) if hooks_pending else ())
    print(render_text(shown))
    names = [f"capability {c.id}" for c in pending]
    if hooks_pending is not None:
        names.append(".looprail/hooks.json")
    changed = [c.id for c in pending if c.reason == CHANGED]
    reason_note = f" ({', '.join(changed)} changed since consent)" if changed else ""
    # Say it in the question too: an argv surface that starts `sh -c`, `python -c`… is a shell.
    shells = [f"{c.id} {s.where}" for c in pending for s in c.surfaces if s.shell and not s.refused]
    if hooks_pending is not None:
        shells += [f"hooks.json {s.where}" for s in hooks_pending.surfaces if s.shell]
    shell_note = f" They run SHELL or interpreter code ({'; '.join(shells)})." if shells else ""
    if shells:  # printed even with --yes: consent is never given to a shell unawares
        warn(f"consenting to shell or interpreter code: {'; '.join(shells)}")
    question = f"Allow {', '.join(names)}{reason_note} to run?{shell_note}"
    if not confirm(args, question):
        print("nothing consented")
        return 1
    for cap in pending:  # bind consent to what was shown, not to what is there now
        if folder_hash(cap.source) != hashes[cap.id]:
            raise LooprailError(f"{cap.source}: changed while it was being reviewed; not trusted")
    if hooks_digest is not None and hooks_hash(project) != hooks_digest:
        raise LooprailError(
            f"{project_hooks_path(project)}: changed while it was being reviewed; not trusted"
        )
    grant(project, hashes, hooks=hooks_digest)
    print(f"trusted: {', '.join(names)}")
    return 0


def _project_folder_hashes(project) -> dict[str, str]:
    """Folder hashes of the project overlay, taken before the manifests are read: consent must
    cover the content the audit was made from."""
    import os

    from looprail.hooks.compiled import capability_folders
    from looprail.trust import TrustError, folder_hash

    out = {}
    for folder in capability_folders(str(project / ".looprail" / "capabilities")):
        try:
            out[os.path.basename(folder)] = folder_hash(folder)
        except TrustError:
            continue
    return out


def revoke(args) -> int:
    from pathlib import Path

    from looprail.errors import UsageError
    from looprail.trust import revoke as withdraw

    project = Path(args.project)
    if not project.exists():
        raise UsageError(f"--project: {project} does not exist")
    removed = withdraw(project, args.ids or None, hooks=args.hooks)
    if not removed:
        print(f"nothing to revoke in {project.resolve()}")
        return 0
    for what in removed:
        print(f"revoked: {what}")
    return 0
