"""`looprail capability validate|list|remove|audit|install`."""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from looprail.cli._common import JSON_HELP, command, group, print_json, project_folder, warn
from looprail.cli.hooks import hooks_files
from looprail.cli.sources import gsd_sources
from looprail.config import load_project_config
from looprail.errors import Issue, LooprailError, ManifestError, UsageError
from looprail.fsutil import looprail_path
from looprail.hooks.manifest import (
    ID_PATTERN,
    grammar_warnings,
    parse_manifest_bytes,
    validate_manifest,
)
from looprail.hooks.registry import (
    FIRST_PARTY,
    FailedCapability,
    LoadedCapability,
    Root,
    load_registry,
    search_roots,
)
from looprail.layout import CAPABILITIES_DIR, LOOPRAIL_DIR, PROJECT_CONFIG_FILE, looprail_home
from looprail.plans.taskchecks import PlanCheck, project_checks
from looprail.points import POINTS
from looprail.runtime.agent_settings import GUARDED
from looprail.runtime.agents import ADAPTERS
from looprail.runtime.registry import agent_name
from looprail.textsafe import plural
from looprail.trust import apply_consent, copy_folder, folder_hash, grant, is_trusted
from looprail.trust.agents import effective_agent
from looprail.trust.audit import (
    Audit,
    CapabilityAudit,
    audit_hooks_file,
    audit_registry,
    capability_surfaces,
    render_text,
    suspect_surfaces,
)


def register(sub) -> None:
    _, cmds = group(sub, "capability", "validate, list and manage capabilities")
    p = command(
        cmds,
        "validate",
        validate,
        "validate capability manifests: errors (exit 1) and warnings, each with its file "
        "and JSON path",
        "Validate every capability in DIR… (a capability folder holding "
        "capability.json, or a folder of them). Without DIR, validate the project's whole "
        f"search path (--capabilities, LOOPRAIL_CAPABILITIES, ~/{LOOPRAIL_DIR}/capabilities, "
        f"<project>/{LOOPRAIL_DIR}/capabilities) merged, as the loop would load it. Each problem "
        "is one line naming the file and JSON path. A manifest is checked in layers: JSON, then "
        "the shape (every shape error at once), then the rules across fields once the shape is "
        "valid, so fixing one layer can reveal the next. A `ref.command` or `check.query` that "
        "fails its grammar (a query's words may be dotted: `ui.plan-gate`) is a warning, not "
        "an error: the manifest is valid (the reference accepts it) but looprail refuses that "
        "string at dispatch. Exit 1 when any manifest is invalid.",
        json=JSON_HELP,
    )
    p.add_argument(
        "dirs",
        nargs="*",
        metavar="DIR",
        help="a capability folder or a folder of them (default: the project's search path)",
    )
    command(
        cmds,
        "list",
        list_capabilities,
        "list loaded capabilities: id, role, origin, points, active",
        positional=True,
        json=JSON_HELP,
    )
    p = command(
        cmds,
        "audit",
        audit,
        "list everything a capability (and the native hooks files) can run",
        "List every executable surface of the loaded capabilities (or only ID…): "
        "step skills, agents and commands with their command lines, gate queries and predicates "
        "(the /bin/sh command of a command-exit-zero predicate), the task-content resolver, "
        "reviewer lanes (probe and invoke), host lifecycle hooks and command modules; without "
        "ID, also every `when` and `shell` of the global and project hooks.json. Strings that "
        "fail their grammar are marked REFUSED: looprail never runs them.",
        json=JSON_HELP,
    )
    p.add_argument("ids", nargs="*", metavar="ID", help="capability ids (default: all loaded)")
    _add_overlay_commands(cmds)


