"""`looprail hooks validate|list`: native hooks files (global and project hooks.json)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looprail.cli._common import command, group, print_json, print_table, warn
from looprail.errors import Issue
from looprail.hooks.native.loading import (
    check_across_files,
    global_hooks_path,
    load_native_hooks,
    project_hooks_path,
)
from looprail.hooks.native.models import NativeHook
from looprail.hooks.native.parsing import read_hooks_file
from looprail.layout import LOOPRAIL_DIR
from looprail.textsafe import plural
from looprail.trust import is_trusted

if TYPE_CHECKING:
    from looprail.hooks.native.models import CatalogEntry, HooksFile

JSON_ONE = "print one JSON object"


def register(sub) -> None:
    _, cmds = group(sub, "hooks", "native hooks (hooks.json): validate files, list effective hooks")

    # --capabilities is accepted for uniformity; hooks.json is not one
    p = command(
        cmds,
        "validate",
        _validate,
        "validate hooks files; every problem with its file and JSON path",
        "Validate native hooks files. Without FILE: the global file "
        f"($LOOPRAIL_HOME/hooks.json or ~/{LOOPRAIL_DIR}/hooks.json) and the project's "
        f"{LOOPRAIL_DIR}/hooks.json, those that exist. Exit 1 when any file has a problem.",
        json=JSON_ONE,
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="hooks files to validate")
    command(
        cmds,
        "list",
        _list,
        "the effective native hooks with their source",
        "List the merged native hooks of a project: global then project entries "
        "(a project entry replaces the global one of the same reference), whether each "
        "is enabled and why.",
        positional=True,
        json=JSON_ONE,
    )


def _validate(args: argparse.Namespace) -> int:
    files = _named_files(args.files) if args.files else _found_files(args.project, args.json)
    valid = all(f.status == "valid" for f in files)
    if args.json:
        print_json(
            {
                "valid": valid,
                "files": [
                    {
                        "file": str(f.path),
                        "scope": f.scope,
                        "valid": f.status == "valid",
                        "hooks": len(f.hooks),
                        "presets": len(f.presets),
                        "errors": [{"path": i.path, "reason": i.reason} for i in f.issues],
                    }
                    for f in files
                ],
            }
        )
        return 0 if valid else 1
    for f in files:
        if f.status == "valid":
            print(
                f"{f.path}: ok ({plural(len(f.hooks), 'hook')}, {plural(len(f.presets), 'preset')})"
            )
        for issue in f.issues:
            print(f"looprail: error: {issue}", file=sys.stderr)
    if not valid:
        problems = sum(len(f.issues) for f in files)
        bad = sum(1 for f in files if f.status != "valid")
        print(
            f"looprail: {plural(problems, 'problem')} in {plural(bad, 'file')}; "
            "an invalid file activates none of its hooks",
            file=sys.stderr,
        )
    return 0 if valid else 1


def _named_files(names: list[str]) -> tuple[HooksFile, ...]:
    """The files named on the command line: the project rules unless it is the global file
    itself; a missing one is invalid."""
    global_path = global_hooks_path()
    files = (
        read_hooks_file(path, scope="global" if _same(path, global_path) else "project")
        for path in map(Path, names)
    )
    return tuple(_missing_as_invalid(f) if f.status == "missing" else f for f in files)


def hooks_files(project: str | Path) -> tuple[HooksFile, ...]:
    """The global and the project's hooks.json (one file when they are the same), those that
    exist. The project file is read even when it is not trusted: reading runs nothing."""
    global_path, project_path = global_hooks_path(), project_hooks_path(project)
    found = [read_hooks_file(global_path, scope="global")]
    if not _same(global_path, project_path):
        found.append(read_hooks_file(project_path, scope="project"))
    return tuple(f for f in found if f.status != "missing")


def _found_files(project: str, quiet: bool) -> tuple[HooksFile, ...]:
    """The global and the project's hooks.json, those that exist, checked across files."""
    files = check_across_files(hooks_files(project))
    if not files and not quiet:
        global_path, project_path = global_hooks_path(), project_hooks_path(project)
        print(f"looprail: no native hooks files ({global_path}, {project_path})", file=sys.stderr)
    return files


def _missing_as_invalid(hooks_file: HooksFile) -> HooksFile:
    issue = Issue(str(hooks_file.path), "$", "cannot read (no such file)")
    return replace(hooks_file, status="invalid", issues=(issue,))


def _list(args: argparse.Namespace) -> int:
    project = Path(args.project)
    trusted = _project_trusted(project)
    hooks = load_native_hooks(project, trusted=bool(trusted))
    warn(*hooks.warnings)

    rows = [_entry_row(e, hooks.enabled_via.get(e.ref), active=True) for e in hooks.catalog]
    # Show what an untrusted project file would add, marked inactive, so nothing is silent.
    untrusted = next((f for f in hooks.files if f.status == "untrusted"), None)
    if untrusted is not None:
        shadow = read_hooks_file(project_hooks_path(project), scope="project")
        rows += [_entry_row(e, None, active=False) for e in shadow.entries]

    if args.json:
        print_json(
            {
                "project": str(project),
                "projectTrusted": trusted,
                "files": [
                    {"file": str(f.path), "scope": f.scope, "status": f.status} for f in hooks.files
                ],
                "entries": rows,
            }
        )
        return 0

    for f in hooks.files:
        if f.status != "missing":
            print(f"# {f.scope}: {f.path} ({f.status})")
    if not rows:
        print("no native hooks")
        return 0
    keys = ("ref", "kind", "event", "source", "enabled", "action")
    table = [tuple(r.get(k) or "-" for k in keys) for r in rows]
    print_table([tuple(k.upper() for k in keys), *table])
    return 0


def _entry_row(item: CatalogEntry, via: str | None, *, active: bool) -> dict[str, Any]:
    """A native hook or preset as `hooks list --json` shows it."""
    if not active:
        enabled = "no (project not trusted)"
    elif item.kind == "preset":
        enabled = "yes" if item.entry.default else "no"
    elif via is None:
        enabled = "no"
    elif via in ("default", "enabled"):
        enabled = "yes"
    else:
        enabled = f"via {via}"
    row: dict[str, Any] = {
        "ref": item.ref,
        "kind": item.kind,
        "source": item.scope,
        "file": str(item.file),
        "enabled": enabled,
        "description": item.entry.description,
    }
    if isinstance(item, NativeHook):
        row["event"] = item.entry.event
        row["action"] = item.entry.action.type if item.entry.action else None
    else:
        row["preset"] = list(item.entry.preset)
    return row


def _project_trusted(project: Path) -> bool:
    """Has the user consented (`looprail trust`) to exactly the current bytes of the project's
    hooks.json? Anything else, a broken consent store included, means untrusted: that only
    ever hides project hooks, never runs an unapproved one."""
    try:
        return is_trusted(project)
    except Exception:
        return False


def _same(a: Path, b: Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False
