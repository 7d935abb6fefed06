"""Done means verified, end to end (docs/loop.md, "Verification"): a real `looprail run` with
stand-in agents under `.looprail/agents/` (the local runtime). looprail runs each task's
`<automated>` checks itself, calls the executor again with a failure, notices a stuck agent,
halts naming plan, task, command and log, and never writes the SUMMARY of broken work."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support import run_cli, write_exe
from tests.support.loop import demo_phase

# The executor logs each request (its task and the check failures it was handed) and behaves
# as `.mode` in the project says: `lazy` writes nothing; `fix` writes the file only once it is
# handed a failure; `ok` writes it at once; `drift` writes a different wrong thing each time.
EXECUTOR = r"""
import json, os, sys
from pathlib import Path
root = Path(os.environ["LOOPRAIL_PROJECT"])
req = json.loads(sys.stdin.read())
t = req["task"]
with open(root / "requests.jsonl", "a") as fh:
    fh.write(json.dumps({"task": t["planId"] + "/" + t["taskId"],
                         "failures": t.get("checkFailures", [])}) + "\n")
mode = (root / ".mode").read_text().strip() if (root / ".mode").exists() else "ok"
calls = len((root / "requests.jsonl").read_text().splitlines())
out = root / "out.txt"
if mode == "ok" or (mode == "fix" and t.get("checkFailures")):
    out.write_text("hello\n")
elif mode == "drift":
    out.write_text("wrong " + "x" * calls + "\n")
