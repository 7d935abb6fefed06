"""Kill matrix: a real `looprail run` is SIGKILLed at exact moments (agent scripts hold at a
marker file until the test kills looprail), then `looprail run` again. Each resumed run must
reach the same artifacts and send the same role requests (with the same role-context fragments)
as an uninterrupted run, run no finished task twice, need no `--accept-changes`, and leave no
process alive. Plus a hypothesis test with random kill times."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import examples, feature, write_capability, write_exe
from tests.support.loop import demo_phase, halting_gate, halting_step
from tests.support.procs import HOLDING, PY, alive, completed, pids_in, start_run, wait_for

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kill matrix needs Linux /proc"
)

# Every agent: log its request (normalised), its pid, then hold while .hold/<name> exists
# (after writing .reached/<name>), do its work, log "done <name>".
COMMON = (
    r"""
import json, os, sys, time
from pathlib import Path
root = Path(os.environ["LOOPRAIL_PROJECT"])
raw = sys.stdin.read()
req = json.loads(raw) if raw.strip() else {}
"""
    + HOLDING
    + r"""
if req:
    shown = {k: req.get(k) for k in ("kind", "name", "role", "step", "planId", "taskId", "wave")}
    shown["roleContext"] = req.get("roleContext")
    append("requests.log", json.dumps(shown, sort_keys=True))
"""
)

PLANNER = r"""
phase = Path(req["phase"]["dir"])
plans = {
    "01": ("[]", ["a1", "a2"]),
    "02": ("[]", ["b1"]),
    "03": ('["01", "02"]', ["c1"]),
}
for n, (deps, tasks) in plans.items():
    body = "\n".join(
        f'<task type="auto">\n<name>{t}</name>\n<files>out/{t}</files>\n'
        f"<action>write {t}</action>\n<verify>test -f out/{t}</verify>\n"
        f"<acceptance_criteria>\n- out/{t} exists\n</acceptance_criteria>\n<done>{t}</done>\n</task>"
        for t in tasks
    )
    files = json.dumps(["out/" + t for t in tasks])
    text = (
        f'---\nphase: 01-demo\nplan: "{n}"\ntype: execute\ndepends_on: {deps}\n'
        f"files_modified: {files}\nautonomous: true\nrequirements: [R-1]\n---\n\n"
        f"<objective>plan {n}</objective>\n\n<tasks>\n{body}\n</tasks>\n"
    )
    (phase / f"01-{n}-PLAN.md").write_text(text)
    hold("planner-" + n)
hold("planner-done")
append("done.log", "planner")
"""

EXECUTOR = r"""
t = req["task"]
key = t["planId"] + "-" + t["taskId"]
if (root / ".summary-early").exists() and t["taskId"] == "T2":
    # Like GSD executors: the plan's SUMMARY is written during its last task.
    Path(req["phase"]["dir"], t["planId"] + "-SUMMARY.md").write_text("partial summary\n")
