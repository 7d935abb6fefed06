"""The execution report: its stable JSON shape (keys and their order) and its text form, built
from a journal with deterministic timestamps."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest

from looprail.journal import EventRecord, Journal, JournalError, build_report, render_report_text
from looprail.journal.report import format_duration
from tests.support import REPO


class StepClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def hook(point: str, cap: str, kind: str, outcome: str, ms: int, message: str | None = None):
    return EventRecord(
        kind="hook",
        point=point,
        cap_id=cap,
        hook_kind=kind,  # type: ignore[arg-type]
        outcome=outcome,
        duration_ms=ms,
        message=message,
    )


@pytest.fixture
def journal_and_run(tmp_path):
    """A run that plans, executes one wave (a done, a failed and an in-flight task), is halted
    by a gate, resumed, and fails."""
    journal = Journal.open(tmp_path, clock=StepClock())
    run = journal.start_run(
        "01",
        run_id="01JRUN",
        state=["discuss"],
        machine_config={"flavor": "gsd", "jobs": 2, "autonomous": True, "options": {}},
    )
    transition = EventRecord(
        kind="transition", data={"source": "discuss", "target": "plan", "event": "agree"}
    )
    journal.record(run, transition, state=["plan"])
    journal.record(run, EventRecord(kind="point", point="plan:pre", data={"hooks": 2}))
    journal.record(run, hook("plan:pre", "lint", "step", "ok", 12))
    journal.record(run, hook("plan:pre", "docs", "contribution", "ok", 0))
    transition = EventRecord(
        kind="transition", data={"source": "plan", "target": "execute", "event": "approve_plan"}
    )
    journal.record(run, transition, state=["execute", "wave_running"])
    journal.wave_started(run, 1, [("01-01:1", "01-01"), ("01-01:2", "01-01"), ("01-02:1", "01-02")])
    resolver = EventRecord(
        kind="resolver",
        task_id="01-01:1",
        cap_id="jira",
        outcome="ok",
        duration_ms=40,
        data={"tracker_id": "JIRA:ABC-1", "prefix": "JIRA"},
    )
    journal.record(run, resolver)
    journal.task_started(run, "01-01:1")
    journal.task_started(run, "01-02:1")
    journal.task_finished(run, "01-01:1")
    warning = EventRecord(
        kind="warning",
        point="execute:pre",
        cap_id="lint",
        message="step lint failed (exit 3); onError skip",
    )
    journal.record(run, warning)
    journal.task_started(run, "01-01:2")
    journal.task_finished(run, "01-01:2", status="failed", message="executor exited 1")
    native = EventRecord(
        kind="native_hook",
        cap_id="local/guard",
        outcome="pass",
        duration_ms=5,
        message="tool_result",
        data={"hook_ref": "local/guard", "event": "tool_result"},
    )
    journal.record(run, native)
    journal.record(run, EventRecord(kind="point", point="verify:pre", data={"hooks": 1}))
    journal.record(run, hook("verify:pre", "coverage", "gate", "blocked", 30, "coverage 61% < 80%"))
    verdict = EventRecord(
        kind="gate_verdict",
        point="verify:pre",
        cap_id="coverage",
        outcome="block",
        message="coverage 61% < 80%",
    )
    journal.record(run, verdict)
    reason = "gate coverage blocked: coverage 61% < 80%"
    journal.record(
        run, EventRecord(kind="halted", point="verify:pre", cap_id="coverage", message=reason)
    )
    journal.finish_run(run, "halted", reason)
    journal.resume_run(run, inputs_digest={})
    journal.record(run, EventRecord(kind="wave_finished", wave=1, outcome="failed"))
    journal.finish_run(run, "failed", "task 01-01:2 failed")
    yield journal, run
    journal.close()


def test_report_json_keys_are_stable_and_ordered(journal_and_run):
    journal, run = journal_and_run
    report = build_report(journal, run)
    json.dumps(report)  # plain JSON all the way down
    assert list(report) == [
        "reportVersion",
        "run",
        "transitions",
        "points",
        "waves",
        "nativeHooks",
        "warnings",
        "halts",
        "resumes",
        "agentCalls",
        "spend",
    ]
    assert report["reportVersion"] == 1
    assert list(report["run"]) == [
        "id",
        "phase",
        "status",
        "startedAt",
        "endedAt",
        "durationMs",
        "haltReason",
        "state",
        "pid",
        "host",
        "machineConfig",
        "tasks",
    ]
    assert list(report["run"]["tasks"]) == ["pending", "running", "done", "failed"]
    assert list(report["transitions"][0]) == ["seq", "ts", "source", "target", "event"]
    point = report["points"][0]
    assert list(point) == ["point", "dispatches", "hooks", "verdicts"]
    assert list(point["hooks"][0]) == [
        "seq",
        "ts",
        "wave",
        "kind",
        "capId",
        "outcome",
        "durationMs",
        "message",
    ]
    verdicts = report["points"][1]["verdicts"]
    assert list(verdicts[0]) == ["seq", "ts", "wave", "capId", "outcome", "message"]
    wave = report["waves"][0]
    assert list(wave) == ["wave", "startedAt", "endedAt", "durationMs", "outcome", "plans"]
    assert list(wave["plans"][0]) == ["planId", "tasks"]
    task = wave["plans"][0]["tasks"][0]
    assert list(task) == [
        "key",
        "planId",
        "wave",
        "status",
        "attempts",
        "startedAt",
        "endedAt",
        "durationMs",
        "resolver",
        "checks",
    ]
    assert list(task["resolver"]) == [
        "seq",
        "trackerId",
        "capId",
        "outcome",
        "durationMs",
        "message",
    ]
    assert list(report["nativeHooks"][0]) == [
        "seq",
        "ts",
        "capId",
        "outcome",
        "durationMs",
        "message",
        "data",
    ]
    assert list(report["warnings"][0]) == ["seq", "ts", "point", "capId", "taskId", "message"]
    assert list(report["halts"][0]) == list(report["warnings"][0])
    assert list(report["resumes"][0]) == [
        "seq",
        "ts",
        "previousStatus",
        "previousPid",
        "inFlight",
        "inputsChanged",
    ]


def test_report_json_values(journal_and_run):
    journal, run = journal_and_run
    report = build_report(journal, run)
    header = report["run"]
    assert header | {"pid": None, "host": None} == {
        "id": "01JRUN",
        "phase": "01",
        "status": "failed",
        "startedAt": "2026-01-02T03:04:06.000Z",
        "endedAt": "2026-01-02T03:04:28.000Z",
        "durationMs": 22000,
        "haltReason": "task 01-01:2 failed",
        "state": ["execute", "wave_running"],
        "pid": None,
        "host": None,
        "machineConfig": {"flavor": "gsd", "jobs": 2, "autonomous": True, "options": {}},
        "tasks": {"pending": 0, "running": 1, "done": 1, "failed": 1},
    }
    assert [(t["source"], t["target"], t["event"]) for t in report["transitions"]] == [
        ("discuss", "plan", "agree"),
        ("plan", "execute", "approve_plan"),
    ]
    # Points in order of first occurrence; hooks in dispatch order.
    assert [(p["point"], p["dispatches"]) for p in report["points"]] == [
        ("plan:pre", 1),
        ("verify:pre", 1),
    ]
    assert [(h["kind"], h["capId"], h["outcome"]) for h in report["points"][0]["hooks"]] == [
        ("step", "lint", "ok"),
        ("contribution", "docs", "ok"),
    ]
    gate = report["points"][1]["hooks"][0]
    assert (gate["outcome"], gate["durationMs"], gate["message"]) == (
        "blocked",
        30,
        "coverage 61% < 80%",
    )
    assert report["points"][1]["verdicts"][0]["outcome"] == "block"
    wave = report["waves"][0]
    assert (wave["wave"], wave["outcome"], wave["durationMs"]) == (1, "failed", 15000)
    tasks = {
        t["key"]: (t["status"], t["attempts"], t["durationMs"])
        for plan in wave["plans"]
        for t in plan["tasks"]
    }
    assert [plan["planId"] for plan in wave["plans"]] == ["01-01", "01-02"]
    assert tasks == {
        "01-01:1": ("done", 1, 2000),
        "01-01:2": ("failed", 1, 1000),
        "01-02:1": ("running", 1, None),
    }
    assert wave["plans"][0]["tasks"][0]["resolver"]["trackerId"] == "JIRA:ABC-1"
    assert report["nativeHooks"][0]["data"] == {"hook_ref": "local/guard", "event": "tool_result"}
    assert [w["message"] for w in report["warnings"]] == ["step lint failed (exit 3); onError skip"]
    assert report["halts"][0]["capId"] == "coverage"
    resume = report["resumes"][0]
    assert (resume["previousStatus"], resume["inFlight"], resume["inputsChanged"]) == (
        "halted",
        ["01-02:1"],
        [],
    )


def test_report_text(journal_and_run):
    journal, run = journal_and_run
    text = render_report_text(build_report(journal, run))
    assert text == (
        "Run 01JRUN · phase 01 · failed\n"
        "  started 2026-01-02T03:04:06.000Z · ended 2026-01-02T03:04:28.000Z · took 22.0s\n"
        "  state: execute/wave_running\n"
        "  reason: task 01-01:2 failed\n"
        "  tasks: 1 done, 1 failed, 1 running, 0 pending\n"
        "\n"
        "Transitions\n"
        "  discuss → plan  (agree)\n"
        "  plan → execute  (approve_plan)\n"
        "\n"
        "Points\n"
        "  plan:pre  (1 dispatch)\n"
        "    ✓  step          lint                      ok            12ms\n"
        "    ✓  contribution  docs                      ok             0ms\n"
        "  verify:pre  (1 dispatch)\n"
        "    ✗  gate          coverage                  blocked       30ms  coverage 61% < 80%\n"
        "    ✗  verdict       coverage                  block               coverage 61% < 80%\n"
        "\n"
        "Waves\n"
        "  wave 1  failed  15.0s\n"
        "    plan 01-01\n"
        "      ✓  01-01:1               done      attempt 1  2.0s  tracker JIRA:ABC-1 ok\n"
        "      ✗  01-01:2               failed    attempt 1  1.0s\n"
        "    plan 01-02\n"
        "      …  01-02:1               running   attempt 1  -\n"
        "\n"
        "Native hooks\n"
        "  ✓  local/guard               pass           5ms  at tool_result  tool_result\n"
        "\n"
        "Warnings\n"
        "  execute:pre lint: step lint failed (exit 3); onError skip\n"
        "\n"
        "Halts\n"
        "  verify:pre coverage: gate coverage blocked: coverage 61% < 80%\n"
        "\n"
        "Resumes\n"
        f"  2026-01-02T03:04:26.000Z from halted (pid {os.getpid()}) re-running 01-02:1\n"
    )


def test_a_fresh_run_reports_only_its_header(tmp_path):
    with Journal.open(tmp_path, clock=StepClock()) as journal:
        run = journal.start_run("03", run_id="01JNEW", state=["discuss"])
        report = build_report(journal, run)
    sections = ("transitions", "points", "waves", "warnings")
    assert [report[s] for s in sections] == [[], [], [], []]
    assert report["run"]["durationMs"] is None
    assert render_report_text(report) == (
        "Run 01JNEW · phase 03 · running\n"
        "  started 2026-01-02T03:04:06.000Z\n"
        "  state: discuss\n"
        "  tasks: 0 done, 0 failed, 0 running, 0 pending\n"
    )


def test_build_report_accepts_a_prefix_and_refuses_an_unknown_run(journal_and_run):
    journal, _ = journal_and_run
    assert build_report(journal, "01jr")["run"]["id"] == "01JRUN"
    with pytest.raises(JournalError, match="no run 'nope'"):
        build_report(journal, "nope")


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "-"),
        (0, "0ms"),
        (999, "999ms"),
        (1500, "1.5s"),
        (61_000, "1m01s"),
        (3_720_000, "1h02m"),
    ],
)
def test_format_duration(ms, text):
    assert format_duration(ms) == text


def _key_mismatches(documented, built, where="$"):
    """Where the documented report's keys differ from a built one's (names or order), looking
    into every object both have and the first row of every list both have rows in."""
    if isinstance(documented, dict) and isinstance(built, dict):
        if list(documented) != list(built):
            return [f"{where}: {list(documented)} != {list(built)}"]
        pairs = [(documented[k], built[k], f"{where}.{k}") for k in documented]
    elif isinstance(documented, list) and isinstance(built, list) and documented and built:
        pairs = [(documented[0], built[0], f"{where}[0]")]
    else:
        return []
    return [m for d, b, w in pairs for m in _key_mismatches(d, b, w)]


def test_the_documented_example_has_the_keys_of_a_built_report_in_order(journal_and_run):
    journal, run = journal_and_run
    journal.record(
        run,
        EventRecord(
            kind="agent_call",
            data={"agent": "claude", "kind": "task", "planId": "01-01", "taskId": "1", "ok": True},
        ),
    )
    journal.record(run, EventRecord(kind="native_hook", cap_id="local/x", outcome="pass"))
    built = build_report(journal, run)
    doc = (REPO / "docs" / "journal.md").read_text()
    example = json.loads(doc.split("```json", 1)[1].split("```", 1)[0])
    assert built["spend"] is not None and built["nativeHooks"]
    assert _key_mismatches(example, built) == []


def test_a_finished_wave_is_done_even_in_a_journal_from_before_its_outcome(tmp_path):
    with Journal.open(tmp_path, clock=StepClock()) as journal:
        run = journal.start_run("03", run_id="01JOLD", state=["execute"])
        for wave, outcome in ((1, None), (2, "done")):  # wave 1: written before `outcome`
            journal.record(run, EventRecord(kind="wave_started", wave=wave, data={"plans": []}))
            journal.record(run, EventRecord(kind="wave_finished", wave=wave, outcome=outcome))
        journal.record(run, EventRecord(kind="wave_started", wave=3, data={"plans": []}))
        report = build_report(journal, run)
    waves = [(w["wave"], w["outcome"]) for w in report["waves"]]
    assert waves == [(1, "done"), (2, "done"), (3, None)]
