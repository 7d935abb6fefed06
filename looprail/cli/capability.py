"""`looprail capability validate|list|remove`."""

from __future__ import annotations

import sys

from looprail.cli._common import add_project_options, group, print_json, warn


def register(sub) -> None:
    _, cmds = group(sub, "capability", "validate, list and manage capabilities")
    p = cmds.add_parser(
        "validate",
        help="validate capability manifests; every error, exit 1 if any",
        description="Validate every capability in DIR… (a capability folder holding "
        "capability.json, or a folder of them). Without DIR, validate the project's whole "
        "search path (--capabilities, LOOPRAIL_CAPABILITIES, ~/.looprail/capabilities, "
        "<project>/.looprail/capabilities) merged, as the loop would load it.",
    )
    p.add_argument("dirs", nargs="*", metavar="DIR")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_project_options(p)
    p.set_defaults(handler=validate)

    p = cmds.add_parser("list", help="list loaded capabilities: id, role, origin, points, active")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_project_options(p)
    p.set_defaults(handler=list_capabilities)

    p = cmds.add_parser(
        "remove",
        help="delete an overlay capability (project overlay, or --global)",
        description="Remove capability ID from the project overlay "
        "(<project>/.looprail/capabilities/ID) or, with --global, from ~/.looprail/capabilities. "
        "First-party sets are never touched.",
    )
    p.add_argument("id")
    p.add_argument("--global", dest="global_", action="store_true", help="the global overlay")
    add_project_options(p)
    p.set_defaults(handler=remove)


def _registry_for(args):
    from pathlib import Path

    from looprail.config import load_project_config
    from looprail.hooks.registry import FIRST_PARTY, Root, load_registry

    config, _ = load_project_config(args.project)
    if not getattr(args, "dirs", None):
        return load_registry(args.project, args.capabilities, config=config)
    roots = []
    singles = []
    for d in args.dirs:
        path = Path(d)
        if (path / "capability.json").is_file():
            singles.append(path)
        elif path.is_dir():
            roots.append(Root(path, FIRST_PARTY))
        else:
            from looprail.errors import UsageError

            raise UsageError(f"{d}: not a capability folder or a folder of capabilities")
    registry = load_registry(args.project, roots=roots, config=config)
    for folder in singles:
        from looprail.hooks.manifest import validate_manifest
        from looprail.hooks.registry import FailedCapability, LoadedCapability

        file = str(folder / "capability.json")
        cap, data, issues = validate_manifest(
            (folder / "capability.json").read_bytes(), file, folder
        )
        if cap is None:
            registry.failed.append(FailedCapability(folder.name, file, FIRST_PARTY, issues))
        else:
            registry.capabilities.setdefault(
                cap.id, LoadedCapability(cap, data, folder, FIRST_PARTY)
            )
    return registry


def validate(args) -> int:
    registry = _registry_for(args)
    issues = registry.issues
    if args.json:
        print_json(
            {
                "ok": not issues,
                "valid": sorted(registry.capabilities),
                "errors": [{"file": i.file, "path": i.path, "reason": i.reason} for i in issues],
                "warnings": registry.warnings,
            }
        )
    else:
        for i in issues:
            print(f"error: {i}", file=sys.stderr)
        for w in registry.warnings:
            warn(w)
        n_bad = len({f.file for f in registry.failed})
        summary = f"{len(registry.capabilities)} valid, {n_bad} invalid"
        print(summary if not issues else f"{summary} ({len(issues)} errors)")
    return 1 if issues else 0


def list_capabilities(args) -> int:
    from looprail.points import POINTS

    registry = _registry_for(args)
    rows = []
    for cid in sorted(registry.capabilities):
        lc = registry.capabilities[cid]
        m = lc.manifest
        points = sorted(
            {e.point for group in (m.steps, m.contributions, m.gates) for e in group or ()},
            key=POINTS.index,
        )
        rows.append(
            {
                "id": cid,
                "role": m.role,
                "origin": lc.origin,
                "points": points,
                "active": lc.active,
                "reason": lc.inactive_reason,
                "source": str(lc.source),
            }
        )
    failed = [
        {"id": f.id, "origin": f.origin, "file": f.file, "reason": str(f.issues[0])}
        for f in registry.failed
    ]
    if args.json:
        print_json({"capabilities": rows, "failed": failed})
        return 0
    if not rows and not failed:
        print("no capabilities found (use --capabilities DIR or LOOPRAIL_CAPABILITIES)")
        return 0
    width = max([len(r["id"]) for r in rows] + [len(f["id"]) for f in failed] + [2])
    for r in rows:
        state = "active" if r["active"] else f"inactive ({r['reason']})"
        pts = ", ".join(r["points"]) or "-"
        print(f"{r['id']:<{width}}  {r['role']:<8}  {r['origin']:<11}  {state:<8}  {pts}")
    for f in failed:
        print(f"{f['id']:<{width}}  {'-':<8}  {f['origin']:<11}  FAILED    {f['reason']}")
    return 0


def remove(args) -> int:
    import shutil
    from pathlib import Path

    from looprail.errors import UsageError
    from looprail.hooks.registry import looprail_home

    base = (looprail_home() if args.global_ else Path(args.project) / ".looprail") / "capabilities"
    target = base / args.id
    if "/" in args.id or args.id in (".", "..") or not (target / "capability.json").is_file():
        raise UsageError(f"{target}: no such overlay capability")
    if target.is_symlink():
        target.unlink()
    else:
        shutil.rmtree(target)
    print(f"removed {target}")
    return 0