def _add_overlay_commands(cmds) -> None:
    """`remove` and `install`: the project's and the global overlay."""
    p = command(
        cmds,
        "remove",
        remove,
        "delete an overlay capability (project overlay, or --global)",
        "Remove capability ID from the project overlay "
        f"(<project>/{LOOPRAIL_DIR}/capabilities/ID) or, with --global, from "
        f"~/{LOOPRAIL_DIR}/capabilities. First-party sets are never touched.",
    )
    p.add_argument("id", metavar="ID", help="id of the overlay capability to delete")
    p.add_argument("--global", dest="global_", action="store_true", help="the global overlay")
    p = command(
        cmds,
        "install",
        install,
        "validate, audit and copy a capability folder into an overlay (asks consent)",
        "Validate the capability folder DIR, print its audit, ask for consent "
        "(--yes answers yes; without a terminal --yes is required) and copy it to the project "
        f"overlay <project>/{LOOPRAIL_DIR}/capabilities/<id> (default; consent is recorded) "
        f"or, with --global, to ~/{LOOPRAIL_DIR}/capabilities/<id>. A capability carrying a "
        "command or query that fails its grammar is refused.",
    )
    p.add_argument("dir", metavar="DIR", help="the capability folder (holding capability.json)")
    p.add_argument(
        "--global", dest="global_", action="store_true", help="install into the global overlay"
    )
    p.add_argument("--yes", "-y", action="store_true", help="consent without asking")
    p.add_argument("--force", action="store_true", help="replace an installed copy")


def _registry_for(args):
    config, _ = load_project_config(args.project)
    if not getattr(args, "dirs", None):
        gsd_sources(args, args.project)  # what `run` would load: the config's, or GSD's
        return apply_consent(load_registry(args.project, args.capabilities)), config
    roots = []
    singles: list[Path] = []
    for d in args.dirs:
        path = Path(d)
        try:
            single, is_folder = (path / "capability.json").is_file(), path.is_dir()
        except OSError:  # a name the OS refuses (too long, say): not a folder either way
            single = is_folder = False
        if single:
            singles.append(path)
        elif is_folder:
            roots.append(Root(str(path), FIRST_PARTY))
        else:
            shown = d if len(d) <= 200 else d[:200] + "…"
            raise UsageError(f"{shown}: not a capability folder or a folder of capabilities")
    registry = load_registry(args.project, roots=roots)
    for folder in singles:
        file = str(folder / "capability.json")
        cap, data, issues = validate_manifest(Path(file).read_bytes(), file, folder)
        if cap is None or data is None:  # data is None exactly when cap is
            failed = FailedCapability(folder.name, file, FIRST_PARTY, tuple(issues))
            registry = registry._replace(failed=(*registry.failed, failed))
        elif cap.id not in registry.capabilities:
            registry = registry.replacing(
                {cap.id: LoadedCapability(data, str(folder), FIRST_PARTY)}
            )
    return registry, config


def validate(args) -> int:
    registry, _ = _registry_for(args)
    issues = registry.issues
    warnings = list(registry.warnings)
    for cid in sorted(registry.capabilities):
        # Valid but refused at dispatch: warnings, never a failure (the reference accepts them).
        lc = registry.capabilities[cid]
        warnings += [str(g) for g in grammar_warnings(lc.manifest, lc.manifest_file)]
    if args.json:
        print_json(
            {
                "ok": not issues,
                "valid": sorted(registry.capabilities),
                "errors": [{"file": i.file, "path": i.path, "reason": i.reason} for i in issues],
                "warnings": warnings,
            }
        )
    else:
        for i in issues:
            print(f"error: {i}", file=sys.stderr)
        warn(*warnings)
        n_bad = len({f.file for f in registry.failed})
        summary = f"{len(registry.capabilities)} valid, {n_bad} invalid"
        print(summary if not issues else f"{summary} ({plural(len(issues), 'error')})")
    return 1 if issues else 0


def list_capabilities(args) -> int:
    registry, config = _registry_for(args)
    rows = [_capability_row(registry, cid, config) for cid in sorted(registry.capabilities)]
    failed = [
        {"id": f.id, "origin": f.origin, "file": f.file, "reason": str(f.issues[0])}
        for f in registry.failed
    ]
    shadowed = [
        {
            "id": s.id,
            "origin": s.origin,
            "source": str(s.source),
            "loadedInstead": str(s.winner),
            "reason": s.reason,
        }
        for s in registry.shadowed
    ]
    if args.json:
        print_json({"capabilities": rows, "failed": failed, "shadowed": shadowed})
        return 0
    if not rows and not failed:
        print(
            "no capabilities found (install GSD, or name them with --capabilities DIR, "
            f"LOOPRAIL_CAPABILITIES or looprail.capabilities in {PROJECT_CONFIG_FILE})"
        )
        return 0
    width = max([len(r["id"]) for r in rows] + [len(f["id"]) for f in failed] + [2])
    for r in rows:
        state = "active" if r["active"] else f"inactive ({r['reason']})"
        pts = ", ".join(r["points"]) or "-"
        print(f"{r['id']:<{width}}  {r['role']:<8}  {r['origin']:<11}  {state:<8}  {pts}")
    for f in failed:
        print(f"{f['id']:<{width}}  {'-':<8}  {f['origin']:<11}  FAILED    {f['reason']}")
    for sh in registry.shadowed:
        print(f"{sh.id:<{width}}  {'-':<8}  {sh.origin:<11}  NO EFFECT  {sh.reason}")
    return 0


