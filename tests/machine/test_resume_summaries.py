"""A SUMMARY written by a task that never finished is set aside on resume, also when the
task's start was lost with the process (its row still `pending`: the recorder holds a start
until its next commit)."""

from __future__ import annotations

import pytest

from looprail.journal import Journal
from looprail.journal.recorder import JournalRecorder
from looprail.machine.session.resume import Recovery, recover_summaries


@pytest.mark.parametrize("row", ["pending", "running", "failed"])
def test_a_summary_of_a_plan_with_an_unfinished_task_is_set_aside(tmp_path, row):
    phase = tmp_path / ".planning" / "phases" / "01-demo"
    phase.mkdir(parents=True)
    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("1", state=["execute"])
        tasks = [("01-01/T1", "01-01"), ("01-01/T2", "01-01"), ("01-02/T1", "01-02")]
        journal.wave_started(run_id, 1, tasks)
        recorder = JournalRecorder(journal, run_id)
        for key in ("01-01/T1", "01-02/T1"):
            recorder.task_started(key, plan_id=key[:5], wave=1)
            recorder.task_finished(key, status="done", duration_ms=1)
        # 01-01/T2 writes its plan's SUMMARY, then the process dies: its start was held
        # (row pending), written (running), or the task failed just before the kill.
        recorder.task_started("01-01/T2", plan_id="01-01", wave=1)
        if row == "pending":
            recorder.close()  # a kill: the held start is lost
        else:
            recorder.flush()
            if row == "failed":
                recorder.task_finished("01-01/T2", status="failed", duration_ms=1)
        (phase / "01-01-SUMMARY.md").write_text("partial\n")
        (phase / "01-02-SUMMARY.md").write_text("complete\n")
        assert {t.task_key: t.status for t in journal.tasks(run_id)}["01-01/T2"] == row
        recovery = Recovery()
        recover_summaries(tmp_path, phase, run_id, journal, recovery)
    assert not (phase / "01-01-SUMMARY.md").exists()
    aside = tmp_path / ".looprail" / "partial" / run_id / "tasks" / "01-01-SUMMARY.md"
    assert aside.read_text() == "partial\n"
    assert recovery.set_aside == [".planning/phases/01-demo/01-01-SUMMARY.md"]
    assert (phase / "01-02-SUMMARY.md").read_text() == "complete\n"  # every task done: kept
