#!/usr/bin/env python3
"""A starting point for the local runtime's role agents (written by `looprail init`): each
role's minimum, with the JSON request on stdin (docs/runtime.md), so that `looprail run --phase 1`
ships. Replace a role's copy with your own agent as the project grows."""

import json
import os
import sys
from pathlib import Path

if os.environ.get("LOOPRAIL_REQUEST_FILE"):  # an interactive session: stdin is the terminal
    request = json.loads(Path(os.environ["LOOPRAIL_REQUEST_FILE"]).read_text())
else:
    request = json.load(sys.stdin)
project = Path(request["project"])
phase_dir = Path(request["phase"]["dir"] or project)
prefix = phase_dir.name.split("-", 1)[0]
step = request.get("step")

if request["kind"] == "phase" and step == "discuss":
    roadmap = project / ".planning" / "ROADMAP.md"
    goal = roadmap.read_text() if roadmap.exists() else ""
    decided = "- Decided by the starter orchestrator; edit .looprail/agents/orchestrator.\n\n"
    if os.environ.get("LOOPRAIL_INTERACTIVE") == "1" and sys.stdin.isatty():
        try:
            said = input(f"What must phase {request['phase']['number']} deliver? ").strip()
        except EOFError:  # Ctrl-D: nothing agreed, nothing written
            sys.exit(1)
        decided = f"- The user: {said}\n\n" if said else decided
    (phase_dir / f"{prefix}-CONTEXT.md").write_text(
        f"# Phase {request['phase']['number']} context\n\n{decided}{goal}"
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
if not os.environ.get("LOOPRAIL_REQUEST_FILE"):  # the terminal is the user's
    print(json.dumps({"ok": True}))
