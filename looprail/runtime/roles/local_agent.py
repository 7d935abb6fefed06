#!/usr/bin/env python3
"""A starting point for the local runtime's role agents (written by `looprail init`).

looprail runs `.looprail/agents/<role>` with a JSON request on stdin (docs/runtime.md). This
script does each role's minimum so that `looprail run --phase 1` ships: replace a role's copy
with your own agent (a script that calls your tools or model) as the project grows.
"""

import json
import sys
from pathlib import Path

request = json.load(sys.stdin)
project = Path(request["project"])
phase_dir = Path(request["phase"]["dir"] or project)
prefix = phase_dir.name.split("-", 1)[0]
step = request.get("step")

if request["kind"] == "phase" and step == "discuss":
    roadmap = project / ".planning" / "ROADMAP.md"
    goal = roadmap.read_text() if roadmap.exists() else ""
    (phase_dir / f"{prefix}-CONTEXT.md").write_text(
        f"# Phase {request['phase']['number']} context\n\n"
        "- Decided by the starter orchestrator; edit .looprail/agents/orchestrator.\n\n"
        f"{goal}"
    )
elif request["kind"] == "phase" and step == "plan":
    (phase_dir / f"{prefix}-01-PLAN.md").write_text(
        f"""---
phase: {phase_dir.name}
plan: "01"
type: execute
wave: 1
depends_on: []
files_modified: ["NOTES.md"]
autonomous: true
requirements: [R-1]
---

<objective>
Start phase {request["phase"]["number"]}.
</objective>

<tasks>
<task type="auto">
<name>Write the phase notes</name>
<files>NOTES.md</files>
<read_first></read_first>
<action>Write NOTES.md saying what this phase is for.</action>
<verify>NOTES.md exists</verify>
<done>NOTES.md exists</done>
</task>
</tasks>
"""
    )
elif request["kind"] == "task":
    task = request["task"]
    for name in task["files"]:
        path = Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{task['name']}: {task['action']}\n")
elif request["kind"] == "phase" and step == "verify":
    plans = sorted(phase_dir.glob("*-PLAN.md"))
    done = all(p.with_name(p.name.replace("-PLAN.md", "-SUMMARY.md")).exists() for p in plans)
    status = "passed" if plans and done else "gaps_found"
    (phase_dir / f"{prefix}-VERIFICATION.md").write_text(
        f"---\nstatus: {status}\n---\n\n# Verification\n\n- {len(plans)} plan(s) checked.\n"
    )
print(json.dumps({"ok": True}))
