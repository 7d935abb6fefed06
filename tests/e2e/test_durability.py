"""Durable runs with real crashes: `looprail run` is SIGKILLed at several points, resumed, and
the journal and artifacts prove finished tasks ran exactly once, in-flight ones ran again, and
the end state equals an uninterrupted run. Plus one-run-at-a-time and changed inputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.errors import JournalError
from looprail.journal import Journal
from tests.support import examples, feature, write_capability, write_exe
from tests.support.loop import demo_phase, halting_gate, halting_step, plan_md, task_xml
from tests.support.procs import PY, killpg, start_run, wait_for

# Every slow executable: log "start", wait while .slow/<name> exists (a test removes it or
# kills us), log "end". `name` is how the test targets one unit of work.
SLOW = r"""
import json, os, sys, time
from pathlib import Path
root = Path(os.environ.get("LOOPRAIL_PROJECT") or os.getcwd())
def mark(name, what):
    with open(root / "events.log", "a") as fh:
        fh.write(f"{what} {name}\n")
        fh.flush()
        os.fsync(fh.fileno())
def slow(name):
    mark(name, "start")
    while (root / ".slow" / name.replace("/", "_")).exists():
        time.sleep(0.05)
    mark(name, "end")
"""


def build(tmp_path: Path) -> tuple[Path, Path]:
    project, phase = demo_phase(tmp_path)
    (phase / "01-01-PLAN.md").write_text(
        plan_md(
            "01",
            files=["out/a"],
            tasks=[task_xml("a1", files=["out/a1"]), task_xml("a2", files=["out/a2"])],
        )
    )
    (phase / "01-02-PLAN.md").write_text(
        plan_md("02", files=["out/b"], tasks=[task_xml("b1", files=["out/b1"])])
    )
    (phase / "01-03-PLAN.md").write_text(
        plan_md(
            "03",
            depends_on=["01", "02"],
            files=["out/c"],
            tasks=[task_xml("c1", files=["out/c1"], attrs=' tracker-id="trk:C-1"')],
        )
    )
    agents = project / ".looprail" / "agents"
    exe(
        agents / "executor",
        SLOW
        + r"""
req = json.load(sys.stdin)
t = req["task"]
key = t["planId"] + "/" + t["taskId"]
slow(key)
out = root / t["files"][0]
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(t["action"] + "\n")
""",
    )
    exe(
        agents / "verifier",
        SLOW
        + r"""
req = json.load(sys.stdin)
slow("verify")
Path(req["phase"]["dir"], "01-VERIFICATION.md").write_text("---\nstatus: passed\n---\n")
""",
    )
    exe(agents / "orchestrator", SLOW + "slow('ship')\n")
    exe(
        project / ".looprail" / "skills" / "gsd-wave-pre",
        SLOW + "slow('wave-pre-' + os.environ['LOOPRAIL_WAVE'])\n",
    )
    exe(
        project / ".looprail" / "checks" / "gate",
        SLOW + 'slow("gate")\nprint(json.dumps({"block": False, "message": "fine"}))\n',
    )
    exe(
        project / ".looprail" / "bin" / "resolver",
        SLOW
        + r"""
slow("resolver")
print(json.dumps({"description": "resolved " + sys.argv[1]}))
""",
    )
    caps = tmp_path / "caps"
    write_capability(caps, halting_step("pre", "wave-pre", "execute:wave:pre"))
    write_capability(caps, halting_gate("guard", "execute:post", "gate"))
    write_capability(
        caps,
        feature(
            "trk",
            taskContentResolver={
                "trackerPrefix": "trk",
                "invoke": {
                    "binary": ".looprail/bin/resolver",
                    "args": ["{{id}}"],
                    "timeoutMs": 60000,
                },
            },
        ),
    )
    return project, caps


def exe(path: Path, body: str) -> None:
    write_exe(path, body, shebang=PY)


def start(project: Path, caps: Path, *extra: str) -> subprocess.Popen:
    return start_run(project, *extra, caps=caps, jobs=2, new_session=True)


def log(project: Path) -> list[str]:
    p = project / "events.log"
    return p.read_text().splitlines() if p.exists() else []


def slow(project: Path, *names: str) -> None:
    d = project / ".slow"
    d.mkdir(exist_ok=True)
    for n in names:
        (d / n.replace("/", "_")).touch()


def release(project: Path) -> None:
    for f in (project / ".slow").glob("*"):
        f.unlink()


def outputs(project: Path) -> dict[str, str]:
    files = sorted((project / "out").glob("*")) + sorted(
        (project / ".planning" / "phases" / "01-demo").glob("*.md")
    )
    return {f.name: f.read_text() for f in files}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run: what every resumed run must end up equal to."""
    project, caps = build(tmp_path_factory.mktemp("ref"))
    proc = start(project, caps)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return outputs(project)