print("Working on it.\n\nDeviations: none; wrote out.txt as asked.")
"""
VERIFIER = (
    'cat > "$LOOPRAIL_PROJECT/verifier-request.json"\n'
    'printf -- "---\\nstatus: passed\\n---\\n" > "$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md"\n'
)


def task(name: str, automated: str | None, verify: str = "prose") -> str:
    check = f"<automated>{automated}</automated>" if automated is not None else ""
    return (
        f'<task type="auto">\n<name>{name}</name>\n<files>out.txt</files>\n'
        f"<action>write out.txt</action>\n<verify>{verify}{check}</verify>\n"
        f"<done>{name}</done>\n</task>"
    )


def project_with(
    root: Path, *tasks: str, mode: str = "ok", config: dict | None = None, must: str = ""
) -> Path:
    project, phase = demo_phase(root)
    if config is not None:
        (project / ".planning" / "config.json").write_text(json.dumps(config))
    (phase / "01-01-PLAN.md").write_text(
        '---\nphase: 01-demo\nplan: "01"\ntype: execute\ndepends_on: []\n'
        'files_modified: ["out.txt"]\nautonomous: true\nrequirements: [R-1]\n' + must + "---\n\n"
        "<objective>hello</objective>\n\n<tasks>\n" + "\n\n".join(tasks) + "\n</tasks>\n"
    )
    agents = project / ".looprail" / "agents"
    write_exe(agents / "executor", EXECUTOR, shebang=sys.executable)
    write_exe(agents / "verifier", VERIFIER)
    write_exe(agents / "orchestrator", 'touch "$LOOPRAIL_PROJECT/SHIPPED"\n')
    (project / ".mode").write_text(mode)
    return project


def run(project: Path, *extra: str):
    return run_cli("run", str(project), "--phase", "1", "--jobs", "1", *extra, cwd=project)


def requests(project: Path) -> list[dict]:
    path = project / "requests.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def summary(project: Path) -> Path:
    return project / ".planning/phases/01-demo/01-01-SUMMARY.md"


HAS_OUT = "grep -q hello out.txt"


def test_a_passing_check_lets_the_task_finish(tmp_path):
    project = project_with(tmp_path, task("write", HAS_OUT))
    done = run(project)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "✓ check grep -q hello out.txt (exit 0)" in done.stderr
    assert len(requests(project)) == 1


def test_a_lazy_agent_is_stuck_and_the_plan_halts_without_a_summary(tmp_path):
    project = project_with(tmp_path, task("write", HAS_OUT), mode="lazy")
    done = run(project)
    assert done.returncode == 1
    said = done.stdout + done.stderr
    assert "01-01-PLAN.md: task 01-01/T1: check `grep -q hello out.txt` failed" in said
    assert "stuck: the same failure twice in a row" in said
    assert ".looprail/logs/" in said
    calls = requests(project)
    assert len(calls) == 2  # the first call, one retry with the failure, then stuck
    assert calls[0]["failures"] == []
    (failure,) = calls[1]["failures"]
    assert failure["command"] == HAS_OUT and failure["exitCode"] == 2
    assert not summary(project).exists()


def test_an_agent_that_fixes_the_problem_on_retry(tmp_path):
    project = project_with(tmp_path, task("write", HAS_OUT), mode="fix")
    done = run(project)
    assert done.returncode == 0, done.stderr + done.stdout
    assert [len(c["failures"]) for c in requests(project)] == [0, 1]
    assert summary(project).exists()


def test_the_retry_budget_is_looprail_verify_retries(tmp_path):
    config = {"looprail": {"verify": {"retries": 1}}}
    project = project_with(
        tmp_path, task("write", "cat out.txt; false"), mode="drift", config=config
    )
    done = run(project)
    assert done.returncode == 1
    assert "1 retry spent" in done.stdout + done.stderr
    assert len(requests(project)) == 2


def test_a_test_run_that_runs_no_tests_is_not_a_pass(tmp_path):
    runner = "echo '0 passing'; echo mocha >/dev/null"
    project = project_with(tmp_path, task("write", f"{runner} # mocha"), mode="ok")
    done = run(project)
    assert done.returncode == 1
    assert "[mocha: 0 passing]" in done.stdout + done.stderr


def test_pipefail_a_runner_piped_into_tail_still_fails(tmp_path):
    project = project_with(tmp_path, task("write", "false | tail -1"), mode="ok")
    done = run(project)
    assert done.returncode == 1
    assert "check `false | tail -1` failed (exit 1)" in done.stdout + done.stderr


def test_on_resume_the_checks_run_first(tmp_path):
    project = project_with(tmp_path, task("write", HAS_OUT), mode="lazy")
    assert run(project).returncode == 1
    (project / "out.txt").write_text("hello\n")  # fixed by hand
    done = run(project)  # the halted run resumes
    assert done.returncode == 0, done.stderr + done.stdout
    assert len(requests(project)) == 2  # no executor call: the checks passed first
    assert summary(project).exists()


# -- must_haves, checked at the end of each plan ----------------------------------------------

ARTIFACT = "must_haves:\n  artifacts:\n    - path: out.txt\n      contains: [hello]\n"
LINK = (
    "must_haves:\n  key_links:\n    - from: out.txt\n      to: other.txt\n"
    "      via: a mention\n      pattern: see other\n"
)


def test_a_stub_artifact_halts_the_plan(tmp_path):
    project = project_with(tmp_path, task("write", None), mode="lazy", must=ARTIFACT)
    (project / "out.txt").write_text("TODO\n")  # a stub
    done = run(project)
    assert done.returncode == 1
    said = done.stdout + done.stderr
    assert "01-01-PLAN.md: must_haves: check `must_haves artifact out.txt` failed" in said
    assert "Missing pattern: hello" in said
    calls = requests(project)  # the task, then its retry with the must-have failure
    assert [c["task"] for c in calls] == ["01-01/T1", "01-01/T1"]
    assert calls[1]["failures"][0]["command"] == "must_haves artifact out.txt"
    assert not summary(project).exists()


def test_a_must_have_failure_fixed_on_retry(tmp_path):
    project = project_with(tmp_path, task("write", None), mode="fix", must=ARTIFACT)
    done = run(project)
    assert done.returncode == 0, done.stderr
    assert len(requests(project)) == 2
    assert "✓ must_haves artifact out.txt (ok)" in done.stderr


def test_a_missing_key_link_halts_the_plan(tmp_path):
    project = project_with(tmp_path, task("write", None), mode="ok", must=LINK)
    done = run(project)
    assert done.returncode == 1
    said = done.stdout + done.stderr
    assert "check `must_haves key_link out.txt → other.txt` failed" in said
    assert not summary(project).exists()


# -- unchecked tasks: reported, never silent ---------------------------------------------------


def test_an_unchecked_task_is_named_in_the_summary_and_by_lint(tmp_path):
    project = project_with(tmp_path, task("write", None, verify="look at it"))
    linted = run_cli("lint", str(project), cwd=project)
    assert "task 01-01/T1 has no automated check (<verify> is prose only)" in linted.stdout
    done = run(project)
    assert done.returncode == 0, done.stderr
    assert "unverified (1 task, no automated check): 01-01/T1" in done.stdout


def test_unchecked_fail_halts_the_plan_before_its_executor_runs(tmp_path):
    config = {"looprail": {"verify": {"unchecked": "fail"}}}
    project = project_with(tmp_path, task("write", None), config=config)
    done = run(project)
    assert done.returncode == 1
    assert (
        "01-01-PLAN.md: task 01-01/T1 has no automated check (<verify> is prose only) and "
        "looprail.verify.unchecked is fail" in done.stderr
    )
    assert requests(project) == []


def test_a_bad_verify_setting_is_one_line(tmp_path):
    config = {"looprail": {"verify": {"unchecked": "maybe"}}}
    project = project_with(tmp_path, task("write", HAS_OUT), config=config)
    done = run(project)
    assert done.returncode != 0
    assert "looprail.verify.unchecked: must be warn or fail" in done.stderr
    assert "Traceback" not in done.stderr


# -- evidence, not a task list ------------------------------------------------------------------


def test_the_summary_and_the_verifier_get_the_evidence(tmp_path):
    project = project_with(
        tmp_path, task("write", HAS_OUT), task("look", None), mode="fix", must=ARTIFACT
    )
    done = run(project)
    assert done.returncode == 0, done.stderr
    text = summary(project).read_text()
    assert "## Verification" in text
    assert "### 01-01/T1" in text
    assert "- `grep -q hello out.txt`: FAILED (exit 2, " in text  # no out.txt yet
    assert " ms, attempt 1)\n- `grep -q hello out.txt`: passed (exit 0, " in text
    assert text.index("### 01-01/T2") < text.index("### 01-01/must-haves")
    assert "- unverified: no automated check (<verify> is prose only)" in text
    assert "> Deviations: none; wrote out.txt as asked." in text
    assert "- `must_haves artifact out.txt`: passed" in text
    request = json.loads((project / "verifier-request.json").read_text())
    (evidence,) = [t for t in request["roleContext"]["verifier"] if "## Verification" in t]
    assert "- `grep -q hello out.txt`: passed" in evidence
    assert "- unverified: no automated check" in evidence
    # each run is told apart: the retry, then the merged tree's (journaled as attempt 0)
    assert " ms, attempt 2)\n- `grep -q hello out.txt`: passed (exit 0, " in evidence
    assert " ms, again on the merged tree)" in evidence
    assert evidence.count(" ms, attempt 1)") == 1


# -- human_needed: a human-verify checkpoint, answered like any -------------------------------

HUMAN = r"""
cat > "$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md" <<'MD'
---
status: human_needed
human_verification:
  - test: Open the page on a phone
    expected: the menu folds away
    why_human: layout needs eyes
