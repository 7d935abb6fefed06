"""The project loop end to end: `looprail run --all` ships a three-phase project (local runtime,
deterministic agent scripts that write the real artifacts), a real SIGKILL in phase 2 (held at
a marker the agent waits on, never raced) is resumed by `run --all` again without re-running
phase 1 or a finished task, and `looprail resume` goes on with the phases after the run it
resumes."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from tests.support import run_cli, write_exe
from tests.support.procs import PY, alive, completed, pids_in, start_looprail, wait_for

# Every agent: log its pid, hold while .hold/<name> exists (after writing .reached/<name>),
# then do its work and log "done …" (the test reads what ran, and how often).
COMMON = r"""
import json, os, sys, time
from pathlib import Path
root = Path(os.environ["LOOPRAIL_PROJECT"])
req = json.load(sys.stdin)
phase_dir = Path(req["phase"]["dir"])
number = req["phase"]["number"]
prefix = phase_dir.name.split("-", 1)[0]
def append(name, text):
    with open(root / name, "a") as fh:
        fh.write(text + "\n")
        fh.flush()
        os.fsync(fh.fileno())
def hold(name):
    if (root / ".hold" / name).exists():
        (root / ".reached").mkdir(exist_ok=True)
        tmp = root / ".reached" / (name + ".tmp")
        tmp.write_text(str(os.getpid()))
        tmp.rename(root / ".reached" / name)
        while (root / ".hold" / name).exists():
            time.sleep(0.02)
append("pids.log", str(os.getpid()))
"""

ORCHESTRATOR = r"""
if req["step"] == "discuss":
    (phase_dir / f"{prefix}-CONTEXT.md").write_text(f"# Phase {number}\n")
    append("done.log", f"discuss {number}")
elif req["step"] == "ship":
    append("done.log", f"ship {number}")
"""

PLANNER = r"""
for plan, deps in (("01", "[]"), ("02", '["01"]')):
    out = f"out/{prefix}-{plan}.txt"
    (phase_dir / f"{prefix}-{plan}-PLAN.md").write_text(
        f'---\nphase: {phase_dir.name}\nplan: "{plan}"\ntype: execute\ndepends_on: {deps}\n'
        f'files_modified: ["{out}"]\nautonomous: true\nrequirements: [R-1]\n---\n\n'
        f"<objective>phase {number} plan {plan}</objective>\n\n<tasks>\n"
        f'<task type="auto">\n<name>write {out}</name>\n<files>{out}</files>\n'
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
Path(phase_dir, f"{prefix}-VERIFICATION.md").write_text("---\nstatus: passed\n---\nok\n")
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


def build(root: Path) -> Path:
    """A GSD-shaped project: a ROADMAP of three phases, a folder for phase 1 only (the run
    creates the others as the reference's discuss step does), the four role agents."""
    project = root / "project"
    (project / ".planning" / "phases" / "01-setup").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text("{}")
    (project / ".planning" / "ROADMAP.md").write_text(ROADMAP)
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


def test_run_all_ships_a_three_phase_project(tmp_path):
    project = build(tmp_path)
    out = run_cli("run", str(project), "--all", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["status"] == "shipped"
    assert summary["shipped"] == ["1", "2", "3"]
    assert [p["phase"] for p in summary["phases"]] == ["1", "2", "3"]
    assert all(p["status"] == "shipped" for p in summary["phases"])
    assert summary["notRun"] == [] and summary["finishedBefore"] == []
    # Each phase its own journaled run, in ROADMAP order; every role and task ran once.
    runs = journal_runs(project)
    assert [(r["phase"], r["status"]) for r in runs] == [
        ("1", "shipped"),
        ("2", "shipped"),
        ("3", "shipped"),
    ]
    assert [r["id"] for r in runs] == [p["runId"] for p in summary["phases"]]
    assert done_log(project) == work(1, 2, 3)
    # The folders the ROADMAP named were created with the reference's names.
    phases = sorted(p.name for p in (project / ".planning" / "phases").iterdir())
    assert phases == ["01-setup", "02-core-work", "03-polish-ship"]
    assert (project / "out" / "03-02.txt").read_text() == "write out/03-02.txt\n"

    # Everything is finished: again, nothing runs and nothing new is journaled.
    again = run_cli("run", str(project), "--all")
    assert again.returncode == 0, again.stderr
    assert "every phase is finished; nothing to run" in again.stdout
    assert len(journal_runs(project)) == 3
    assert done_log(project) == work(1, 2, 3)


def test_run_all_human_summary_names_the_shipped_phases(tmp_path):
    project = build(tmp_path)
    out = run_cli("run", str(project), "--all", "-q")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sum("shipped in" in line for line in lines) == 3
    assert lines[-1] == "phases: 1 shipped, 2 shipped, 3 shipped"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kill test needs /proc")
def test_a_kill_in_phase_2_resumes_without_running_phase_1_again(tmp_path):
    project = build(tmp_path)
    marker = "exec-02-02-T1"  # phase 2: plan 01 done, plan 02's task in flight
    (project / ".hold").mkdir()
    (project / ".hold" / marker).write_text("")
    proc = start_looprail("run", str(project), "--all")
    try:
        wait_for(
            lambda: (project / ".reached" / marker).exists() or proc.poll() is not None,
            timeout=90,
        )
        assert proc.poll() is None, proc.communicate()
        held = int((project / ".reached" / marker).read_text())
        proc.send_signal(signal.SIGKILL)  # looprail only: its children die on their own
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_for(lambda: not alive(held), timeout=10)
    (project / ".hold" / marker).unlink()
    before = done_log(project)
    assert before == [*work(1), "discuss 2", "plan 2", "task 02-01-T1"]
    runs = journal_runs(project)
    assert [(r["phase"], r["status"]) for r in runs] == [("1", "shipped"), ("2", "running")]
    # `status` shows where the project is, as well as the interrupted run.
    status = json.loads(run_cli("status", str(project), "--json").stdout)
    assert [(p["number"], p["status"]) for p in status["phases"]] == [
        ("1", "shipped"),
        ("2", "running"),
        ("3", "not started"),
    ]

    again = completed(start_looprail("run", str(project), "--all", "--json"), timeout=120)
    assert again.returncode == 0, again.stderr
    assert "accept-changes" not in again.stderr
    summary = json.loads(again.stdout.splitlines()[-1])
    assert summary["shipped"] == ["2", "3"]
    assert summary["finishedBefore"] == ["1"]
    assert summary["phases"][0]["resumed"] is True
    assert summary["phases"][0]["runId"] == runs[1]["id"]
    # Phase 1 never ran again; in phase 2 only the task in flight at the kill ran again.
    assert done_log(project) == [*before, *work(2)[3:], *work(3)]
    runs = journal_runs(project)
    assert [(r["phase"], r["status"]) for r in runs] == [
        ("1", "shipped"),
        ("2", "shipped"),
        ("3", "shipped"),
    ]
    assert [p for p in pids_in(project / "pids.log") if alive(p)] == []