def _capability_row(registry, cid: str, config) -> dict[str, Any]:
    """A capability as `capability list --json` shows it."""
    lc = registry.capabilities[cid]
    m = lc.manifest
    points = sorted(
        {e.point for group in (m.steps, m.contributions, m.gates) for e in group or ()},
        key=POINTS.index,
    )
    why = registry.why_inactive(cid, config)
    return {
        "id": cid,
        "role": m.role,
        "origin": lc.origin,
        "points": points,
        "active": why is None,
        "reason": why,
        "source": str(lc.source),
    }


def remove(args) -> int:
    if args.global_:
        base = Path(looprail_home()) / CAPABILITIES_DIR
    else:  # never through a `.looprail/capabilities` linked out of the project
        base = looprail_path(args.project, CAPABILITIES_DIR)
    target = base / args.id
    if "/" in args.id or args.id in (".", "..") or not (target / "capability.json").is_file():
        raise UsageError(f"{target}: no such overlay capability")
    if target.is_symlink():
        target.unlink()
    else:
        shutil.rmtree(target)
    print(f"removed {target}")
    return 0


def check_lines(checks: list[PlanCheck]) -> list[str]:
    """The commands a run would execute as task checks (docs/security.md), for people."""
    if not checks:
        return []
    lines = ["", "task checks a run executes (the plan's <automated>, bash -o pipefail):"]
    return lines + [f"  {c.plan} {c.task_id}: SHELL {c.command}" for c in checks]


def audit(args) -> int:
    registry, config = _registry_for(args)
    known = set(registry.capabilities) | {f.id for f in registry.failed}
    unknown = [i for i in args.ids if i not in known]
    if unknown:
        raise UsageError(
            f"capability audit: no capability {unknown[0]!r} on the search path "
            f"(found: {', '.join(sorted(known)) or 'none'})"
        )
    hooks_files = [] if args.ids else _native_hooks_audits(Path(args.project))
    result = audit_registry(registry, args.ids, hooks_files=hooks_files, config=config)
    warn(*registry.warnings)
    agent = None if args.ids else _agent_audit(Path(args.project))
    checks = [] if args.ids else project_checks(Path(args.project))
    if args.json:
        shown = [{"plan": c.plan, "taskId": c.task_id, "command": c.command} for c in checks]
        extra = {"agent": agent} if agent else {}
        print_json({**result.to_json(), **extra, **({"taskChecks": shown} if checks else {})})
    else:
        print(render_text(result))
        print("\n".join(check_lines(checks)))
        if agent:
            print(f"\n{agent['line']}")
            for key, where in agent["from"].items():
                print(f"  {key}: from {where}")
            if agent["refusal"]:
                print(f"  REFUSED: {agent['refusal']}")
    return 0


def _agent_audit(project):
    """The agent a run would use, as `run` computes it (`effective_agent`): every flag, where
    each guarded setting came from, and what a run would refuse. None for a runtime that is
    not an agent CLI."""
    config, _ = load_project_config(project)
    name = agent_name(config)
    if name not in ADAPTERS:
        return None
    effective = effective_agent(project, config, name)
    return {
        "name": name,
        "line": effective.line(),
        "from": {k: effective.origin[k] for k in GUARDED if k in effective.origin},
        "pending": effective.pending,
        "refusal": effective.refusal(),
    }


def _native_hooks_audits(project):
    """Audits of the global and the project hooks.json (those that exist)."""
    return [
        audit_hooks_file(f, trusted=is_trusted(project) if f.scope == "project" else None)
        for f in hooks_files(project)
    ]


