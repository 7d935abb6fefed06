"""One task protocol (`LoopRunner.run_task`) whatever runs the body: the same plan through the
local thread executor and through the Dask executor journals the same events in the same order,
per task: the `execute:task` resolver, `read_first`, the `task_call` hooks, the task's start
and end, the `task_result` hooks. Real runs: a real resolver process, a real executor agent,
real native hooks, real Dask worker processes (skipped without dask.distributed)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.machine.test_chart import resolver_cap
from tests.support.loop import caps_dir, plan_md, task_xml, write_plan

# Writes out/<task>.txt; the second task's read_first names the first one's file, so its
# read_first passes only once the first task's change is in the project.
AGENT = """#!/bin/sh
mkdir -p "$LOOPRAIL_PROJECT/out"
echo "$LOOPRAIL_PLAN_ID $LOOPRAIL_TASK_ID" > "$LOOPRAIL_PROJECT/out/$LOOPRAIL_TASK_ID.txt"
"""
# The tracker gives each task its content; T2 must read what T1 wrote.
RESOLVER = (
    "tid = sys.argv[1]\n"
    'first = "spec.md" if tid.endswith("-1") else "out/T1.txt"\n'
    'print(json.dumps({"description": "from tracker " + tid, "read_first": [first]}))\n'
)
KINDS = ("resolver", "read_first", "native_hook", "task_started", "task_finished")


def project_at(root: Path) -> Path:
    project = root / "project"
    phase = project / ".planning" / "phases" / "01-demo"
    phase.mkdir(parents=True)
    (phase / "01-CONTEXT.md").write_text("ctx\n")
    (phase / "01-VERIFICATION.md").write_text("---\nstatus: passed\n---\n")
    (project / "spec.md").write_text("spec\n")
    tasks = [
        task_xml(f"t{i}", attrs=f' tracker-id="bd:A-{i}"', files=[f"out/T{i}.txt"]) for i in (1, 2)
    ]
    write_plan(project, "01", plan_md("01", tasks=tasks))
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    (agents / "executor").write_text(AGENT)
    (agents / "orchestrator").write_text("#!/bin/sh\nexit 0\n")
    for agent in agents.iterdir():
        agent.chmod(0o755)
    return project


@pytest.fixture
def task_hooks(_isolated_home):
    d = _isolated_home / ".looprail"
    d.mkdir(parents=True, exist_ok=True)
    hooks = {
        f"on-{event}": {"description": f"sees {event}", "event": event, "shell": "true"}
        for event in ("task_call", "task_result")
    }
    (d / "hooks.json").write_text(json.dumps({"local": hooks}))


def run(project: Path, caps: Path, executor=None) -> tuple[str, str | None]:
    from looprail.machine.progress import Progress
    from looprail.machine.runner import RunOptions
    from looprail.machine.session.phase import load_project, run_phase

    out = run_phase(
        load_project(project, [caps]),
        "1",
        options=RunOptions(executor=executor),
        progress=Progress(quiet=True),
    )
    return out.result.status, out.result.reason


def task_events(project: Path) -> list[tuple[str, str | None, str | None]]:
    """(kind, task, what) of every task-path event, in journal order; `what` is a native
    hook's event, a resolver's or read_first's outcome, a task's end."""
    with sqlite3.connect(project / ".looprail" / "journal.sqlite") as conn:
        rows = conn.execute(
            f"SELECT kind, task_id, outcome, data FROM events WHERE kind IN {KINDS} ORDER BY seq"
        ).fetchall()
    out = []
    for kind, task, outcome, data in rows:
        if kind == "native_hook":
            out.append((kind, None, json.loads(data)["event"]))
        else:
            out.append((kind, task, outcome if kind != "task_started" else None))
    return out


def expected() -> list[tuple[str, str | None, str | None]]:
    order = []
    for t in ("01-01/T1", "01-01/T2"):
        order += [
            ("resolver", t, "resolved"),
            ("read_first", t, "ok"),
            ("native_hook", None, "task_call"),
            ("task_started", t, None),
            ("task_finished", t, "done"),
            ("native_hook", None, "task_result"),
        ]
    return order


def test_the_local_executor_runs_the_task_protocol_in_order(tmp_path, task_hooks):
    project = project_at(tmp_path / "local")
    caps = caps_dir(tmp_path, resolver_cap(tmp_path, RESOLVER))
    assert run(project, caps) == ("shipped", None)
    assert task_events(project) == expected()


def test_dask_and_local_executors_journal_the_same_task_protocol(tmp_path, task_hooks):
    pytest.importorskip("distributed")
    from looprail.machine.dask.executor import DaskExecutor

    caps = caps_dir(tmp_path, resolver_cap(tmp_path, RESOLVER))
    local = project_at(tmp_path / "local")
    assert run(local, caps) == ("shipped", None)
    remote = project_at(tmp_path / "dask")
    with DaskExecutor("dask-local:1") as executor:
        assert run(remote, caps, executor) == ("shipped", None)
    assert task_events(remote) == task_events(local) == expected()
    # The worker's changes were merged back before the next task began (T2's read_first).
    assert (remote / "out" / "T2.txt").read_text() == "01-01 T2\n"
