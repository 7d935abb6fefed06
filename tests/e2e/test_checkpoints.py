"""Checkpoints end to end: a real `looprail run` on a pseudo-terminal (tests/support/terminal.py)
asks each checkpoint type and takes each kind of answer; without a terminal it pauses (exit 3)
and `looprail answer` records the answer for the next run; a waiting run takes an answer from
`looprail answer`; a SIGKILL while it waits loses nothing answered; a secret is never echoed and
never lands in a file under `.looprail/`. The agents are small scripts under `.looprail/agents/`
(the local runtime) that log every request they get."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from tests.support import run_cli, write_exe
from tests.support.loop import demo_phase
from tests.support.procs import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a Linux pty")

# The executor logs what it was asked (task, action, the answers it was handed, whether the
# secret variable was set: its sha256, never its value) and writes nothing else.
EXECUTOR = r"""
import hashlib, json, os, sys, time
from pathlib import Path
root = Path(os.environ["LOOPRAIL_PROJECT"])
req = json.loads(sys.stdin.read())
t = req["task"]
secret = os.environ.get("LOOPRAIL_CHECKPOINT_ANSWER")
entry = {
    "task": t["planId"] + "/" + t["taskId"],
    "action": t.get("action", ""),
    "answers": (t.get("planSections") or {}).get("checkpoint_answers"),
    "secret": hashlib.sha256(secret.encode()).hexdigest() if secret else None,
}
with open(root / "requests.jsonl", "a") as fh:
    fh.write(json.dumps(entry) + "\n")
hold = root / (".hold-" + t["taskId"])  # a kill test holds the call here
if hold.exists():
    (root / (".reached-" + t["taskId"])).write_text("")
    while hold.exists():
        time.sleep(0.05)
"""
VERIFIER = 'printf -- "---\\nstatus: passed\\n---\\n" > "$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md"\n'

VERIFY = """<task type="checkpoint:human-verify" gate="blocking">
  <name>Check the dashboard</name>
  <what-built>Responsive dashboard at /dashboard</what-built>
  <how-to-verify>
    1. Visit: http://localhost:3000/dashboard
    2. Mobile (375px): the sidebar is hidden
  </how-to-verify>
  <resume-signal>Type "approved" to continue, or describe issues to fix</resume-signal>
</task>"""
DECISION = """<task type="checkpoint:decision" gate="blocking">
  <decision>Select authentication provider</decision>
  <context>Need user authentication. Two options with different tradeoffs.</context>
  <options>
    <option id="supabase">
      <name>Supabase Auth</name>
      <pros>Built-in with Supabase DB, generous free tier</pros>
      <cons>Less customizable UI</cons>
    </option>
    <option id="clerk">
      <name>Clerk</name>
      <pros>Beautiful pre-built UI</pros>
      <cons>Paid after 10k MAU</cons>
    </option>
  </options>
  <resume-signal>Select: supabase or clerk</resume-signal>
</task>"""
ACTION = """<task type="checkpoint:human-action" gate="blocking">
  <action>Authenticate Vercel CLI so I can continue deployment</action>
  <instructions>
    Run: vercel login
  </instructions>
  <verification>vercel whoami returns your account email</verification>
  <resume-signal>Type "done" when authenticated</resume-signal>
</task>"""
SECRET = """<task type="checkpoint:human-action" gate="blocking">
  <action>Provide your OpenAI API key</action>
  <instructions>Get it from https://platform.openai.com/api-keys</instructions>
  <verification>I'll add it via `npx convex env set` and verify</verification>
  <resume-signal>Paste your API key</resume-signal>
</task>"""
TDD = """<task type="checkpoint:tdd-review" gate="advisory">
  <what-checked>TDD gate compliance for 1 plan in Phase 1</what-checked>
  <gate-results>| 01-01 | ✓ | ✓ | ✓ | Pass |</gate-results>
  <violations>None</violations>
  <resume-signal>Review complete — proceed to phase verification</resume-signal>