def install(args) -> int:
    source = Path(args.dir)
    manifest = source / "capability.json"
    if not source.is_dir() or not manifest.is_file():
        raise UsageError(f"{args.dir}: not a capability folder (no capability.json)")
    cap_id = _declared_id(manifest)
    project = Path(args.project)
    if args.global_:
        root, origin = Path(looprail_home()) / CAPABILITIES_DIR, "global"
    else:
        project_folder(args.project)
        # refused when linked out of the project
        root, origin = looprail_path(project, CAPABILITIES_DIR), "project"
    target = root / cap_id
    if (target.exists() or target.is_symlink()) and not args.force:
        raise LooprailError(
            f"{target}: capability {cap_id!r} is already installed; replace it with --force "
            f"or remove it with `looprail capability remove {shlex.quote(cap_id)}`"
        )
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=root, prefix=".install-"))
    try:
        staged = staging / cap_id
        copy_folder(source, staged)
        digest = folder_hash(staged)
        lc = _validate_staged(args, staged, origin, target, source)
        surfaces = tuple(capability_surfaces(lc.data))
        cap_audit = CapabilityAudit(
            cap_id, origin, str(target), lc.manifest.role, True, None, surfaces
        )
        print(render_text(Audit((cap_audit,))))
        _refuse_suspects(cap_audit, str(manifest))
        where = "the global overlay" if args.global_ else f"project {project.resolve()}"
        if not confirm(args, _install_question(cap_audit, where)):
            print("not installed")
            return 1
        if folder_hash(staged) != digest:
            raise LooprailError(f"{source}: changed while it was being reviewed; not installed")
        if target.exists() or target.is_symlink():
            target.rename(staging / f".old-{cap_id}")
        staged.rename(target)
        consented = ""
        if origin == "project":
            grant(project, {cap_id: digest})
            consented = " (consent recorded)"
        print(f"installed {cap_id} into {target}{consented}")
        return 0
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _install_question(cap_audit: CapabilityAudit, where: str) -> str:
    """What `install` asks; shell or interpreter code is said on stderr too, even with --yes."""
    cap_id = cap_audit.id
    shells = "; ".join(s.where for s in cap_audit.surfaces if s.shell and not s.refused)
    shell_note = ""
    if shells:
        shell_note = f" It runs SHELL or interpreter code ({shells})."
        warn(f"{cap_id} runs shell or interpreter code: {shells}")
    return f"Install capability {cap_id!r} into {where} and allow it to run?{shell_note}"


def _declared_id(manifest) -> str:
    file = str(manifest)
    try:
        raw = manifest.read_bytes()
    except OSError as exc:
        raise ManifestError([Issue(file, "$", f"cannot read ({exc.strerror or exc})")]) from None
    data, issues = parse_manifest_bytes(raw, file)
    if issues:
        raise ManifestError(issues)
    cap_id = data.get("id") if isinstance(data, dict) else None
    if not isinstance(cap_id, str) or not ID_PATTERN.match(cap_id):
        raise ManifestError([Issue(file, "$.id", "must be a kebab-case id (the folder name)")])
    return cap_id


def _validate_staged(args, staged, origin: str, target, source):
    """Validate the staged copy merged with the search path, as it will load; problems name
    the files of `source`, not of the staged copy."""
    file = str(staged / "capability.json")
    roots = []
    for root in search_roots(args.project, args.capabilities):
        if Path(root.path).resolve() == target.parent.resolve():
            # Same trust rank as its destination, and ahead of a copy --force replaces.
            roots.append(Root(str(staged.parent), origin))
        roots.append(root)
    registry = load_registry(args.project, roots=roots)
    shown = str(source / "capability.json")
    failed = [f for f in registry.failed if f.file == file]
    if failed:
        raise ManifestError(
            [
                Issue(shown, i.path, i.reason.replace(str(staged), str(source)))
                for i in failed[0].issues
            ]
        )
    lc = registry.capabilities.get(staged.name)
    if lc is None:
        raise ManifestError([Issue(shown, "$", "did not load")])
    if Path(lc.source).resolve() != staged.resolve():
        raise LooprailError(
            f"{shown}: $.id: capability {staged.name!r} already exists in the {lc.origin} set "
            f"({lc.source}), which wins over this one: it would never load"
        )
    return lc


def _refuse_suspects(cap_audit, file: str) -> None:
    suspects = suspect_surfaces(cap_audit.surfaces)
    if suspects:
        raise ManifestError([Issue(file, s.where, f"{s.runs}: {s.refused}") for s in suspects])


def confirm(args, question: str) -> bool:
    """`--yes`, or ask on a terminal; without a terminal and without --yes, refuse."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise LooprailError(
            "stdin is not a terminal: review the audit above and run again with --yes to consent"
        )
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
