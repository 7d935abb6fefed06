"""A GSD-shaped project of several phases for the project-loop tests (`looprail run` without
`--phase`, `--through`, `--all`): a ROADMAP, role agents that are small deterministic scripts
writing the real artifacts for whichever phase they are asked about, and what they log."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import run_cli, write_exe
from tests.support.procs import HOLDING, PY

# Every agent: log its pid, hold while .hold/<name> exists (after writing .reached/<name>),
# then do its work and log "done …" (the test reads what ran, and how often).
COMMON = (
    r"""
import json, os, sys, time
from pathlib import Path
root = Path(os.environ["LOOPRAIL_PROJECT"])
req = json.load(sys.stdin)
phase_dir = Path(req["phase"]["dir"])
number = req["phase"]["number"]
prefix = phase_dir.name.split("-", 1)[0]
"""
    + HOLDING
    + r"""
"""
)

ORCHESTRATOR = r"""
if req["step"] == "discuss":
    (phase_dir / f"{prefix}-CONTEXT.md").write_text(f"# Phase {number}\n")
    append("done.log", f"discuss {number}")
elif req["step"] == "ship":
    append("done.log", f"ship {number}")
"""

PLANNER = r"""
# .checkpoint-N: plan 02 of phase N is a checkpoint a human must approve
check = (root / f".checkpoint-{number}").exists()
for plan, deps in (("01", "[]"), ("02", '["01"]')):
    out = f"out/{prefix}-{plan}.txt"
    kind = "checkpoint:human-verify" if check and plan == "02" else "auto"
    (phase_dir / f"{prefix}-{plan}-PLAN.md").write_text(
        f'---\nphase: {phase_dir.name}\nplan: "{plan}"\ntype: execute\ndepends_on: {deps}\n'
        f'files_modified: ["{out}"]\nautonomous: {str(kind == "auto").lower()}\nrequirements: [R-1]\n---\n\n'
        f"<objective>phase {number} plan {plan}</objective>\n\n<tasks>\n"
        f'<task type="{kind}">\n<name>write {out}</name>\n<files>{out}</files>\n'
        f"<action>write {out}</action>\n<verify>test -f {out}</verify>\n<done>{out}</done>\n"
        "</task>\n</tasks>\n"
    )
append("done.log", f"plan {number}")
"""

EXECUTOR = r"""
t = req["task"]
key = f"{t['planId']}-{t['taskId']}"
hold("exec-" + key)
out = root / t["files"][0]
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(t["action"] + "\n")
append("done.log", "task " + key)
"""

VERIFIER = r"""
status = "gaps_found" if (root / f".gaps-{number}").exists() else "passed"
Path(phase_dir, f"{prefix}-VERIFICATION.md").write_text(f"---\nstatus: {status}\n---\n")
append("done.log", f"verify {number}")
"""

ROADMAP = """\
# Roadmap

## Phases

- [ ] **Phase 1: Setup**
- [ ] **Phase 2: Core Work**
- [ ] **Phase 3: Polish & Ship**

## Phase Details

### Phase 1: Setup
**Goal**: a start

### Phase 2: Core Work
**Goal**: the middle

### Phase 3: Polish & Ship
**Goal**: the end
"""


def build(root: Path, roadmap: str = ROADMAP, folders: tuple[str, ...] = ("01-setup",)) -> Path:
    """A GSD-shaped project: a ROADMAP of three phases, a folder for phase 1 only (the run
    creates the others as the reference's discuss step does), the four role agents."""
    project = root / "project"
    (project / ".planning" / "phases").mkdir(parents=True)
    for name in folders:
        (project / ".planning" / "phases" / name).mkdir()
    (project / ".planning" / "config.json").write_text("{}")
    if roadmap:
        (project / ".planning" / "ROADMAP.md").write_text(roadmap)
    agents = project / ".looprail" / "agents"
    for name, body in (
        ("orchestrator", ORCHESTRATOR),
        ("planner", PLANNER),
        ("executor", EXECUTOR),
        ("verifier", VERIFIER),
    ):
        write_exe(agents / name, f"{COMMON}\n{body}", shebang=PY)
    return project


def done_log(project: Path) -> list[str]:
    path = project / "done.log"
    return path.read_text().splitlines() if path.exists() else []


def journal_runs(project: Path) -> list[dict]:
    out = run_cli("history", str(project), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["runs"]


PHASE_WORK = [
    "discuss {n}",
    "plan {n}",
    "task 0{n}-01-T1",
    "task 0{n}-02-T1",
    "verify {n}",
    "ship {n}",
]


def work(*phases: int) -> list[str]:
    return [line.format(n=n) for n in phases for line in PHASE_WORK]


GATE = r"""#!/bin/sh
# blocks ship:pre of phase N while .block-N exists
if [ -e "$LOOPRAIL_PROJECT/.block-$LOOPRAIL_PHASE" ]; then
  echo '{"block": true, "message": "phase blocked by the test"}'
else
  echo '{"block": false, "message": "ready"}'
fi
"""


def ship_gate(root: Path, project: Path) -> Path:
    """A capability folder with a blocking gate at `ship:pre` that refuses phase N while the
    project holds `.block-N`; returns the folder (for `--capabilities`)."""
    from tests.support import write_capability
    from tests.support.loop import halting_gate

    caps = root / "caps"
    write_capability(caps, halting_gate("shipgate", "ship:pre", "ready"))
    write_exe(project / ".looprail" / "checks" / "ready", GATE)
    return caps
