"""`looprail phase list|plan-index`: what a project's `.planning/phases/` holds."""

from __future__ import annotations

import argparse
from pathlib import Path

from looprail.cli._common import command, group, print_json, print_table, warn
from looprail.plans import list_phases, load_phase, plan_index
from looprail.plans.phase import two_folders_message


def register(sub) -> None:
    _, commands = group(sub, "phase", "inspect the phases and plans under .planning/phases/")

    # --raw prints JSON (what hosts parse); --capabilities is accepted, not read here
    index = command(
        commands,
        "plan-index",
        _plan_index,
        "a phase's plans, their waves (from depends_on) and what is still to do",
        "A phase's plans, their effective waves (from depends_on), which plans "
        "have no SUMMARY yet, and which waves must run sequentially because plans share a "
        "files_modified entry.",
    )
    index.add_argument("phase", metavar="N", help="phase number: 1, 01, 2.1, ...")
    listing = command(commands, "list", _list, "the phase folders found, in phase order")
    for p in (index, listing):
        p.add_argument("--raw", action="store_true", help="print JSON (what hosts parse)")


def _plan_index(args: argparse.Namespace) -> int:
    # Of two folders for one phase, the index shows the one the reference reads, and says so
    # (`run` refuses until they are one).
    phase = load_phase(args.project, args.phase, as_reference=True)
    index = plan_index(args.project, phase)
    folders = [p for p in list_phases(args.project) if p.number == phase.number]
    if len(folders) > 1:
        index["warnings"].insert(0, two_folders_message(args.phase, folders))
    if args.raw:
        print_json(index)
        return 0
    _print_index(index)
    warn(*index["warnings"])
    return 0


def _print_index(index: dict) -> None:
    plans = index["plans"]
    done = sum(1 for p in plans if p["has_summary"] and not p["halted"])
    print(f"Phase {index['phase']} ({index['phase_dir']}): {len(plans)} plans, {done} done")
    if not plans:
        return
    rows: list[tuple[str, ...]] = [("wave", "plan", "tasks", "done", "depends on", "objective")]
    for plan in sorted(plans, key=lambda p: (p["wave"], p["id"])):
        rows.append(
            (
                str(plan["wave"]),
                plan["id"],
                str(plan["task_count"]),
                "halted"
                if plan["halted"]
                else f"blocked by {', '.join(plan['blocked_by'])}"
                if plan["blocked_by"]
                else "yes"
                if plan["has_summary"]
                else "no",
                ", ".join(plan["depends_on"]) or "-",
                plan["objective"] or "",
            )
        )
    print_table(rows)
    for wave, files in index["sequential_waves"].items():
        print(f"wave {wave} runs sequentially: plans share {', '.join(files)}")


def _list(args: argparse.Namespace) -> int:
    phases = list_phases(args.project)
    if args.raw:
        print_json(
            [
                {"phase": p.number, "slug": p.slug, "phase_dir": _relative(p.dir, args.project)}
                for p in phases
            ]
        )
        return 0
    if not phases:
        print("no phases under .planning/phases/")
    for p in phases:
        print(f"{p.number:>6}  {_relative(p.dir, args.project)}")
    return 0


def _relative(path, project: str) -> str:
    try:
        return Path(path).resolve().relative_to(Path(project).resolve()).as_posix()
    except ValueError:
        return str(path)
