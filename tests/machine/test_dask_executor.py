"""Waves on a Dask cluster (`--executor dask-local:N`): real worker processes, a real kill.

Skipped when dask.distributed is not installed (it is in the `test` extra, so CI runs them)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.loop_overhead import make_phase
from tests.support import REPO, feature, write_capability

AGENT = """#!/bin/sh
# The executor agent: writes one file per task; with KILL_TASK set, the first time it runs
# that task it kills its own Dask worker (its parent process) mid-task.
if [ -n "$KILL_TASK" ] && [ "$LOOPRAIL_PLAN_ID/$LOOPRAIL_TASK_ID" = "$KILL_TASK" ] \\
   && [ ! -e "$KILL_MARK" ]; then
  touch "$KILL_MARK"
  worker=$PPID
  # On Linux every child runs under a process guard of its own, started by the worker: the
  # worker is the nearest ancestor that is not a guard.
  while grep -q guard.py "/proc/$worker/cmdline" 2>/dev/null; do
    worker=$(awk '{print $4}' "/proc/$worker/stat")
  done
  kill -9 "$worker"
  sleep 30
fi
mkdir -p "$LOOPRAIL_PROJECT/out"
hints=$(grep -c HINT-FOR-THE-EXECUTOR)  # the request on stdin: its role context
echo "$LOOPRAIL_PLAN_ID $LOOPRAIL_TASK_ID $hints" >> "$LOOPRAIL_PROJECT/out/$LOOPRAIL_PLAN_ID.txt"
echo "wrote $LOOPRAIL_TASK_ID"
"""


def dask_project(root: Path, plans: int = 2, tasks: int = 2) -> Path:
    project = make_phase(root, plans, tasks, 1)
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    (agents / "executor").write_text(AGENT)
    (agents / "orchestrator").write_text("#!/bin/sh\nexit 0\n")
    for agent in agents.iterdir():
        agent.chmod(0o755)
    return project


def journal_tasks(project: Path) -> dict[str, tuple[str, int]]:
    with sqlite3.connect(project / ".looprail" / "journal.sqlite") as conn:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(tasks)")]
        attempt = "attempts" if "attempts" in cols else "attempt"
        rows = conn.execute(f"SELECT task_key, status, {attempt} FROM tasks").fetchall()
    return {key: (status, n) for key, status, n in rows}


def test_without_dask_the_flag_says_how_to_install(tmp_path):
    project = dask_project(tmp_path)
    code = (
        "import sys; sys.modules['distributed'] = None\n"
        "from looprail.cli import main\n"
        f"sys.exit(main(['run', '--phase', '1', '--project', {str(project)!r}, "
        "'--executor', 'dask-local:2']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0
    # as this checkout was installed (pip, editable): the command that adds the extra here
    assert out.stderr.strip().endswith(f"-m pip install -e '{REPO}[dask]'"), out.stderr
    assert not (project / ".looprail" / "journal.sqlite").exists()  # nothing ran


@pytest.mark.parametrize("spec", ["dask-local:0", "dask-local:x", "dask:/nowhere", "ray://h:1"])
def test_a_bad_executor_spec_is_a_usage_error(tmp_path, spec, capsys):
    from looprail.cli import main

    project = dask_project(tmp_path)
    assert main(["run", "--phase", "1", "--project", str(project), "--executor", spec]) == 2
    assert capsys.readouterr().err.startswith("looprail: error: --executor")


distributed = pytest.importorskip("distributed")


def test_plans_run_on_local_cluster_workers_and_merge_back(tmp_path, capsys):
    from looprail.cli import main

    project = dask_project(tmp_path)
    hint = {"point": "execute:pre", "into": "executor", "produces": [], "consumes": []}
    hint["fragment"] = {"inline": "HINT-FOR-THE-EXECUTOR"}
    write_capability(tmp_path / "caps", feature("hint", contributions=[hint]))
    argv = ["run", "--phase", "1", "--project", str(project), "--executor", "dask-local:2"]
    code = main([*argv, "--capabilities", str(tmp_path / "caps")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "shipped" in captured.out and "4 tasks run" in captured.out
    # The workers' changes were merged into the project by the orchestrator.
    for plan in ("01-001", "01-002"):
        lines = (project / "out" / f"{plan}.txt").read_text().splitlines()
        assert [line.split()[1:] for line in lines] == [["T1", "1"], ["T2", "1"]]  # the hint too
        assert (project / ".planning/phases/01-bench" / f"{plan}-SUMMARY.md").exists()
    tasks = journal_tasks(project)
    assert len(tasks) == 4 and {s for s, _ in tasks.values()} == {"done"}
    assert "on tls://" in captured.err  # each task says which worker ran it (over TLS)


def test_a_worker_killed_mid_task_reruns_only_the_unfinished_tasks(tmp_path, monkeypatch, capsys):
    from looprail.cli import main

    project = dask_project(tmp_path, plans=2, tasks=3)
    monkeypatch.setenv("KILL_TASK", "01-001/T2")
    monkeypatch.setenv("KILL_MARK", str(tmp_path / "killed"))
    scratch = tmp_path / "tmp"  # the workers' temporary directory
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    code = main(["run", "--phase", "1", "--project", str(project), "--executor", "dask-local:2"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (tmp_path / "killed").exists()  # the worker really was killed mid-task
    # The killed worker never ran its teardown: its copies were removed by a worker still
    # alive, and the others' by their own teardown. Nothing is left in the temporary directory.
    assert sorted(p.name for p in scratch.glob("looprail-*")) == []
    # Task 1 of the plan ran once (never again), task 2 twice (the journal shows the retry).
    lines = (project / "out" / "01-001.txt").read_text().splitlines()
    assert [line.split()[1] for line in lines] == ["T1", "T2", "T3"]
    tasks = journal_tasks(project)
    assert tasks["01-001/T1"] == ("done", 1)
    assert tasks["01-001/T2"] == ("done", 2)
    assert tasks["01-001/T3"] == ("done", 1)
    with sqlite3.connect(project / ".looprail" / "journal.sqlite") as conn:
        messages = [
            m
            for (m,) in conn.execute(
                "SELECT message FROM events WHERE kind='task_started' AND message IS NOT NULL"
            )
        ]
    assert any("worker lost" in m for m in messages), json.dumps(messages)