---
MD
"""


def test_human_needed_pauses_and_is_answered_like_any_checkpoint(tmp_path):
    project = project_with(tmp_path, task("write", HAS_OUT))
    write_exe(project / ".looprail" / "agents" / "verifier", HUMAN)
    done = run(project)
    assert done.returncode == 3, done.stderr
    assert "1. Open the page on a phone (expected: the menu folds away)" in done.stderr
    assert "(why a person: layout needs eyes)" in done.stderr
    assert "1-verify/T1" in done.stderr
    answered = run_cli("answer", str(project), "1-verify/T1", "approved", cwd=project)
    assert answered.returncode == 0, answered.stderr
    done = run(project)
    assert done.returncode == 0, done.stderr
    verification = (project / ".planning/phases/01-demo/01-VERIFICATION.md").read_text()
    assert "status: passed" in verification
    assert (project / "SHIPPED").exists()


# -- the merged tree is checked again ----------------------------------------------------------

SHARED = r"""
import json, os, sys
from pathlib import Path
req = json.loads(sys.stdin.read())
(Path(os.environ["LOOPRAIL_PROJECT"]) / "shared.txt").write_text(req["task"]["planId"] + "\n")
"""


def test_two_plans_that_break_each_other_halt_on_the_merged_tree(tmp_path):
    project = project_with(tmp_path, task("mine", "grep -qx 01-01 shared.txt"))
    phase = project / ".planning/phases/01-demo"
    (phase / "01-02-PLAN.md").write_text(
        '---\nphase: 01-demo\nplan: "02"\ntype: execute\nwave: 2\ndepends_on: ["01"]\n'
        'files_modified: ["shared.txt"]\nautonomous: true\nrequirements: [R-1]\n---\n\n'
        "<objective>two</objective>\n\n<tasks>\n"
        + task("theirs", "grep -qx 01-02 shared.txt")
        + "\n</tasks>\n"
    )
    write_exe(project / ".looprail" / "agents" / "executor", SHARED, shebang=sys.executable)
    done = run(project)
    assert done.returncode == 1, done.stderr
    assert (
        "merged tree: plan 01-01 task 01-01/T1: check `grep -qx 01-01 shared.txt` failed (exit 1)"
        in done.stderr
    )
    assert not (project / "verifier-request.json").exists()  # halted before verify


def test_report_shows_the_checks_per_task(tmp_path):
    project = project_with(tmp_path, task("write", HAS_OUT), task("look", None), mode="fix")
    assert run(project).returncode == 0
    shown = run_cli("report", str(project), cwd=project)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    t1 = next(i for i, line in enumerate(lines) if "01-01/T1" in line)
    assert "check grep -q hello out.txt" in lines[t1 + 1] and "attempt 1" in lines[t1 + 1]
    assert "exit 0" in lines[t1 + 2] and "attempt 2" in lines[t1 + 2]
    assert "! unverified: no automated check (<verify> is prose only)" in shown.stdout
    data = json.loads(run_cli("report", str(project), "--json", cwd=project).stdout)
    tasks = {t["key"]: t for w in data["waves"] for p in w["plans"] for t in p["tasks"]}
    checks = tasks["01-01/T1"]["checks"]  # attempt 0: again on the merged tree
    assert [(c["outcome"], c["attempt"]) for c in checks] == [
        ("failed", 1), ("passed", 2), ("passed", 0)
    ]  # fmt: skip
    assert tasks["01-01/T2"]["checks"][0]["outcome"] == "unchecked"


# -- trust: every command a run would execute as a check is listed -----------------------------


def test_dry_run_audit_and_trust_list_every_check_command(tmp_path):
    project = project_with(tmp_path, task("write", HAS_OUT), task("look", None))
    dry = run_cli("run", str(project), "--phase", "1", "--dry-run", cwd=project)
    assert dry.returncode == 0, dry.stderr
    assert f"      check (SHELL) {HAS_OUT}" in dry.stdout
    assert "      unverified: no automated check (<verify> is prose only)" in dry.stdout
    audit = run_cli("capability", "audit", "--project", str(project), cwd=project)
    assert audit.returncode == 0, audit.stderr
    plan = ".planning/phases/01-demo/01-01-PLAN.md"
    assert f"  {plan} 01-01/T1: SHELL {HAS_OUT}" in audit.stdout
    as_json = run_cli("capability", "audit", "--project", str(project), "--json", cwd=project)
    assert json.loads(as_json.stdout)["taskChecks"] == [
        {"plan": plan, "taskId": "01-01/T1", "command": HAS_OUT}
    ]
    trusted = run_cli("trust", str(project), "--yes", cwd=project)
    assert f"  {plan} 01-01/T1: SHELL {HAS_OUT}" in trusted.stdout
    assert not (project / "out.txt").exists()  # listed, never run


# -- an agent CLI gets the failure in its prompt ------------------------------------------------

AGENT_PLAN = """---
phase: 01-first
plan: "01"
type: execute
depends_on: []
files_modified: ["a.txt"]
autonomous: true
---