</task>"""


def auto(name: str) -> str:
    return (
        f'<task type="auto">\n<name>{name}</name>\n<files>out/{name}</files>\n'
        f"<action>write {name}</action>\n<verify>ok</verify>\n<done>{name}</done>\n</task>"
    )


def project_with(root: Path, checkpoint: str, *, after: int = 1) -> Path:
    """Phase 1 with one plan: an auto task, `checkpoint` (task T2), then `after` auto tasks."""
    project, phase = demo_phase(root)
    tasks = [auto("first"), checkpoint] + [auto(f"later{i}") for i in range(after)]
    (phase / "01-01-PLAN.md").write_text(
        '---\nphase: 01-demo\nplan: "01"\ntype: execute\ndepends_on: []\n'
        'files_modified: ["out/first"]\nautonomous: false\nrequirements: [R-1]\n---\n\n'
        "<objective>The dashboard</objective>\n\n<tasks>\n" + "\n\n".join(tasks) + "\n</tasks>\n"
    )
    agents = project / ".looprail" / "agents"
    write_exe(agents / "executor", EXECUTOR, shebang=sys.executable)
    write_exe(agents / "verifier", VERIFIER)
    write_exe(agents / "orchestrator", 'touch "$LOOPRAIL_PROJECT/SHIPPED"\n')
    return project


def requests(project: Path) -> list[dict]:
    path = project / "requests.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def later(project: Path, task: str = "01-01/T3") -> dict:
    return next(r for r in requests(project) if r["task"] == task)


def summary(project: Path) -> str:
    return (project / ".planning/phases/01-demo/01-01-SUMMARY.md").read_text()


def answers(project: Path) -> list:
    from looprail.journal import Journal

    with Journal.open(project, create=False) as jr:
        run = jr.latest_run()
        assert run is not None
        return jr.events(run.id, kinds=["answer"])


def terminal(project: Path, *extra: str):
    from tests.support.terminal import Terminal

    return Terminal.looprail(
        "run", str(project), "--phase", "1", "--jobs", "1", *extra, cwd=project
    )


# -- each type, each kind of answer, on a terminal ---------------------------------------------


def test_human_verify_approved_on_a_terminal(tmp_path):
    project = project_with(tmp_path, VERIFY)
    term = terminal(project)
    shown = term.expect('YOUR ACTION: Type "approved" to continue, or describe issues to fix')
    # presented as the reference's execution protocol shows it
    for part in (
        "CHECKPOINT: Verification Required",
        "Progress: 1/3 tasks complete",
        "Task: 01-01/T2 Check the dashboard",
        "Built: Responsive dashboard at /dashboard",
        "How to verify:",
        "1. Visit: http://localhost:3000/dashboard",
    ):
        assert part in shown
    assert not (project / "SHIPPED").exists()  # the run waits, alive
    assert term.proc.poll() is None
    term.send("approved")
    assert term.wait() == 0, term.text
    assert "checkpoint 01-01/T2 approved (terminal)" in term.text
    (a,) = answers(project)
    assert (a.outcome, a.message, a.data["source"]) == ("approved", "approved", "terminal")
    assert "01-01/T2 (human-verify): approved" in later(project)["answers"]
    assert "## Checkpoint answers" in summary(project)


def test_human_action_takes_the_plans_own_word_and_asks_again_otherwise(tmp_path):
    project = project_with(tmp_path, ACTION)
    term = terminal(project)
    shown = term.expect('YOUR ACTION: Type "done" when authenticated')
    assert "CHECKPOINT: Action Required" in shown
    assert "What you need to do: Run: vercel login" in shown
    assert "I'll verify: vercel whoami returns your account email" in shown
    term.send("not yet")
    term.expect('type "done" once it is done; asked again')
    term.send("done")
    assert term.wait() == 0, term.text
    assert [a.message for a in answers(project)] == ["done"]


def test_decision_takes_an_option_id_and_asks_again_for_an_unknown_one(tmp_path):
    project = project_with(tmp_path, DECISION)
    term = terminal(project, "--jobs", "2")  # the plan runs on a worker thread
    shown = term.expect("YOUR ACTION: Select: supabase or clerk")
    for part in (
        "CHECKPOINT: Decision Required",
        "Decision: Select authentication provider",
        "Context: Need user authentication.",
        "1. supabase - Supabase Auth",
        "Pros: Built-in with Supabase DB, generous free tier",
        "Cons: Paid after 10k MAU",
    ):
        assert part in shown
    term.send("auth0")
    term.expect("'auth0' is not an option of 01-01/T2; choose one of: supabase, clerk; asked again")
    term.send("clerk")
    assert term.wait() == 0, term.text
    assert "checkpoint 01-01/T2 decided: clerk (terminal)" in term.text
    (a,) = answers(project)
    assert (a.outcome, a.data["option"]) == ("chosen", "clerk")
    assert "01-01/T2 (decision): chose option clerk\n\nclerk" in later(project)["answers"]
    assert "chose option clerk" in summary(project)


def test_issues_go_to_a_fix_up_call_verbatim_then_the_checkpoint_is_asked_again(tmp_path):
    project = project_with(tmp_path, VERIFY)
    issues = 'The sidebar still shows at 375px; the "Save" button is grey, make it blue'
    term = terminal(project)
    term.expect("YOUR ACTION:")
    term.send(issues)
    term.expect("fix-up round 1 for the issues described")
    term.expect("CHECKPOINT: Verification Required")  # asked again
    fix = next(r for r in requests(project) if r["task"] == "01-01/T2-fix1")
    assert issues in fix["action"]
    term.send("approved")
    assert term.wait() == 0, term.text
    assert [(a.outcome, a.message) for a in answers(project)] == [
        ("issues", issues),
        ("approved", "approved"),
    ]
    handed = later(project)["answers"]
    assert issues in handed and "issues to fix" in handed
    assert issues in summary(project)


def test_rounds_are_bounded_then_the_run_halts_with_a_clear_message(tmp_path):
    project = project_with(tmp_path, VERIFY)
    term = terminal(project, "--checkpoint-rounds", "1")
    term.expect("YOUR ACTION:")
    term.send("still broken")
    term.expect("fix-up round 1")
    term.expect("YOUR ACTION:")
    term.send("still broken, again")
    assert term.wait() == 1, term.text
    assert "checkpoint 01-01/T2: 1 round of fixes and it still has issues" in term.text
    assert "--checkpoint-rounds N" in term.text
    assert [r["task"] for r in requests(project)] == ["01-01/T1", "01-01/T2-fix1"]


def test_the_rounds_come_from_the_config_key(tmp_path):
    project = project_with(tmp_path, VERIFY)
    (project / ".planning" / "config.json").write_text('{"looprail": {"checkpoint_rounds": 1}}')
    term = terminal(project)
    term.expect("YOUR ACTION:")
    term.send("broken")
    term.expect("YOUR ACTION:")
    term.send("broken")
    assert term.wait() == 1
    assert "looprail.checkpoint_rounds = 1" in term.text


def test_tdd_review_is_advisory_and_keeps_the_review_notes(tmp_path):
    project = project_with(tmp_path, TDD)
    term = terminal(project)
    shown = term.expect("YOUR ACTION: Review complete — proceed to phase verification")
    assert "CHECKPOINT: TDD Review" in shown
    assert "Checked: TDD gate compliance for 1 plan in Phase 1" in shown
    assert "Violations: None" in shown
    term.send("RED commit for 01-01 is thin; fine for now")
    assert term.wait() == 0, term.text
    assert "RED commit for 01-01 is thin; fine for now" in later(project)["answers"]


def test_a_secret_is_read_without_echo_and_only_reaches_the_next_call(tmp_path):
    project = project_with(tmp_path, SECRET, after=2)
    secret = "sk-proj-SECRETv4lue-0123456789"
    term = terminal(project)
    shown = term.expect("secret (not echoed)> ")
    assert "YOUR ACTION: Paste your API key" in shown
    term.send(secret)
    assert term.wait() == 0, term.text
    assert secret not in term.text  # never echoed, never printed
    digest = hashlib.sha256(secret.encode()).hexdigest()
    by_task = {r["task"]: r for r in requests(project)}
    assert by_task["01-01/T3"]["secret"] == digest  # the next executor call, in its env
    assert by_task["01-01/T4"]["secret"] is None  # and no other
    assert "$LOOPRAIL_CHECKPOINT_ANSWER" in by_task["01-01/T3"]["answers"]
    assert "answer withheld" in by_task["01-01/T4"]["answers"]
    (a,) = answers(project)
    assert (a.outcome, a.message) == ("withheld", "answer withheld")
    assert_nowhere(project, secret)


def assert_nowhere(project: Path, secret: str) -> None:
    """No file under `.looprail/` (journal, WAL, logs, transcripts), nor the SUMMARY, holds
    the secret's bytes."""
    needle = secret.encode()
    looked = 0
    for path in [*(project / ".looprail").rglob("*"), *project.rglob("*SUMMARY.md")]:
        if path.is_file() and not path.is_symlink():
            looked += 1
            assert needle not in path.read_bytes(), path
    assert looked > 3


