"""`status`, `history` and `report` are cheap on a journal of any size and never change it:
read-only connection, no argparse for a plain argv, no pydantic, and `report --json` printed
straight from SQL with the same bytes as the typed report."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprail.journal import EventRecord, Journal, journal_path
from tests.support import examples


def _rich_journal(project: Path) -> str:
    """One run with every kind of row a report shows (and a resume, a re-run task)."""
    with Journal.open(project) as j:
        run = j.start_run("01", state=["discuss"], machine_config={"jobs": 2})
        j.record(
            run,
            EventRecord(kind="transition", data={"source": ["plan"], "target": ["execute"]}),
            state=["execute", "wave_running"],
        )
        j.record(run, EventRecord(kind="point", point="execute:pre"))
        j.record(
            run,
            EventRecord(
                kind="hook",
                point="execute:pre",
                cap_id="lint",
                hook_kind="step",
                outcome="ok",
                duration_ms=5,
                message="fine\x1b[2J",
            ),
        )
        j.record(
            run,
            EventRecord(kind="gate_verdict", point="execute:pre", cap_id="cov", outcome="pass"),
        )
        j.wave_started(
            run, 1, [("01-01/T1", "01-01"), ("01-01/T2", "01-01"), ("01-02/T1", "01-02")]
        )
        j.record(
            run,
            EventRecord(
                kind="resolver",
                task_id="01-01/T1",
                cap_id="tracker",
                outcome="resolved",
                data={"trackerId": "GH-1"},
            ),
        )
        j.task_started(run, "01-01/T1", plan_id="01-01", wave=1)
        j.task_finished(run, "01-01/T1", status="done")
        j.task_started(run, "01-01/T2", plan_id="01-01", wave=1)
        j.task_finished(run, "01-01/T2", status="failed", duration_ms=7)
        j.record(
            run,
            EventRecord(
                kind="agent_call",
                data={
                    "agent": "claude",
                    "kind": "task",
                    "name": "T1",
                    "planId": "01-01",
                    "taskId": "T1",
                    "ok": True,
                    "inputTokens": 10,
                    "outputTokens": 3,
                    "costUsd": 0.25,
                },
            ),
        )
        j.record(
            run,
            EventRecord(kind="native_hook", cap_id="n", outcome="ok", data={"type": "action"}),
        )
        j.record(run, EventRecord(kind="warning", message="careful", point="verify:pre"))
        j.record(run, EventRecord(kind="wave_finished", wave=1, outcome="failed"))
        j.record(run, EventRecord(kind="halted", point="verify:pre", cap_id="cov", message="no"))
        j.finish_run(run, "halted", "gate cov blocked")
        j.resume_run(run, inputs_digest={"a": "1"})
        j.task_started(run, "01-01/T2", plan_id="01-01", wave=1)
        j.task_started(run, "99/T9", plan_id=None, wave=None)  # a task outside any wave
        j.finish_run(run, "shipped")
    return run


def _typed_json(project: Path, run_id: str) -> str:
    from looprail.journal import build_report

    with Journal.open_readonly(project) as j:
        return json.dumps(build_report(j, run_id), ensure_ascii=False)


def _sql_json(project: Path, run_id: str | None) -> str:
    from looprail.journal import report_data, summary

    conn = summary.open_journal(project)
    try:
        return json.dumps(
            report_data.report_json(conn, summary.journal_file(project), run_id),
            ensure_ascii=False,
        )
    finally:
        conn.close()


def test_report_json_from_sql_is_the_typed_report(tmp_path):
    run = _rich_journal(tmp_path)
    assert _sql_json(tmp_path, run) == _typed_json(tmp_path, run)
    assert _sql_json(tmp_path, None) == _typed_json(tmp_path, run)
    assert _sql_json(tmp_path, run[:8].lower()) == _typed_json(tmp_path, run)


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "transition",
                "point",
                "hook",
                "gate_verdict",
                "warning",
                "halted",
                "wave_started",
                "wave_finished",
                "resolver",
                "task",
                "agent_call",
                "native_hook",
            ]
        ),
        st.integers(0, 3),
        st.sampled_from([None, "execute:pre", "verify:pre"]),
    ),
    max_size=30,
)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=EVENTS)
def test_report_json_matches_the_typed_report_on_random_runs(events):
    with tempfile.TemporaryDirectory(prefix="looprail-report-") as tmp:
        project = Path(tmp)
        with Journal.open(project) as j:
            run = j.start_run("01")
            for kind, n, point in events:
                if kind == "task":
                    try:
                        j.task_started(run, f"p{n}/T{n}", plan_id=f"p{n}", wave=n or None)
                        if n % 2:
                            j.task_finished(run, f"p{n}/T{n}", status="done")
                    except Exception:  # a done task is not started again
                        pass
                elif kind == "wave_started":
                    j.wave_started(run, n, [(f"p{n}/T{n}", f"p{n}"), (f"q{n}/T1", f"q{n}")])
                else:
                    j.record(
                        run,
                        EventRecord(
                            kind=kind,
                            point=point,
                            wave=n,
                            task_id=f"p{n}/T{n}",
                            cap_id=f"c{n}",
                            outcome="ok" if n % 2 else None,
                            duration_ms=n * 3 if n else None,
                            data={"trackerId": f"T-{n}", "costUsd": n / 3, "ok": n > 1},
                        ),
                    )
        assert _sql_json(project, run) == _typed_json(project, run)


def _cli(project: Path, *argv: str) -> subprocess.CompletedProcess:
    code = "import sys; from looprail.cli import main; raise SystemExit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_read_commands_never_change_the_journal(tmp_path):
    _rich_journal(tmp_path)
    path = journal_path(tmp_path)
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    for argv in (["status"], ["history", "--json"], ["report"], ["report", "--json"]):
        res = _cli(tmp_path, *argv)
        assert res.returncode == 0, res.stderr
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime


def test_an_older_schema_is_not_migrated_by_a_reader(tmp_path):
    _rich_journal(tmp_path)
    db = sqlite3.connect(journal_path(tmp_path))
    db.execute("PRAGMA user_version = 0")
    db.commit()
    db.close()
    # Version 0 with tables is "corrupt" to the writer; the readers say so in one line too.
    for argv in (["status"], ["report", "--json"]):
        res = _cli(tmp_path, *argv)
        assert res.returncode == 1 and "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_damage_met_while_reading_is_one_line(tmp_path):
    with Journal.open(tmp_path) as j:
        run = j.start_run("01")
        j.wave_started(run, 1, [(f"t{n}", "p" * 300) for n in range(300)])
    path = journal_path(tmp_path)
    data = bytearray(path.read_bytes())
    page = 4096
    # Keep the header page and the schema (page 1); trash the last pages (task rows).
    for offset in range(len(data) - 4 * page, len(data)):
        data[offset] = 0x5A
    path.write_bytes(bytes(data))
    for argv in (["status"], ["history"], ["report", "--json"]):
        res = _cli(tmp_path, *argv)
        assert res.returncode == 1, (argv, res.stdout)
        assert "Traceback" not in res.stderr
        assert "is corrupt" in res.stderr and len(res.stderr.strip().splitlines()) == 1