def journaled(project: Path) -> dict[str, str]:
    """Each task's status as the journal has committed it (read while the run goes on)."""
    try:
        with Journal.open_readonly(project) as jr:
            run = jr.latest_run()
            return {t.task_key: t.status for t in jr.tasks(run.id)} if run else {}
    except JournalError:  # not created yet, or still an empty file
        return {}


KILL_POINTS = {
    # name: (what to hold slow, the log line that means "we are there now")
    "before-wave": ("wave-pre-1", "start wave-pre-1"),
    "mid-wave": ("01-01/T2", "start 01-01/T2"),
    "during-resolver": ("resolver", "start resolver"),
    "during-gate": ("gate", "start gate"),
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_sigkill_then_resume(tmp_path, reference, point):
    project, caps = build(tmp_path)
    held, line = KILL_POINTS[point]
    slow(project, held)
    proc = start(project, caps)
    wait_for(lambda: line in log(project), timeout=30)
    if point == "mid-wave":
        # Hold the moment, don't race it: T1's `done` row may still be on its way to disk when
        # T2's agent logs its start (slower under coverage), and T2's start is held by the
        # recorder for up to 50 ms (docs/journal.md): wait until both are committed.
        wait_for(
            lambda: (
                journaled(project).get("01-01/T1") == "done"
                and journaled(project).get("01-01/T2") == "running"
            ),
            timeout=30,
        )
    killpg(proc)
    release(project)

    # The journal is the truth about what finished: a task whose body ended but whose `done`
    # row was not committed before the kill is in flight, and runs again (at-least-once).
    with Journal.open(project, create=False) as jr:
        run = jr.latest_run()
        assert run.status == "running"  # the crash left it unfinished
        run_id = run.id
        finished_before = {t.task_key for t in jr.tasks(run_id) if t.status == "done"}
        in_flight = {t.task_key for t in jr.tasks(run_id) if t.status == "running"}

    crashed = len(log(project))
    proc = start(project, caps)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"resuming run {run_id}" in err

    lines = log(project)
    task_ends = [ln.split()[1] for ln in lines if ln.startswith("end ") and "/" in ln]
    task_starts = [ln.split()[1] for ln in lines if ln.startswith("start ") and "/" in ln]
    # Started after the crash. A task the journal shows in flight may have been killed before
    # its agent logged anything (the kill can land between the spawn and the agent's first
    # line), so what counts is that the resumed run started it again.
    restarted = [ln.split()[1] for ln in lines[crashed:] if ln.startswith("start ") and "/" in ln]
    for task in finished_before:
        assert task_starts.count(task) == 1, f"{task} finished before the crash and ran again"
    for task in in_flight:
        assert task in restarted, f"{task} was in flight and did not run again"
        assert task_starts.count(task) <= 2, f"{task} ran more than twice"
    assert sorted(set(task_ends)) == ["01-01/T1", "01-01/T2", "01-02/T1", "01-03/T1"]
    if point == "mid-wave":
        assert "01-01/T2" in in_flight and "01-01/T1" in finished_before
    with Journal.open(project, create=False) as jr:
        run = jr.get_run(run_id)
        assert run.status == "shipped" and run.state == ["shipped"]
        tasks = {t.task_key: t for t in jr.tasks(run_id)}
        assert all(t.status == "done" for t in tasks.values())
        if point == "mid-wave":
            assert tasks["01-01/T2"].attempt == 2
        resumed = [e for e in jr.events(run_id) if e.kind == "run_resumed"]
        assert len(resumed) == 1
    assert outputs(project) == reference


def test_second_run_is_refused_then_stale_lock_taken_over(tmp_path):
    project, caps = build(tmp_path)
    slow(project, "01-01/T1")
    first = start(project, caps)
    wait_for(lambda: "start 01-01/T1" in log(project), timeout=30)
    second = start(project, caps)
    out, err = second.communicate(timeout=30)
    assert second.returncode != 0
    assert "Traceback" not in err
    assert str(first.pid) in err or "run" in err  # names the running one
    assert len(err.strip().splitlines()) == 1
    killpg(first)
    release(project)
    third = start(project, caps)
    out, err = third.communicate(timeout=60)
    assert third.returncode == 0, err
    assert "resuming run" in err


def test_changed_inputs_between_crash_and_resume(tmp_path):
    project, caps = build(tmp_path)
    slow(project, "01-01/T1")
    proc = start(project, caps)
    wait_for(lambda: "start 01-01/T1" in log(project), timeout=30)
    killpg(proc)
    release(project)
    plan = project / ".planning/phases/01-demo/01-02-PLAN.md"
    plan.write_text(plan.read_text().replace("b1", "b1 changed"))
    refused = start(project, caps)
    out, err = refused.communicate(timeout=60)
    assert refused.returncode == 1
    assert "changed: .planning/phases/01-demo/01-02-PLAN.md" in err and "--accept-changes" in err
    accepted = start(project, caps, "--accept-changes")
    out, err = accepted.communicate(timeout=60)
    assert accepted.returncode == 0, err


def test_report_lists_every_hook_of_the_example(tmp_path):
    import shutil

    from tests.support import REPO, run_cli

    project = tmp_path / "hello"
    shutil.copytree(REPO / "examples" / "hello-loop", project)
    caps = REPO / "examples" / "capabilities"
    p = run_cli("run", str(project), "--phase", "1", "--capabilities", str(caps))
    assert p.returncode == 0, p.stderr
    p = run_cli("report", "--project", str(project), "--json")
    report = json.loads(p.stdout)
    text = json.dumps(report)
    for cap in ("style-guide", "changelog", "release-gate"):
        assert cap in text
    p = run_cli("report", "--project", str(project))
    assert "release-gate" in p.stdout and "changelog" in p.stdout


def test_crash_after_the_planner_wrote_plans_resumes_without_accept_changes(tmp_path):
    """Plans the run wrote itself are not 'changed inputs': the digest follows the run."""
    project, caps = build(tmp_path)
    phase = project / ".planning/phases/01-demo"
    written = {p.name: p.read_text() for p in phase.glob("*-PLAN.md")}
    for p in phase.glob("*-PLAN.md"):
        p.unlink()
    planner = project / ".looprail" / "agents" / "planner"
    exe(
        planner,
        "import json, sys\nfrom pathlib import Path\n"
        "req = json.load(sys.stdin)\n"
        f"plans = {written!r}\n"
        "for name, text in plans.items():\n"
        "    Path(req['phase']['dir'], name).write_text(text)\n",
    )
    write_capability(
        caps,
        feature(
            "lint",
            skills=["plan-lint"],
            steps=[
                {
                    "point": "plan:post",
                    "ref": {"skill": "plan-lint"},
                    "produces": [],
                    "consumes": [],
                    "onError": "halt",
                }
            ],
        ),
    )
    exe(project / ".looprail" / "skills" / "gsd-plan-lint", SLOW + "slow('plan-lint')\n")
    slow(project, "plan-lint")
    proc = start(project, caps)
    wait_for(lambda: "start plan-lint" in log(project), timeout=30)
    killpg(proc)
    release(project)
    proc = start(project, caps)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "inputs changed" not in err


def test_ctrl_c_during_a_parallel_wave_stops_promptly_and_the_run_resumes(tmp_path):
    """SIGINT while two plans' tasks run in worker threads: their children are killed at
    once (not at their timeouts), the run is journaled halted, and a later run resumes it."""
    project, caps = build(tmp_path)
    slow(project, "01-01/T1", "01-02/T1")
    proc = start(project, caps)
    wait_for(lambda: {"start 01-01/T1", "start 01-02/T1"} <= set(log(project)), timeout=30)
    os.kill(proc.pid, signal.SIGINT)
    began = time.monotonic()
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - began < 15
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    release(project)
    with Journal.open(project, create=False) as jr:
        run = jr.latest_run()
        assert run.status == "halted" and "interrupted" in (run.halt_reason or "")
    proc = start(project, caps)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "resuming run" in err


def build_parallel(tmp_path: Path, plans: int) -> Path:
    """`plans` independent one-task plans (one wave); each executor logs its start, waits while
    `.slow/all` exists, logs its end and writes its output."""
    project, phase = demo_phase(tmp_path)
    for i in range(1, plans + 1):
        (phase / f"01-{i:02d}-PLAN.md").write_text(
            plan_md(f"{i:02d}", files=[f"out/p{i}"], tasks=[task_xml("t", files=[f"out/p{i}"])])
        )
    agents = project / ".looprail" / "agents"
    exe(
        agents / "executor",
        SLOW
        + r"""
req = json.load(sys.stdin)
t = req["task"]
key = t["planId"] + "/" + t["taskId"]
mark(key, "start")
while (root / ".slow" / "all").exists():
    time.sleep(0.02)
out = root / t["files"][0]
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(key + "\n")
mark(key, "end")
""",
    )
    exe(
        agents / "verifier",
        SLOW
        + r"""
req = json.load(sys.stdin)
Path(req["phase"]["dir"], "01-VERIFICATION.md").write_text("---\nstatus: passed\n---\n")
""",
    )
    exe(agents / "orchestrator", "pass\n")
    return project


@pytest.mark.parametrize("delay", [0.0, 0.04, 0.05, 0.06, 0.07, 0.1])
def test_sigkill_while_finishes_share_commits_never_reruns_a_finished_task(tmp_path, delay):
    """Six tasks end at once (`--jobs 6`): their finishes share group commits, and starts
    commit without an fsync of their own. A SIGKILL at any moment of that: every task the
    journal shows done ran exactly once over both runs, every other one ran again, and the
    resumed run ships."""
    plans = 6
    project = build_parallel(tmp_path, plans)
    slow(project, "all")
    proc = start_run(project, jobs=plans, new_session=True)
    wait_for(lambda: sum(ln.startswith("start ") for ln in log(project)) == plans, timeout=60)
    release(project)  # every task ends now
    time.sleep(delay)
    killpg(proc)

    with Journal.open(project, create=False) as jr:
        run_id = jr.latest_run().id
        rows = {t.task_key: t for t in jr.tasks(run_id)}
        done_before = {k for k, t in rows.items() if t.status == "done"}
        assert set(rows) == {f"01-{i:02d}/T1" for i in range(1, plans + 1)}
        assert all(t.attempt == 1 for t in rows.values())  # every start was committed

    again = start_run(project, jobs=plans, new_session=True)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    starts = [ln.split()[1] for ln in log(project) if ln.startswith("start ")]
    for key in rows:
        expected = 1 if key in done_before else 2
        assert starts.count(key) == expected, (key, done_before, starts)
    with Journal.open(project, create=False) as jr:
        tasks = {t.task_key: t for t in jr.tasks(run_id)}
        assert all(t.status == "done" for t in tasks.values())
        assert {k for k, t in tasks.items() if t.attempt == 1} == done_before
        finished = [e.task_id for e in jr.events(run_id, kinds=["task_finished"])]
        assert sorted(finished) == sorted(rows)  # each finish journaled exactly once


def build_in_process(tmp_path: Path, plans: int = 12, tasks: int = 4) -> Path:
    """`plans` plans of `tasks` tasks in three waves, run by `--agent scripted`: every task
    runs in looprail's own process (no child, so no `process` event carries its start: each
    start is held until the next commit, or the flusher's)."""
    project, phase = demo_phase(tmp_path)
    for i in range(1, plans + 1):
        deps = [f"{i - plans // 3:02d}"] if i > plans // 3 else []
        (phase / f"01-{i:02d}-PLAN.md").write_text(
            plan_md(
                f"{i:02d}",
                depends_on=deps,
                files=[f"out/p{i}"],
                tasks=[task_xml(f"t{j}", files=[f"out/p{i}"]) for j in range(tasks)],
            )
        )
    (phase / "01-VERIFICATION.md").write_text("---\nstatus: passed\n---\n")
    return project


def _done_count(project: Path) -> int:
    """Tasks the journal shows done (-1 while it holds no run yet)."""
    import sqlite3

    from looprail.journal import journal_path

    path = journal_path(project)
    if not path.exists():
        return -1
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        if not db.execute("SELECT count(*) FROM runs").fetchone()[0]:
            return -1
        return db.execute("SELECT count(*) FROM tasks WHERE status = 'done'").fetchone()[0]
    except sqlite3.Error:  # the schema is not there yet
        return -1
    finally:
        db.close()


@settings(
    max_examples=examples(4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    after_done=st.integers(min_value=0, max_value=40),
    extra=st.floats(min_value=0.0, max_value=0.03),
    jobs=st.sampled_from([1, 3]),
)
def test_sigkill_among_held_starts_never_reruns_a_finished_task(
    tmp_path_factory, after_done, extra, jobs
):
    """A real `looprail run` of 48 in-process tasks (starts held, one commit per task) is
    SIGKILLed at a random moment (once the journal shows `after_done` tasks done, then a
    random instant), then resumed: no task the journal showed done is started again, every
    task row's attempt is the number of starts journaled for it (a start lost in the kill
    was never counted), and the resumed run ships with its seal intact."""
    project = build_in_process(tmp_path_factory.mktemp("held"))
    proc = start_run(project, "--agent", "scripted", jobs=jobs, new_session=True)
    end = time.monotonic() + 60
    while _done_count(project) < after_done and proc.poll() is None:
        assert time.monotonic() < end, "the run never got there"
        time.sleep(0.002)
    time.sleep(extra)
    if proc.poll() is None:
        killpg(proc)
    else:
        proc.communicate()

    with Journal.open(project, create=False) as jr:
        run = jr.latest_run()
        run_id = run.id
        done_before = {t.task_key for t in jr.tasks(run_id) if t.status == "done"}
        killed = run.status == "running"

    again = start_run(project, "--agent", "scripted", jobs=jobs, new_session=True)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    with Journal.open(project, create=False) as jr:
        jr.verify_run(run_id)
        assert jr.get_run(run_id).status == "shipped"
        events = jr.events(run_id)
        tasks = {t.task_key: t for t in jr.tasks(run_id)}
    assert len(tasks) == 48 and all(t.status == "done" for t in tasks.values())
    resumed = [e.seq for e in events if e.kind == "run_resumed"]
    assert len(resumed) == (1 if killed else 0)
    later = [e for e in events if resumed and e.seq > resumed[0]]
    started_again = {e.task_id for e in later if e.kind == "task_started"}
    assert not started_again & done_before, sorted(started_again & done_before)
    for key, row in tasks.items():
        starts = [e for e in events if e.kind == "task_started" and e.task_id == key]
        assert row.attempt == len(starts), (key, row.attempt, len(starts))
        assert [e.data["attempt"] for e in starts] == list(range(1, len(starts) + 1))
        finished = [e for e in events if e.kind == "task_finished" and e.task_id == key]
        assert [e.outcome for e in finished] == ["done"]  # journaled done exactly once