# -- without a terminal, and between processes -------------------------------------------------


def test_without_a_terminal_the_run_pauses_and_says_how_to_answer(tmp_path):
    from looprail.machine.answers import pending_checkpoints

    project = project_with(tmp_path, DECISION)
    out = run_cli("run", str(project), "--phase", "1", subprocess=True)
    assert out.returncode == 3, out.stderr
    assert (
        f"(one of the option ids supabase, clerk): looprail answer {project} 01-01/T2 supabase"
        in out.stderr
    )
    assert "--approve 01-01/T2" in out.stderr
    assert "CHECKPOINT: Decision Required" in out.stderr  # shown as on a terminal
    assert "Cons: Paid after 10k MAU" in out.stderr
    (cp,) = pending_checkpoints(project)
    assert (cp.task_id, cp.kind, cp.option_ids) == ("01-01/T2", "decision", ("supabase", "clerk"))
    assert cp.options[1].cons == "Paid after 10k MAU"
    # refused at once, one line, exit 1, nothing recorded
    bad = run_cli("answer", str(project), "01-01/T2", "auth0")
    assert bad.returncode == 1
    assert bad.stderr.strip().endswith(
        "01-01/T2: 'auth0' is not an option of 01-01/T2; choose one of: supabase, clerk"
    )
    assert len(bad.stderr.strip().splitlines()) == 1
    bad = run_cli("answer", str(project), "01-01/T1", "approved")
    assert bad.returncode == 1 and "01-01/T1 is not a checkpoint (type auto)" in bad.stderr
    bad = run_cli("answer", str(project), "01-01/T9", "approved")
    assert bad.returncode == 1 and "plan 01-01 has no task 01-01/T9" in bad.stderr
    assert answers(project) == []
    listed = run_cli("answer", str(project))
    assert listed.stdout == "01-01/T2 (decision) — Select: supabase or clerk\n"
    ok = run_cli("answer", str(project), "01-01/T2", "clerk")
    assert ok.returncode == 0, ok.stderr
    assert pending_checkpoints(project) == []
    out = run_cli("run", str(project), "--phase", "1", subprocess=True)
    assert out.returncode == 0, out.stderr
    assert "checkpoint 01-01/T2 decided: clerk (looprail answer)" in out.stderr
    assert "chose option clerk" in later(project)["answers"]