hold("exec-" + key)
out = root / t["files"][0]
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(t["action"] + "\n")
append("done.log", "task " + key)
"""

VERIFIER = r"""
hold("verifier")
Path(req["phase"]["dir"], "01-VERIFICATION.md").write_text("---\nstatus: passed\n---\nok\n")
append("done.log", "verifier")
"""

SHIP = r"""
hold("ship")
(root / "SHIPPED").write_text("shipped\n")
append("done.log", "ship")
"""

WAVE_PRE = r"""
hold("wave-pre-" + os.environ["LOOPRAIL_WAVE"])
append("done.log", "wave-pre " + os.environ["LOOPRAIL_WAVE"])
"""

GATE = r"""
hold("gate")
print(json.dumps({"block": False, "message": "ready"}))
"""


def build(root: Path) -> tuple[Path, Path]:
    project, phase = demo_phase(root)
    lr = project / ".looprail"
    exe(lr / "agents" / "planner", PLANNER)
    exe(lr / "agents" / "executor", EXECUTOR)
    exe(lr / "agents" / "verifier", VERIFIER)
    exe(lr / "agents" / "orchestrator", SHIP)
    exe(lr / "skills" / "gsd-wave-pre", WAVE_PRE)
    exe(lr / "checks" / "ready", GATE)
    caps = root / "caps"

    def contribution(point: str, into: str, text: str) -> dict:
        return {
            "point": point,
            "into": into,
            "fragment": {"inline": text},
            "produces": [],
            "consumes": [],
        }

    write_capability(
        caps,
        feature(
            "ctx",
            contributions=[
                contribution("plan:pre", "planner", "PLAN-FRAGMENT"),
                contribution("execute:pre", "executor", "EXEC-PRE"),
                contribution("execute:wave:pre", "executor", "WAVE-PRE"),
                contribution("execute:pre", "verifier", "VERIFY-FROM-EXECUTE"),
            ],
        ),
    )
    write_capability(caps, halting_step("wavepre", "wave-pre", "execute:wave:pre"))
    write_capability(caps, halting_gate("shipgate", "ship:pre", "ready"))
    return project, caps


def lines(project: Path, name: str) -> list[str]:
    p = project / name
    return p.read_text().splitlines() if p.exists() else []


def artifacts(project: Path) -> dict[str, str]:
    """Everything the loop produced, outside looprail's own folder and the test's logs."""
    skip = {"requests.log", "pids.log", "done.log"}
    found = {}
    for path in sorted(project.rglob("*")):
        rel = path.relative_to(project).as_posix()
        if not path.is_file() or rel.split("/")[0] in (".looprail", ".hold", ".reached"):
            continue
        if rel in skip:
            continue
        found[rel] = path.read_text()
    return found


def requests(project: Path) -> list[dict]:
    return [json.loads(x) for x in lines(project, "requests.log")]


def unique(reqs: list[dict]) -> list[str]:
    """Each distinct request once (one in flight at the kill is sent again), sorted: plans of a
    parallel wave send theirs in any order."""
    return sorted({json.dumps(r, sort_keys=True) for r in reqs})


def exe(path: Path, body: str) -> None:
    write_exe(path, f"{COMMON}\n{body}", shebang=PY)


def pids(project: Path) -> list[int]:
    return pids_in(project / "pids.log", missing_ok=True)


def finish(project: Path, caps: Path, jobs: int = 2) -> subprocess.CompletedProcess:
    return completed(start_run(project, caps=caps, jobs=jobs))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    home = tmp_path_factory.mktemp("home-baseline")
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        project, caps = build(tmp_path_factory.mktemp("baseline"))
        done = finish(project, caps)
    finally:
        if old is not None:
            os.environ["HOME"] = old
    assert done.returncode == 0, done.stderr
    assert "not loaded" not in done.stderr, done.stderr
    return artifacts(project), unique(requests(project)), requests(project)


def kill_at(project: Path, caps: Path, marker: str, *, jobs: int = 2) -> list[int]:
    """Run until agents reach every marker (`a+b`: both, e.g. two parallel plans), SIGKILL
    looprail there; return the held pids."""
    markers = marker.split("+")
    (project / ".hold").mkdir(exist_ok=True)
    for m in markers:
        (project / ".hold" / m).write_text("")
    proc = start_run(project, caps=caps, jobs=jobs)

    def reached() -> bool:
        return all((project / ".reached" / m).exists() for m in markers)

    try:
        wait_for(lambda: reached() or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, proc.communicate()
        held = [int((project / ".reached" / m).read_text()) for m in markers]
        proc.send_signal(signal.SIGKILL)  # looprail only: its children must die on their own
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The guards got PDEATHSIG and killed the held agents (and would their whole trees).
    wait_for(lambda: not any(alive(p) for p in held), timeout=10)
    for m in markers:
        (project / ".hold" / m).unlink()
    return held


MOMENTS = [
    # (marker, jobs, why)
    ("planner-01", 1, "planner killed after writing one of three plans"),
    ("planner-done", 1, "planner wrote every plan, killed before it returned"),
    ("exec-01-01-T2", 1, "mid-wave: a1 done, a2 in flight"),
    ("wave-pre-2", 1, "between waves: wave 1 finished, wave 2's pre step running"),
    ("exec-01-01-T2+exec-01-02-T1", 2, "mid-wave with parallel plans"),
    ("verifier", 2, "during verify"),
    ("gate", 2, "inside the ship:pre gate"),
]


@pytest.mark.parametrize(
    "marker,jobs", [(m, j) for m, j, _ in MOMENTS], ids=[m for m, *_ in MOMENTS]
)
def test_kill_then_resume_equals_an_uninterrupted_run(tmp_path, baseline, marker, jobs):
    want_artifacts, want_requests, _ = baseline
    project, caps = build(tmp_path)
    kill_at(project, caps, marker, jobs=jobs)
    done = finish(project, caps, jobs)
    assert done.returncode == 0, done.stderr
    assert "accept-changes" not in done.stderr + done.stdout
    assert "resuming run" in done.stdout + done.stderr
    # Same artifacts, same role requests with the same role-context fragments.
    assert artifacts(project) == want_artifacts
    assert unique(requests(project)) == want_requests
    # No finished task (or role) ran twice: each completed exactly once.
    finished = lines(project, "done.log")
    assert len(finished) == len(set(finished)), finished
    # Nothing the runs started is alive.
    assert [p for p in pids(project) if alive(p)] == []


def test_a_killed_planners_partial_plan_is_set_aside_not_counted(tmp_path):
    project, caps = build(tmp_path)
    kill_at(project, caps, "planner-01", jobs=1)
    phase = project / ".planning" / "phases" / "01-demo"
    assert (phase / "01-01-PLAN.md").exists()  # the partial output is there after the kill
    done = finish(project, caps, 1)
    assert done.returncode == 0, done.stderr
    assert "partial output" in done.stdout + done.stderr
    aside = list((project / ".looprail" / "partial").rglob("01-01-PLAN.md"))
    assert len(aside) == 1
    # The planner ran again and wrote all three plans.
    assert lines(project, "done.log").count("planner") == 1
    assert sorted(p.name for p in phase.glob("*-PLAN.md")) == [
        "01-01-PLAN.md",
        "01-02-PLAN.md",
        "01-03-PLAN.md",
    ]


def test_resumed_task_requests_carry_every_fragment(tmp_path, baseline):
    """The issue's symptom: after a kill mid-wave, resumed role requests got 0 of 2 fragments."""
    project, caps = build(tmp_path)
    kill_at(project, caps, "exec-01-03-T1", jobs=1)
    before = len(requests(project))
    done = finish(project, caps, 1)
    assert done.returncode == 0, done.stderr
    after = requests(project)[before:]
    task = next(r for r in after if r["kind"] == "task")
    assert task["roleContext"] == {"executor": ["EXEC-PRE", "WAVE-PRE"]}
    verify = next(r for r in after if r["step"] == "verify")
    # the contribution, then looprail's evidence (docs/loop.md, "Verification")
    assert verify["roleContext"]["verifier"][0] == "VERIFY-FROM-EXECUTE"
    assert verify["roleContext"]["verifier"][1].startswith("## Verification")


