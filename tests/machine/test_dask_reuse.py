"""Per-plan cost on a Dask cluster: each worker keeps its project copies from plan to plan and
wave to wave (a worker plugin), and the reports a wave leaves on the scheduler are dropped when
it ends. A real LocalCluster of processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import REPO

sys.path.insert(0, str(REPO))

pytest.importorskip("distributed")

from benchmarks.loop_overhead import make_phase


def project_at(root: Path, plans: int, waves: int) -> Path:
    project = make_phase(root, plans, 2, waves)
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    (agents / "executor").write_text(
        '#!/bin/sh\nmkdir -p "$LOOPRAIL_PROJECT/out"\n'
        'echo "$LOOPRAIL_TASK_ID" >> "$LOOPRAIL_PROJECT/out/$LOOPRAIL_PLAN_ID.txt"\n'
    )
    (agents / "orchestrator").write_text("#!/bin/sh\nexit 0\n")
    for agent in agents.iterdir():
        agent.chmod(0o755)
    return project


def copies(dask_worker) -> list[str]:
    pool = next(p for name, p in dask_worker.plugins.items() if name.startswith("looprail-copies"))
    return sorted(p.name for p in pool.root.iterdir() if p.name.startswith("copy-"))


def looprail_reports(dask_scheduler) -> list[str]:
    """looprail's topics on the scheduler that still hold events (changes and all)."""
    topics = dask_scheduler._broker._topics
    return [name for name, t in topics.items() if name.startswith("looprail-") and t.events]


def test_workers_reuse_their_copies_and_waves_leave_no_reports_behind(tmp_path):
    from looprail.machine.dask.executor import DaskExecutor
    from looprail.machine.progress import Progress
    from looprail.machine.runner import RunOptions
    from looprail.machine.session.phase import load_project, run_phase

    with DaskExecutor("dask-local:2") as executor:
        for n in range(2):  # two runs of 3 waves of 4 plans each, one cluster
            project = project_at(tmp_path / f"p{n}", 12, 3)
            out = run_phase(
                load_project(project, []),
                "1",
                options=RunOptions(executor=executor),
                progress=Progress(quiet=True),
            )
            assert out.result.status == "shipped", out.result.reason
            for i in range(1, 13):
                lines = (project / "out" / f"01-{i:03d}.txt").read_text().split()
                assert lines == ["T1", "T2"]
        # 24 plans ran on 2 single-threaded workers: each kept at most one copy per project.
        per_worker = executor.client.run(copies)
        assert sum(len(v) for v in per_worker.values()) <= 4
        assert executor.client.run_on_scheduler(looprail_reports) == []
