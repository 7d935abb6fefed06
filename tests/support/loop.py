"""Builders for loop tests: a project with a phase, plans, capabilities, and a ScriptedRuntime
whose role agents write the real artifacts (CONTEXT, VERIFICATION) so the loop can ship."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from looprail.runtime.base import Outcome
from looprail.runtime.scripted import ScriptedRuntime
from tests.support import feature, write_capability, write_exe


def make_project(root: Path, *, config: dict | None = None, phase: str = "01-demo") -> Path:
    project = root / "project"
    (project / ".planning" / "phases" / phase).mkdir(parents=True)
    if config is not None:
        (project / ".planning" / "config.json").write_text(json.dumps(config))
    return project


def plan_md(
    plan: str, *, wave: int | None = None, depends_on=(), files=(), tasks=(), autonomous=True
) -> str:
    fm = [
        "---",
        "phase: 01-demo",
        f'plan: "{plan}"',
        "type: execute",
        *([f"wave: {wave}"] if wave is not None else []),
        f"depends_on: {json.dumps(list(depends_on))}",
        f"files_modified: {json.dumps(list(files))}",
        f"autonomous: {'true' if autonomous else 'false'}",
        "requirements: [R-1]",
        "---",
        "",
        f"<objective>\nPlan {plan}\n</objective>",
        "",
        "<tasks>",
    ]
    for t in tasks:
        fm.append(t)
    fm.append("</tasks>")
    return "\n".join(fm) + "\n"


def task_xml(
    name: str,
    *,
    type: str = "auto",
    attrs: str = "",
    files=("out.txt",),
    read_first=(),
    action: str = "do it",
) -> str:
    return (
        f'<task type="{type}"{attrs}>\n<name>{name}</name>\n<files>{", ".join(files)}</files>\n'
        f"<read_first>{chr(10).join(read_first)}</read_first>\n<action>{action}</action>\n"
        f"<verify>ok</verify>\n<done>done</done>\n</task>"
    )


def write_plan(project: Path, plan: str, text: str, phase: str = "01-demo") -> Path:
    p = project / ".planning" / "phases" / phase / f"01-{plan}-PLAN.md"
    p.write_text(text)
    return p


def scripted(
    project: Path, *, verification: str = "passed", phase: str = "01-demo", **kw: Any
) -> ScriptedRuntime:
    """A runtime whose role agents write CONTEXT.md and VERIFICATION.md like real ones."""
    phase_dir = project / ".planning" / "phases" / phase
    rt = ScriptedRuntime(**kw)
    rt.effect(("phase", "discuss"), lambda req: (phase_dir / "01-CONTEXT.md").write_text("# ctx\n"))
    rt.effect(
        ("phase", "verify"),
        lambda req: (phase_dir / "01-VERIFICATION.md").write_text(
            f"---\nstatus: {verification}\n---\n"
        ),
    )
    return rt


def caps_dir(root: Path, *manifests: dict) -> Path:
    d = root / "caps"
    d.mkdir(exist_ok=True)
    for m in manifests:
        write_capability(d, m)
    return d


def run_loop(
    project: Path,
    runtime,
    caps: Path | None = None,
    phase: str = "1",
    journal: bool = False,
    **options,
):
    from looprail.machine.progress import Progress
    from looprail.machine.runner import RunOptions
    from looprail.machine.session.phase import load_project, run_phase

    loaded = load_project(project, [caps] if caps else [])
    return run_phase(
        loaded,
        phase,
        runtime=runtime,
        options=RunOptions(**options),
        progress=Progress(quiet=True),
        journal=journal,
    )


def every_kind_at_every_point() -> list[dict]:
    """Three capabilities: a skill step, a contribution and an advisory query gate at each of
    the 12 points (contributions only where the point has a role)."""
    from looprail.points import POINT_ROLES, POINTS

    skills = [f"s-{p.replace(':', '-')}" for p in POINTS]
    steps = [
        {"point": p, "ref": {"skill": s}, "produces": [], "consumes": [], "onError": "skip"}
        for p, s in zip(POINTS, skills, strict=True)
    ]
    contributions = [
        {
            "point": p,
            "into": POINT_ROLES[p][0],
            "fragment": {"inline": f"context for {p}"},
            "produces": [],
            "consumes": [],
        }
        for p in POINTS
    ]
    gates = [
        {
            "point": p,
            "check": {"query": f"check {p.replace(':', '-')}"},
            "blocking": False,
            "onError": "skip",
        }
        for p in POINTS
    ]
    return [
        feature("alpha", skills=skills, steps=steps),
        feature("beta", contributions=contributions),
        feature("gamma", gates=gates),
    ]


OK = Outcome.succeeded()


def demo_phase(root: Path) -> tuple[Path, Path]:
    """`root/project` with an empty config and phase `01-demo` holding a CONTEXT: where every
    real-run project starts. Returns the project and the phase folder."""
    project = root / "project"
    phase = project / ".planning" / "phases" / "01-demo"
    phase.mkdir(parents=True)
    (project / ".planning" / "config.json").write_text("{}")
    (phase / "01-CONTEXT.md").write_text("ctx\n")
    return project, phase


def halting_gate(cap_id: str, point: str, query: str) -> dict[str, Any]:
    """A feature with one blocking gate at `point` asking the check `query` (halts on error)."""
    gate = {"point": point, "check": {"query": query}, "blocking": True, "onError": "halt"}
    return feature(cap_id, gates=[gate])


def halting_step(cap_id: str, skill: str, point: str) -> dict[str, Any]:
    """A feature with one step at `point` running the skill `skill` (halts on error)."""
    step = {
        "point": point,
        "ref": {"skill": skill},
        "produces": [],
        "consumes": [],
        "onError": "halt",
    }
    return feature(cap_id, skills=[skill], steps=[step])


def gated_project(root: Path) -> tuple[Path, Path]:
    """A phase whose ship:pre gate blocks until `.ready` exists."""
    project, phase = demo_phase(root)
    (phase / "01-01-PLAN.md").write_text(
        plan_md("01", files=["out/a"], tasks=[task_xml("a1", files=["out/a"])])
    )
    lr = project / ".looprail"
    write_exe(lr / "agents" / "executor", "exit 0\n")
    write_exe(
        lr / "agents" / "verifier",
        'printf -- "---\\nstatus: passed\\n---\\n" > "$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md"\n',
    )
    write_exe(lr / "agents" / "orchestrator", 'touch "$LOOPRAIL_PROJECT/SHIPPED"\n')
    write_exe(
        lr / "checks" / "ready",
        'if [ -e "$LOOPRAIL_PROJECT/.ready" ]; then echo \'{"block": false}\'; '
        'else echo \'{"block": true, "message": "not ready"}\'; fi\n',
    )
    caps = root / "caps"
    write_capability(caps, halting_gate("shipgate", "ship:pre", "ready"))
    return project, caps
