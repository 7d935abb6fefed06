"""Native hooks in real runs through the CLI (issue 19): the loop guard (`maxSelections`) holds
per run across any number of resumes, point lines count native hooks, a native block says it
blocked, a refusal names the point that refused, and `LOOPRAIL_TASK_ID` is plan-qualified."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from looprail.journal import Journal
from tests.support import REPO, run_cli

EXAMPLE = REPO / "examples" / "hello-loop"
CAPS = REPO / "examples" / "capabilities"

# The hooks.json, byte for byte.
PAUSE_ONCE = (
    '{"local":{"pause-once":{"description":"x","event":"execute:wave:post",'
    '"action":{"type":"interrupt","outcome":"pass"},"maxSelections":1}}}'
)


def global_hooks(home: Path, text: str) -> None:
    (home / ".looprail").mkdir(parents=True, exist_ok=True)
    (home / ".looprail" / "hooks.json").write_text(text)


def run(project: Path, *extra: str):
    return run_cli("run", str(project), "--phase", "1", "--capabilities", str(CAPS), *extra)


def run_id_of(stderr: str) -> str:
    match = re.search(r"^run (\w+): phase 1 of ", stderr, re.M)
    assert match, stderr
    return match.group(1)


def report_json(project: Path) -> dict:
    p = run_cli("report", "--project", str(project), "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def action_rows(report: dict, action: str) -> list[dict]:
    return [
        row["data"]
        for row in report["nativeHooks"]
        if row["data"].get("type") == "action" and row["data"].get("actionType") == action
    ]


def selections(project: Path, run_id: str) -> list[tuple[str, int]]:
    with Journal.open(project, create=False) as journal:
        return [
            (e.cap_id, e.data["count"]) for e in journal.events(run_id, kinds=["native_selection"])
        ]


def test_pause_once_pauses_once_and_the_resumed_run_ships(hello, _isolated_home):
    global_hooks(_isolated_home, PAUSE_ONCE)

    first = run(hello)
    assert first.returncode == 3, first.stderr
    run_id = run_id_of(first.stderr)
    assert f"run {run_id}: paused: interrupted by native hook local/pause-once" in first.stderr
    assert "wave 2" not in first.stderr  # it paused after wave 1
    assert selections(hello, run_id) == [("local/pause-once", 1)]

    second = run(hello)
    assert second.returncode == 0, second.stderr
    assert f"resuming run {run_id} (was paused)" in second.stderr
    assert "paused" not in second.stdout + second.stderr.replace("(was paused)", "")
    assert (
        "⊘ native hook local/pause-once: interrupt not selected "
        "(maxSelections 1 reached in this run)" in second.stderr
    )
    assert f"run {run_id}: shipped" in second.stdout

    report = report_json(hello)
    assert report["run"]["id"] == run_id and report["run"]["status"] == "shipped"
    interrupts = action_rows(report, "interrupt")
    assert [row["guarded"] for row in interrupts] == [False, True]  # one interrupt, one held back
    assert len(report["halts"]) == 1 and len(report["resumes"]) == 1
    assert selections(hello, run_id) == [("local/pause-once", 1)]  # the guard was not spent again
    text = run_cli("report", "--project", str(hello)).stdout
    assert text.count("action interrupt\n") == 1 and text.count("action interrupt (guarded)") == 1
    history = json.loads(run_cli("history", "--project", str(hello), "--json").stdout)
    assert [r["id"] for r in history["runs"]] == [run_id]  # one run, resumed


def test_a_guard_of_two_holds_across_four_resumes(hello, _isolated_home):
    """Two guarded hooks: an interrupt after each task (maxSelections 2), and a custom event at
    every `loop_settled` (maxSelections 2) that a logger counts. The run stops five times (two
    pauses, two refusals at verify:pre while a hold file exists, then ships): neither guard is
    ever spent a third time."""
    hooks = {
        "local": {
            "pause-after-task": {
                "description": "pause after a task",
                "event": "task_result",
                "action": {"type": "interrupt", "outcome": "pass"},
                "maxSelections": 2,
            },
            "settled": {
                "description": "announce every settle",
                "event": "loop_settled",
                "action": {"type": "emit-custom-event", "outcome": "pass", "name": "settled"},
                "maxSelections": 2,
            },
            "count-settles": {
                "description": "count the announcements",
                "event": "custom_event",
                "filter": {"name": "^settled$"},
                "shell": 'echo "$LOOPRAIL_RUN_ID" >> .looprail/settled.log',
            },
            "hold": {
                "description": "no verification while on hold",
                "event": "verify:pre",
                "shell": "test ! -f .looprail/hold",
            },
        }
    }
    global_hooks(_isolated_home, json.dumps(hooks))
    (hello / ".looprail" / "hold").write_text("")

    exits = []
    outputs = []
    for _ in range(4):
        p = run(hello, "--jobs", "1")
        exits.append(p.returncode)
        outputs.append(p.stderr)
    (hello / ".looprail" / "hold").unlink()
    last = run(hello, "--jobs", "1")
    exits.append(last.returncode)
    outputs.append(last.stderr)

    assert exits == [3, 3, 1, 1, 0], outputs[-1]
    run_id = run_id_of(outputs[0])
    assert all(f"resuming run {run_id}" in out for out in outputs[1:])
    assert "refused at verify:pre" in outputs[2] and "refused at verify:pre" in outputs[3]

    journaled = selections(hello, run_id)
    assert journaled.count(("local/pause-after-task", 1)) == 1
    assert journaled.count(("local/pause-after-task", 2)) == 1
    assert sorted(c for ref, c in journaled if ref == "local/settled") == [1, 2]
    assert len(journaled) == 4

    report = report_json(hello)
    interrupts = action_rows(report, "interrupt")
    assert [row["guarded"] for row in interrupts] == [False, False, True, True]  # 4 tasks
    emits = action_rows(report, "emit-custom-event")
    assert [row["guarded"] for row in emits] == [False, False, True, True, True]  # 5 settles
    assert (hello / ".looprail" / "settled.log").read_text().split() == [run_id, run_id]
    assert len(report["resumes"]) == 4
    tasks = [t for w in report["waves"] for p in w["plans"] for t in p["tasks"]]
    assert [(t["key"], t["attempts"]) for t in tasks] == [
        ("01-01/T1", 1),
        ("01-02/T1", 1),
        ("01-02/T2", 1),
        ("01-03/T1", 1),
    ]


def test_point_lines_count_the_native_hooks_that_run_there(hello, _isolated_home):
    hooks = {
        "local": {
            "discuss-check": {"description": "d", "event": "discuss:pre", "shell": "true"},
            "plan-lint": {"description": "d", "event": "plan:post", "shell": "exit 1"},
            "wave-two": {
                "description": "only wave 2",
                "event": "execute:wave:pre",
                "filter": {"wave": 2},
                "shell": "true",
            },
        }
    }
    global_hooks(_isolated_home, json.dumps(hooks))
    p = run(hello)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert "▸ discuss:pre: 1 native hook" in lines
    assert "  ✓ native hook local/discuss-check" in "\n".join(lines)
    assert "▸ execute:wave:pre (wave 1): no active hooks" in lines  # its filter does not match
    assert "▸ execute:wave:pre (wave 2): 1 native hook" in lines
    assert "▸ plan:pre: 1 contribution" in lines  # no native hook there
    assert "▸ plan:post: 1 step, 1 native hook" in lines
    assert "  ! native hook local/plan-lint reported at plan:post: exit 1" in lines
    assert not any("native native" in line for line in lines)


def test_a_native_block_at_execute_pre_says_so_everywhere(hello, _isolated_home):
    hooks = {
        "local": {
            "no-exec": {
                "description": "not yet",
                "event": "execute:pre",
                "shell": "echo 'tree is dirty' >&2; exit 4",
            }
        }
    }
    global_hooks(_isolated_home, json.dumps(hooks))
    p = run(hello)
    assert p.returncode == 1
    assert "onError" not in p.stderr
    assert "  ✗ native hook local/no-exec blocked execute:pre: exit 4" in p.stderr.splitlines()
    run_id = run_id_of(p.stderr)
    assert (
        f"run {run_id}: halted in plan, refused at execute:pre: "
        "blocked at execute:pre by native hook local/no-exec (exit 4)"
    ) in p.stderr

    status = run_cli("status", "--project", str(hello))
    assert "state: plan (refused at execute:pre by local/no-exec)" in status.stdout.splitlines()
    data = json.loads(run_cli("status", "--project", str(hello), "--json").stdout)
    assert data["refusedAt"] == {"point": "execute:pre", "capId": "local/no-exec"}
    assert data["run"]["state"] == ["plan"]
    text = run_cli("report", "--project", str(hello)).stdout
    assert "  state: plan (refused at execute:pre by local/no-exec)" in text.splitlines()

    # Once the hook lets it through, the resumed run is no longer "refused" anywhere.
    global_hooks(_isolated_home, "{}")
    p = run(hello)
    assert p.returncode == 0, p.stderr
    data = json.loads(run_cli("status", "--project", str(hello), "--json").stdout)
    assert data["refusedAt"] is None


def test_a_non_refusal_halt_names_no_point(hello, _isolated_home):
    (hello / ".looprail" / "agents" / "planner").write_text("#!/bin/sh\nexit 9\n")
    p = run(hello)
    assert p.returncode == 1
    assert re.search(r"halted in plan: plan: planner failed", p.stderr), p.stderr
    assert "refused at" not in p.stderr
    assert (
        json.loads(run_cli("status", "--project", str(hello), "--json").stdout)["refusedAt"] is None
    )


def test_native_task_hooks_see_the_plan_qualified_task_id(hello, _isolated_home):
    hooks = {
        "local": {
            "ids": {
                "description": "log what a task hook sees",
                "event": "task_call",
                "shell": 'echo "$LOOPRAIL_TASK_ID|$LOOPRAIL_TASK_PLAN" >> .looprail/ids.log',
            },
            "only-french": {
                "description": "filter on the qualified id",
                "event": "task_result",
                "filter": {"taskId": "^01-02/T1$"},
                "shell": 'echo "$LOOPRAIL_TASK_ID" > .looprail/french.log',
            },
        }
    }
    global_hooks(_isolated_home, json.dumps(hooks))
    # The executor (a runtime process) logs its own view: the plan-local id beside the plan.
    executor = hello / ".looprail" / "agents" / "executor"
    executor.write_text(
        executor.read_text().replace(
            "req = json.load(sys.stdin)",
            "import os\n"
            "with open(os.path.join(os.environ['LOOPRAIL_PROJECT'], 'exec.log'), 'a') as f:\n"
            "    f.write(os.environ['LOOPRAIL_PLAN_ID'] + ' ' + os.environ['LOOPRAIL_TASK_ID'] + '\\n')\n"
            "req = json.load(sys.stdin)",
            1,
        )
    )
    p = run(hello, "--jobs", "1")
    assert p.returncode == 0, p.stderr
    assert (hello / "exec.log").read_text().splitlines() == [
        "01-01 T1",
        "01-02 T1",
        "01-02 T2",
        "01-03 T1",
    ]
    seen = (hello / ".looprail" / "ids.log").read_text().split()
    assert seen == ["01-01/T1|01-01", "01-02/T1|01-02", "01-02/T2|01-02", "01-03/T1|01-03"]
    assert (hello / ".looprail" / "french.log").read_text().strip() == "01-02/T1"


# -- the engine and the recorder, directly -----------------------------------------------------


def _guarded_engine(tmp_path, **kwargs):
    from looprail.hooks.native import NativeHookEngine
    from looprail.hooks.native.parsing import validate_hooks_document

    doc = {
        "local": {
            "nudge": {
                "description": "d",
                "event": "loop_settled",
                "action": {"type": "interrupt", "outcome": "pass"},
                "maxSelections": 2,
            }
        }
    }
    loaded = validate_hooks_document(doc, file="hooks.json", scope="global")
    return NativeHookEngine(loaded.hooks, cwd=tmp_path, **kwargs)


def _selected(engine) -> bool:
    evaluation = engine.evaluate("loop_settled", {"status": "paused"})
    return bool(evaluation.effects)


def test_engine_continues_journaled_counts_and_persists_each_selection_first(tmp_path):
    persisted = []
    engine = _guarded_engine(
        tmp_path,
        selections={"local/nudge": 1},
        on_select=lambda hook, n: persisted.append((hook.ref, n, hook.entry.max_selections)),
    )
    assert [_selected(engine) for _ in range(3)] == [True, False, False]
    assert persisted == [("local/nudge", 2, 2)]
    assert engine.selections("local/nudge") == 2


def test_a_selection_that_cannot_be_persisted_is_not_spent_or_delivered(tmp_path):
    def refuse(hook, n):
        raise OSError("disk full")

    engine = _guarded_engine(tmp_path, on_select=refuse)
    with pytest.raises(OSError, match="disk full"):
        engine.evaluate("loop_settled", {"status": "paused"})
    assert engine.selections("local/nudge") == 0


@pytest.mark.parametrize("bad", [{"local/nudge": -1}, {"local/nudge": True}, {3: 1}])
def test_engine_refuses_nonsense_counts(tmp_path, bad):
    with pytest.raises(ValueError, match="selection counts"):
        _guarded_engine(tmp_path, selections=bad)


def test_a_selection_is_committed_at_once_with_what_was_held(tmp_path):
    """Unlike `native_hook` rows (held until the next state change), a selection commits in its
    own transaction, before the Action is delivered: a crash right after cannot lose it."""
    from looprail.journal import EventRecord
    from looprail.journal.recorder import JournalRecorder

    with Journal.open(tmp_path) as journal:
        run_id = journal.start_run("01", state=["discuss"])
        recorder = JournalRecorder(journal, run_id)
        recorder.event(EventRecord(kind="native_hook", cap_id="local/nudge", outcome="pass"))
        recorder.native_selected("local/nudge", 1, 2)
        recorder.native_selected("local/other", 3, None)
    # A second connection, as after a crash: no flush ever happened.
    with Journal.open(tmp_path, create=False) as journal:
        kinds = [e.kind for e in journal.events(run_id)]
        assert kinds[-3:] == ["native_hook", "native_selection", "native_selection"]
        assert JournalRecorder(journal, run_id).native_selections() == {
            "local/nudge": 1,
            "local/other": 3,
        }
        (first, _) = journal.events(run_id, kinds=["native_selection"])
        assert (first.cap_id, first.outcome, first.data) == (
            "local/nudge",
            "selected",
            {"count": 1, "maxSelections": 2},
        )


def test_task_hooks_say_which_task_they_blocked_or_reported(hello, _isolated_home):
    hooks = {
        "local": {
            "no-german": {
                "description": "German is not ready",
                "event": "task_call",
                "filter": {"taskId": "^01-02/T2$"},
                "shell": "exit 5",
            },
            "grumpy": {
                "description": "complains about the English task",
                "event": "task_result",
                "filter": {"plan": "^01-01$"},
                "shell": "false",
            },
        }
    }
    global_hooks(_isolated_home, json.dumps(hooks))
    p = run(hello, "--jobs", "1")
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert "  ! native hook local/grumpy reported at task_result of 01-01/T1: exit 1" in lines
    assert "  ✗ native hook local/no-german blocked task_call of 01-02/T2: exit 5" in lines
    assert lines[-1].endswith(
        ": halted in execute/wave_running, refused at task_call: blocked at task_call by "
        "native hook local/no-german (task 01-02/T2: exit 5)"
    )
    status = run_cli("status", "--project", str(hello)).stdout.splitlines()
    assert "state: execute/wave_running (refused at task_call by local/no-german)" in status


def test_dry_run_counts_native_hooks_in_the_point_line(hello, _isolated_home):
    hooks = {
        "local": {
            "discuss-check": {
                "description": "notes first",
                "event": "discuss:pre",
                "shell": "true",
            },
            "wave-two": {
                "description": "only wave 2",
                "event": "execute:wave:pre",
                "filter": {"wave": 2},
                "shell": "true",
            },
        }
    }
    global_hooks(_isolated_home, json.dumps(hooks))
    p = run(hello, "--dry-run")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "  discuss:pre: 1 native hook" in lines
    assert "    native        local/discuss-check: notes first" in lines
    assert "  execute:wave:pre (each wave): 1 native hook" in lines
    assert '    native        local/wave-two: only wave 2  (filter {"wave": 2})' in lines
    assert "  plan:pre: 1 active hook" in lines and "  discuss:post: no active hooks" in lines