<objective>a</objective>

<tasks>
<task type="auto">
<name>Write a.txt</name>
<files>a.txt</files>
<action>Write a.txt</action>
<verify>it has words<automated>test -s a.txt</automated></verify>
<done>a.txt has words</done>
</task>
</tasks>
"""


def test_an_agent_cli_is_told_the_failing_check_in_its_prompt(tmp_path):
    from tests.support.agents import agent_env, calls, looprail

    env = agent_env(tmp_path, FAKE_AGENT_MODE="lazy", FAKE_AGENT_ONLY="## Task")
    assert looprail("init", "demo", "--agent", "claude", cwd=tmp_path, env=env).returncode == 0
    project = tmp_path / "demo"
    phase = project / ".planning/phases/01-first"
    (phase / "01-CONTEXT.md").write_text("ctx\n")
    (phase / "01-01-PLAN.md").write_text(AGENT_PLAN)
    done = looprail("run", str(project), "--phase", "1", cwd=project, env=env)
    assert done.returncode == 1
    assert "check `test -s a.txt` failed (exit 1); stuck" in done.stderr
    prompts = [c["prompt"] for c in calls(tmp_path) if "## Task" in c["prompt"]]
    assert len(prompts) == 2
    assert "failed its checks" not in prompts[0]
    assert "## Your previous attempt failed its checks" in prompts[1]
    assert "### `test -s a.txt` (exit 1)" in prompts[1]


def test_human_needed_issues_go_to_a_fix_up_then_it_is_asked_again(tmp_path):
    project = project_with(tmp_path, task("write", HAS_OUT))
    write_exe(project / ".looprail" / "agents" / "verifier", HUMAN)
    assert run(project).returncode == 3
    said = run_cli("answer", str(project), "1-verify/T1", "the menu overlaps", cwd=project)
    assert said.returncode == 0, said.stderr
    done = run(project)
    assert done.returncode == 3, done.stderr  # fixed up, then asked again
    fix = requests(project)[-1]
    assert fix["task"].startswith("1-verify/")
