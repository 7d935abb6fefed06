"""An executor that cannot go on ends with `BLOCKED: <reason>` (its brief asks for that as its
last line): the task becomes a checkpoint the user answers, not a failure. Without a terminal
the run pauses (exit 3) naming the reason; `looprail answer` records the answer; the next run
calls the executor for that task again with the answer, and the task completes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support import run_cli, write_exe
from tests.support.loop import demo_phase

# Blocks on T2 until it is handed an answer; logs every request it gets.
EXECUTOR = r"""
import json, os, sys
from pathlib import Path
root = Path(os.environ["LOOPRAIL_PROJECT"])
t = json.loads(sys.stdin.read())["task"]
answers = (t.get("planSections") or {}).get("checkpoint_answers")
with open(root / "requests.jsonl", "a") as fh:
    fh.write(json.dumps({"task": t["planId"] + "/" + t["taskId"], "answers": answers}) + "\n")
if t["taskId"] == "T2" and not answers:
    print("I wrote nothing: the plan names no database.\n")
    print("Deviations:\n- [rule 4] a database is an architectural choice")
    print("BLOCKED: choose the database (postgres or sqlite)")
else:
    print("Done as planned.")
"""
VERIFIER = 'printf -- "---\\nstatus: passed\\n---\\n" > "$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md"\n'


def auto(name: str) -> str:
    return (
        f'<task type="auto">\n<name>{name}</name>\n<files>out/{name}</files>\n'
        f"<action>write {name}</action>\n<verify>ok</verify>\n<done>{name}</done>\n</task>"
    )


def blocking_project(root: Path) -> Path:
    project, phase = demo_phase(root)
    (phase / "01-01-PLAN.md").write_text(
        '---\nphase: 01-demo\nplan: "01"\ntype: execute\ndepends_on: []\n'
        'files_modified: ["out/first"]\nautonomous: true\nrequirements: [R-1]\n---\n\n'
        "<objective>The store</objective>\n\n<tasks>\n"
        + "\n\n".join(auto(n) for n in ("first", "store", "last"))
        + "\n</tasks>\n"
    )
    agents = project / ".looprail" / "agents"
    write_exe(agents / "executor", EXECUTOR, shebang=sys.executable)
    write_exe(agents / "verifier", VERIFIER)
    write_exe(agents / "orchestrator", 'touch "$LOOPRAIL_PROJECT/SHIPPED"\n')
    return project


def requests(project: Path) -> list[dict]:
    return [json.loads(line) for line in (project / "requests.jsonl").read_text().splitlines()]


def test_blocked_executor_pauses_and_the_answer_goes_back_to_it(tmp_path):
    from looprail.machine.answers import pending_checkpoints

    project = blocking_project(tmp_path)
    out = run_cli("run", str(project), "--phase", "1", subprocess=True)
    assert out.returncode == 3, out.stderr
    assert "the executor is blocked: choose the database (postgres or sqlite)" in out.stderr
    assert f"looprail answer {project} 01-01/T2 approved" in out.stderr
    assert "CHECKPOINT: Action Required" in out.stderr
    assert "[rule 4] a database is an architectural choice" in out.stderr  # its closing words
    (cp,) = pending_checkpoints(project)
    assert (cp.task_id, cp.kind) == ("01-01/T2", "human-action")
    assert [r["task"] for r in requests(project)] == ["01-01/T1", "01-01/T2"]
    assert not (project / "SHIPPED").exists()

    given = run_cli("answer", str(project), "01-01/T2", "use sqlite, in data/app.db")
    assert given.returncode == 0, given.stderr
    assert pending_checkpoints(project) == []

    out = run_cli("run", str(project), "--phase", "1", subprocess=True)
    assert out.returncode == 0, out.stderr
    calls = requests(project)
    assert [r["task"] for r in calls] == ["01-01/T1", "01-01/T2", "01-01/T2", "01-01/T3"]
    assert "use sqlite, in data/app.db" in calls[2]["answers"]
    summary = (project / ".planning/phases/01-demo/01-01-SUMMARY.md").read_text()
    assert "use sqlite, in data/app.db" in summary
    assert (project / "SHIPPED").exists()


def test_only_a_last_line_blocked_stops():
    from looprail.machine.verify import blocked_reason

    assert blocked_reason("did it\n\n  BLOCKED: no API credentials  \n\n") == "no API credentials"
    assert blocked_reason("**BLOCKED:** pick a queue") == "pick a queue"  # markdown bold
    # said earlier and then done anyway: it went on
    assert blocked_reason("BLOCKED: no key\nfound the key in .env; done") is None
    assert blocked_reason("") is None