@settings(
    max_examples=examples(3),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(delay=st.floats(min_value=0.0, max_value=3.0))
def test_a_kill_at_a_random_moment_then_resume_ships_the_same(tmp_path_factory, baseline, delay):
    want_artifacts, want_requests, _ = baseline
    project, caps = build(tmp_path_factory.mktemp("random"))
    proc = start_run(project, caps=caps, jobs=2)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    # Whatever was running is gone within moments (PDEATHSIG → the guard kills its tree).
    wait_for(lambda: not [p for p in pids(project) if alive(p)], timeout=10)
    done = finish(project, caps, 2)
    assert done.returncode == 0, done.stderr
    assert artifacts(project) == want_artifacts
    assert unique(requests(project)) == want_requests
    # At-least-once: only what was in flight at the kill (at most `jobs` units, or a task whose
    # agent had returned and whose finish was not journaled yet) can have run twice.
    finished = lines(project, "done.log")
    assert len(finished) - len(set(finished)) <= 2, finished
    assert [p for p in pids(project) if alive(p)] == []


def test_a_summary_written_by_a_task_in_flight_does_not_mark_its_plan_done(tmp_path, baseline):
    want_artifacts, want_requests, _ = baseline
    project, caps = build(tmp_path)
    (project / ".summary-early").write_text("")
    kill_at(project, caps, "exec-01-01-T2", jobs=1)
    summary = project / ".planning" / "phases" / "01-demo" / "01-01-SUMMARY.md"
    assert summary.read_text() == "partial summary\n"
    (project / ".summary-early").unlink()
    done = finish(project, caps, 1)
    assert done.returncode == 0, done.stderr
    assert "01-01-SUMMARY.md was moved" in done.stdout + done.stderr
    assert "task 01-01-T2" in lines(project, "done.log")  # the in-flight task ran again
    assert artifacts(project) == want_artifacts
    assert unique(requests(project)) == want_requests
