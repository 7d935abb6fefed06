"""Agent runtimes end to end through the CLI, with fake agent CLIs first on PATH: `looprail init
demo --agent X && cd demo && looprail run --phase 1` ships a phase whose two parallel plans
work in their own git worktrees and are merged back; transcripts are on disk; the report shows
what was spent. Then the ways agents fail, a merge conflict, and a kill mid-wave."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from looprail.runtime.adapter import LONG_PROMPT
from tests.support.agents import AGENTS, agent_env, calls, git, looprail

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is needed for plan worktrees",
)


def init_demo(tmp_path: Path, agent: str, env: dict[str, str]) -> Path:
    done = looprail("init", "demo", "--agent", agent, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    return tmp_path / "demo"


@pytest.mark.parametrize("agent", AGENTS)
def test_a_phase_with_parallel_plans_ships_with_each_agent(tmp_path: Path, agent: str) -> None:
    env = agent_env(tmp_path)
    demo = init_demo(tmp_path, agent, env)
    assert json.loads((demo / ".planning" / "config.json").read_text()) == {
        "looprail": {"agent": agent}
    }
    assert (demo / ".looprail" / "roles" / "planner.md").is_file()
    assert ".looprail/logs/" in (demo / ".gitignore").read_text()

    doctor = looprail("doctor", cwd=demo, env=env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"✓ {agent}:" in doctor.stdout

    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=demo, env=env)
    assert done.returncode == 0, done.stderr
    assert "shipped" in done.stdout

    # Both plans of wave 1 worked in their own worktree, and were merged back in plan order.
    task_calls = [c for c in calls(tmp_path) if "## Task 01-0" in c["prompt"]]
    cwds = {Path(c["cwd"]).name for c in task_calls}
    assert {"01-01", "01-02"} <= cwds, cwds  # worktrees are named after the plan
    assert "demo" in cwds  # wave 2's single plan works in the main tree
    # Every child's PWD is the folder it runs in (a CLI that asks $PWD, as opencode does).
    assert all(os.path.realpath(c["pwd"]) == c["cwd"] for c in calls(tmp_path))
    log = git(demo, "log", "--format=%s")
    merges = [line for line in log.splitlines() if line.startswith("looprail: merge plan")]
    assert [m.split()[3] for m in reversed(merges)] == ["01-01", "01-02"]
    for name in ("a.txt", "b.txt", "c.txt"):
        assert (demo / name).is_file()
    assert git(demo, "worktree", "list").count("\n") == 1  # the worktrees are gone
    assert "looprail/" not in git(demo, "branch")

    # Every invocation's transcript is on disk: prompt, stream, stderr, meta.
    runs = list((demo / ".looprail" / "logs").iterdir())
    assert len(runs) == 1
    folders = sorted(p.name for p in runs[0].iterdir())
    assert len(folders) == 7, folders  # discuss, plan, 3 tasks, verify, ship
    meta = json.loads((runs[0] / folders[0] / "meta.json").read_text())
    assert meta["ok"] and meta["sessionId"].startswith("ses-") and meta["events"] >= 1
    # the prompt is filed in prompt.md, and was never in the argv (it went on stdin)
    assert all(len(a) < 300 for a in meta["argv"]), meta["argv"]
    assert agent == "opencode" or meta["argv"][-1].endswith(LONG_PROMPT)
    assert (runs[0] / folders[0] / "stdout.jsonl").read_text().strip()
    assert "CONTEXT.md" in (runs[0] / folders[0] / "prompt.md").read_text()

    report = looprail("report", cwd=demo, env=env)
    assert report.returncode == 0, report.stderr
    assert f"Agent work ({agent})" in report.stdout
    assert "700 in / 140 out tokens · 7 calls" in report.stdout
    if agent in ("claude", "opencode"):  # the CLIs that report a cost
        assert "run: $0.0700" in report.stdout
    else:
        assert "run: cost not reported" in report.stdout
    assert str(runs[0].relative_to(demo) / folders[0]) in report.stdout
    data = json.loads(looprail("report", "--json", cwd=demo, env=env).stdout)
    assert data["spend"]["tasks"]["01-02/T1"]["calls"] == 1


@pytest.mark.parametrize(
    ("agent", "mode", "expect"),
    [
        ("claude", "rate_limit", "claude: rate limited: "),
        ("codex", "rate_limit", "codex: rate limited: "),
        ("opencode", "auth", "opencode: not authenticated: "),
        ("gemini", "auth", "gemini: not authenticated: "),
        ("claude", "cut", "claude: the output stream ended before the final result (cut off)"),
        ("codex", "cut", "codex: the output stream ended before the final result"),
        ("opencode", "exit", "opencode exited 1"),
        ("gemini", "exit", "gemini exited 1"),
    ],
)
def test_a_failing_agent_halts_the_task_with_its_transcript(
    tmp_path: Path, agent: str, mode: str, expect: str
) -> None:
    env = agent_env(tmp_path, FAKE_AGENT_MODE=mode, FAKE_AGENT_ONLY="## Task 01-02/T1")
    demo = init_demo(tmp_path, agent, env)
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=demo, env=env)
    assert done.returncode == 1
    line = [x for x in done.stderr.splitlines() if "halted" in x][-1]
    assert "01-02-PLAN.md: task 01-02/T1 failed: " in line and expect in line, line
    transcript = line.rsplit("(transcript: ", 1)[1].rstrip(")")
    assert (demo / transcript / "meta.json").is_file()
    assert transcript in looprail("report", cwd=demo, env=env).stdout


def test_a_hanging_agent_is_killed_at_its_kinds_timeout(tmp_path: Path) -> None:
    env = agent_env(tmp_path, FAKE_AGENT_MODE="hang", FAKE_AGENT_ONLY="## Task 01-01/T1")
    demo = init_demo(tmp_path, "claude", env)
    config = demo / ".planning" / "config.json"
    config.write_text(json.dumps({"looprail": {"agent": "claude", "timeouts": {"task": 1}}}))
    start = time.monotonic()
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=demo, env=env)
    assert done.returncode == 1
    assert "claude timed out after 1s and was killed" in done.stderr
    assert time.monotonic() - start < 60


def test_an_agent_that_does_not_deliver_its_artifact_fails_with_its_last_words(
    tmp_path: Path,
) -> None:
    env = agent_env(tmp_path, FAKE_AGENT_MODE="lazy", FAKE_AGENT_ONLY="PLAN.md")
    demo = init_demo(tmp_path, "codex", env)
    done = looprail("run", "--phase", "1", cwd=demo, env=env)
    assert done.returncode == 1
    assert (
        "plan: planner failed: planner did not deliver: no *-PLAN.md in the phase folder; "
        in done.stderr
    )
    assert "last words: done" in done.stderr and "(transcript: .looprail/logs/" in done.stderr


def test_outside_git_plans_run_one_at_a_time_with_one_warning(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    demo = init_demo(tmp_path, "gemini", env)
    subprocess.run(["rm", "-rf", str(demo / ".git")], check=True)
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=demo, env=env)
    assert done.returncode == 0, done.stderr
    warnings = [
        x
        for x in done.stdout.splitlines() + done.stderr.splitlines()
        if "not a git repository" in x
    ]
    assert len(warnings) == 1, warnings
    assert {Path(c["cwd"]).name for c in calls(tmp_path)} == {"demo"}


def test_a_merge_conflict_halts_naming_plans_and_files_then_resumes(tmp_path: Path) -> None:
    env = agent_env(tmp_path, FAKE_AGENT_CONFLICT="1")
    demo = init_demo(tmp_path, "claude", env)
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=demo, env=env)
    assert done.returncode == 1
    line = [x for x in done.stderr.splitlines() if "merge conflict" in x][-1]
    assert "plan 01-02 with plan 01-01 in shared.txt" in line, line
    worktrees = demo / ".looprail" / "worktrees"
    kept = sorted(p.name for run in worktrees.iterdir() for p in run.iterdir())
    assert kept == ["01-01", "01-02"]  # kept for inspection
    # The user resolves the conflict and commits; `looprail run` continues and ships.
    (demo / "shared.txt").write_text("resolved\n")
    git(demo, "add", "shared.txt")
    git(demo, "commit", "-q", "--no-edit")
    again = looprail("run", "--phase", "1", "--jobs", "2", cwd=demo, env=env)
    assert again.returncode == 0, again.stderr
    assert "resuming run" in again.stderr
    assert (demo / "shared.txt").read_text() == "resolved\n"
    assert not any(worktrees.iterdir())


def test_worktrees_survive_a_kill_and_the_resumed_run_finds_them(tmp_path: Path) -> None:
    # Plan 01-02's task hangs; plan 01-01 finishes in its worktree; then looprail is killed.
    env = agent_env(tmp_path, FAKE_AGENT_MODE="hang", FAKE_AGENT_ONLY="## Task 01-02/T1")
    demo = init_demo(tmp_path, "opencode", env)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from looprail.cli import main; sys.exit(main())",
            "run",
            "--phase",
            "1",
            "--jobs",
            "2",
        ],
        cwd=demo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _kill_run_and_resume(tmp_path, demo, env, proc)
    finally:
        # The hanging agent ran in its own session: SIGKILL of looprail's group left it; a
        # real resume reaps it from the journal, the test stops it by pid as well.
        for call in calls(tmp_path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(call["pid"], signal.SIGKILL)


def _kill_run_and_resume(tmp_path: Path, demo: Path, env: dict, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    a_txt = None
    while time.monotonic() < deadline:
        found = list((demo / ".looprail" / "worktrees").glob("*/01-01/a.txt"))
        if found:
            a_txt = found[0]
            break
        time.sleep(0.1)
    assert a_txt is not None, "plan 01-01 never wrote its file"
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # looprail and the hanging agent, at once
    proc.wait(timeout=30)
    assert a_txt.is_file()  # the worktree survived
    # One worktree folder is lost as well: the resumed run recreates it from its branch.
    lost = a_txt.parent.parent / "01-02"
    assert lost.is_dir()
    subprocess.run(["rm", "-rf", str(lost)], check=True)

    env2 = agent_env(tmp_path)  # the agent no longer hangs
    done = looprail("run", "--phase", "1", "--jobs", "2", cwd=demo, env=env2)
    assert done.returncode == 0, done.stderr
    assert "resuming run" in done.stderr
    resumed = [c for c in calls(tmp_path) if "## Task 01-0" in c["prompt"]]
    # 01-01/T1 was journaled done: it never ran again; 01-02/T1 ran again in its worktree.
    assert sum("## Task 01-01/T1" in c["prompt"] for c in resumed) == 1
    again = [c for c in resumed if "## Task 01-02/T1" in c["prompt"]]
    assert len(again) == 2
    assert Path(again[1]["cwd"]).name == "01-02"  # in the worktree it had before the kill
    assert (demo / "a.txt").is_file() and (demo / "b.txt").is_file()


def test_budget_halts_before_more_work_and_a_higher_budget_resumes(tmp_path: Path) -> None:
    env = agent_env(tmp_path, FAKE_AGENT_COST="0.5")
    demo = init_demo(tmp_path, "claude", env)
    done = looprail("run", "--phase", "1", "--budget-usd", "0.9", cwd=demo, env=env)
    assert done.returncode == 1
    assert "budget reached: $1.0000 spent of --budget-usd 0.9" in done.stderr
    assert len(calls(tmp_path)) == 2  # discuss and plan, then nothing more started
    again = looprail("run", "--phase", "1", "--budget-usd", "0.9", cwd=demo, env=env)
    assert again.returncode == 1 and "budget reached" in again.stderr
    assert len(calls(tmp_path)) == 2
    more = looprail("run", "--phase", "1", "--jobs", "2", "--budget-usd", "100", cwd=demo, env=env)
    assert more.returncode == 0, more.stderr
    assert "run: $3.5000" in looprail("report", cwd=demo, env=env).stdout


def test_init_with_the_local_runtime_scaffolds_executables_that_ship(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    demo = init_demo(tmp_path, "local", env)
    assert looprail("doctor", cwd=demo, env=env).returncode == 0
    done = looprail("run", "--phase", "1", cwd=demo, env=env, process=True)
    assert done.returncode == 0, done.stderr
    assert (demo / "NOTES.md").read_text().startswith("Write the phase notes: ")
    assert calls(tmp_path) == []  # no agent CLI was involved


def test_configured_prices_estimate_the_cost_of_agents_that_report_only_tokens(
    tmp_path: Path,
) -> None:
    env = agent_env(tmp_path)
    demo = init_demo(tmp_path, "codex", env)
    prices = {"inputUsdPerMTok": 1000, "outputUsdPerMTok": 5000}  # 100 + 20 tokens → $0.2
    config = {"looprail": {"agent": "codex", "agents": {"codex": prices}}}
    (demo / ".planning" / "config.json").write_text(json.dumps(config))
    done = looprail("run", "--phase", "1", "--budget-usd", "0.3", cwd=demo, env=env)
    assert done.returncode == 1 and "budget reached: $0.4000 spent" in done.stderr
    report = looprail("report", cwd=demo, env=env).stdout
    assert "run: ~$0.4000 (estimated from tokens) · 200 in / 40 out tokens · 2 calls" in report


def test_a_plan_that_does_not_parse_fails_the_planner_with_the_parse_error(
    tmp_path: Path,
) -> None:
    env = agent_env(tmp_path, FAKE_AGENT_MODE="bad_plan")
    demo = init_demo(tmp_path, "opencode", env)
    done = looprail("run", "--phase", "1", cwd=demo, env=env)
    assert done.returncode == 1
    line = [x for x in done.stderr.splitlines() if "halted" in x][-1]
    assert "plan: planner failed: planner did not deliver: the phase does not load: " in line
    assert "01-01-PLAN.md" in line and "frontmatter" in line
    assert "last words: I wrote the plan." in line and "(transcript: .looprail/logs/" in line


def test_resuming_with_another_agent_says_so(tmp_path: Path) -> None:
    env = agent_env(tmp_path, FAKE_AGENT_MODE="exit", FAKE_AGENT_ONLY="PLAN.md")
    demo = init_demo(tmp_path, "claude", env)
    assert looprail("run", "--phase", "1", cwd=demo, env=env).returncode == 1
    again = looprail("run", "--phase", "1", "--agent", "gemini", cwd=demo, env=agent_env(tmp_path))
    assert again.returncode == 0, again.stderr
    assert "was started with agent claude; resuming with gemini" in again.stderr
    assert [c["agent"] for c in calls(tmp_path)][-1] == "gemini"