def test_run_answer_flag_records_the_answer_and_refuses_a_wrong_one(tmp_path):
    project = project_with(tmp_path, DECISION)
    bad = run_cli("run", str(project), "--phase", "1", "--answer", "01-01/T2=auth0")
    assert bad.returncode == 1
    assert "choose one of: supabase, clerk" in bad.stderr
    assert not (project / ".looprail" / "journal.sqlite").exists()  # refused before anything
    out = run_cli("run", str(project), "--phase", "1", "--answer", "01-01/T2=supabase")
    assert out.returncode == 0, out.stderr
    (a,) = answers(project)
    assert (a.data["option"], a.data["source"]) == ("supabase", "--answer")


def test_approve_stays_the_word_for_approved(tmp_path):
    project = project_with(tmp_path, VERIFY)
    out = run_cli("run", str(project), "--phase", "1", "--approve", "01-01/T2")
    assert out.returncode == 0, out.stderr
    (a,) = answers(project)
    assert (a.outcome, a.data["source"]) == ("approved", "--approve")


def test_a_waiting_run_takes_an_answer_given_elsewhere(tmp_path):
    project = project_with(tmp_path, DECISION)
    from looprail.errors import AnswerRefused
    from looprail.machine.answers import pending_checkpoints, submit_answer

    term = terminal(project)
    term.expect("YOUR ACTION:")
    (cp,) = pending_checkpoints(project)  # what the dashboard shows of a waiting run
    assert (cp.task_id, cp.option_ids) == ("01-01/T2", ("supabase", "clerk"))
    with pytest.raises(AnswerRefused, match="choose one of: supabase, clerk"):
        submit_answer(project, "01-01/T2", "auth0", source="dashboard")
    given = run_cli("answer", str(project), "01-01/T2", "supabase", subprocess=True)
    assert given.returncode == 0, given.stderr
    term.expect("answered from looprail answer")
    assert term.wait() == 0, term.text
    assert "decided: supabase (looprail answer)" in term.text


def test_a_secret_given_between_processes_waits_outside_the_project(tmp_path):
    from looprail.machine.answers import secret_path

    project = project_with(tmp_path, SECRET)
    secret = "tok-ABCDEF-987654321"
    assert run_cli("run", str(project), "--phase", "1", subprocess=True).returncode == 3
    given = run_cli("answer", str(project), "01-01/T2", input=secret + "\n", subprocess=True)
    assert given.returncode == 0, given.stderr
    run_id = answers(project)[0].run_id
    path = secret_path(project, run_id, "01-01/T2")
    assert path.read_text() == secret
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert not str(path).startswith(str(project))
    out = run_cli("run", str(project), "--phase", "1", subprocess=True)
    assert out.returncode == 0, out.stderr
    assert later(project)["secret"] == hashlib.sha256(secret.encode()).hexdigest()
    assert not path.exists()  # removed once used
    assert_nowhere(project, secret)


# -- a kill while the run waits ----------------------------------------------------------------


def test_a_kill_while_waiting_then_a_resume_keeps_what_was_answered(tmp_path):
    project = project_with(tmp_path, VERIFY)
    issues = "The chart legend overlaps the axis"
    term = terminal(project)
    term.expect("YOUR ACTION:")
    term.send(issues)
    term.expect("fix-up round 1")
    term.expect("YOUR ACTION:")  # asked again: the run waits
    wait_for(lambda: len(answers(project)) == 1)
    term.kill()
    assert not (project / "SHIPPED").exists()
    # the killed run still waits on the checkpoint; the answer goes to the next resume
    ok = run_cli("answer", str(project), "01-01/T2", "approved")
    assert ok.returncode == 0, ok.stderr
    out = run_cli("resume", str(project), subprocess=True)
    assert out.returncode == 0, out.stderr
    tasks = [r["task"] for r in requests(project)]
    assert tasks.count("01-01/T2-fix1") == 1  # the fix-up is not done again
    handed = later(project)["answers"]
    assert issues in handed and "01-01/T2 (human-verify): approved" in handed
    assert issues in summary(project)
    assert os.path.exists(project / "SHIPPED")


def test_a_secret_lost_to_a_kill_is_asked_again_on_resume(tmp_path):
    from tests.support.terminal import Terminal

    project = project_with(tmp_path, SECRET)
    first, second = "sk-first-AAAA1111", "sk-second-BBBB2222"
    (project / ".hold-T3").write_text("")
    term = terminal(project)
    term.expect("secret (not echoed)> ")
    term.send(first)
    wait_for(lambda: (project / ".reached-T3").exists())  # the next call has it, in its env
    term.kill()
    (project / ".hold-T3").unlink()
    resumed = Terminal.looprail("resume", str(project), cwd=project)
    resumed.expect("a secret answer is never kept across runs; asked again")
    resumed.expect("secret (not echoed)> ")
    resumed.send(second)
    assert resumed.wait() == 0, resumed.text
    calls = [r for r in requests(project) if r["task"] == "01-01/T3"]
    assert [c["secret"] for c in calls] == [
        hashlib.sha256(first.encode()).hexdigest(),
        hashlib.sha256(second.encode()).hexdigest(),
    ]
    assert_nowhere(project, first)
    assert_nowhere(project, second)


def test_looprail_answer_reads_a_secret_from_the_terminal_without_echo(tmp_path):
    from tests.support.terminal import Terminal

    project = project_with(tmp_path, SECRET)
    secret = "pw-Quiet-55667788"
    assert run_cli("run", str(project), "--phase", "1", subprocess=True).returncode == 3
    term = Terminal.looprail("answer", str(project), "01-01/T2", cwd=project)
    term.expect("answer to 01-01/T2 (not echoed): ")
    term.send(secret)
    assert term.wait() == 0, term.text
    assert "recorded the secret (withheld from the journal)" in term.text
    assert secret not in term.text
    out = run_cli("run", str(project), "--phase", "1", subprocess=True)
    assert out.returncode == 0, out.stderr
    assert later(project)["secret"] == hashlib.sha256(secret.encode()).hexdigest()
    assert_nowhere(project, secret)


def test_ctrl_c_while_waiting_on_a_worker_thread_stops_the_run(tmp_path):
    project = project_with(tmp_path, VERIFY)
    term = terminal(project, "--jobs", "2")
    term.expect("answer> ")
    os.write(term.fd, b"\x03")  # Ctrl-C on the terminal
    assert term.wait(timeout=60) == 130, term.text
    out = run_cli("run", str(project), "--phase", "1", "--approve", "01-01/T2", subprocess=True)
    assert out.returncode == 0, out.stderr  # resumable, nothing lost
