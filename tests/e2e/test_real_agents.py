"""The real agent CLIs — Claude Code, Codex, OpenCode, Gemini CLI, as npm installs them — run
the loop against a scripted model server on 127.0.0.1 (tests/support/model_server.py) that
answers in each CLI's own API: tool calls that write what looprail's prompt owes, then a final
message. Each CLI gets a fresh HOME. A test skips when its CLI is not installed (`.ci/run`
installs pinned versions; LOOPRAIL_AGENT_BIN names another folder).

Scenarios per CLI: the example ships with two plans in parallel worktrees; a lazy model (writes
nothing) halts naming the artifact and the transcript; a 110 kB role brief starting with `-`
reaches the model whole, from a run started in another folder that stays empty; a 401 and a 429
halt at once with `<cli>: not authenticated` / `rate limited`."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from looprail.runtime.base import DispatchContext, TaskWork, execute_task
from looprail.runtime.registry import RuntimeSettings, create_runtime
from tests.support.agents import AGENTS, git, looprail
from tests.support.model_server import SHELL_MARK, ModelServer, Script
from tests.support.real_agents import real_cli, real_env

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is needed for plan worktrees"),
    pytest.mark.real_agents,
]


def _cli(name: str) -> None:
    if real_cli(name) is None:
        pytest.skip(f"the real `{name}` is not installed (.ci/run installs it)")


def _init(tmp_path: Path, agent: str, env: dict[str, str]) -> Path:
    done = looprail("init", "demo", "--agent", agent, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    return tmp_path / "demo"


def _transcripts(demo: Path) -> list[Path]:
    runs = list((demo / ".looprail" / "logs").iterdir())
    return sorted(p for run in runs for p in run.iterdir() if p.is_dir())


@pytest.mark.parametrize("agent", AGENTS)
def test_the_real_cli_ships_the_example_with_parallel_worktrees(tmp_path: Path, agent: str) -> None:
    _cli(agent)
    with ModelServer() as server:
        env = real_env(agent, tmp_path, server, tmp_path / "demo")
        demo = _init(tmp_path, agent, env)
        doctor = looprail("doctor", cwd=demo, env=env)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert f"✓ {agent}:" in doctor.stdout

        done = looprail("run", "--phase", "1", "--jobs", "2", cwd=demo, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "shipped" in done.stdout
        agent_turns = [c for c in server.calls if c.tools and c.status == 200]

    for name in ("a.txt", "b.txt", "c.txt"):
        assert (demo / name).is_file(), name
    # Each plan of wave 1 wrote in its own worktree: its commit holds its file.
    for plan, name in (("01-01", "a.txt"), ("01-02", "b.txt")):
        files = git(demo, "log", "--format=", "--name-only", "--grep", f"looprail: plan {plan}")
        assert name in files.split(), (plan, files)
        assert f"written in {plan}" in (demo / name).read_text()  # in the worktree's folder
    assert "written in demo" in (demo / "c.txt").read_text()  # wave 2 in the main tree
    merges = [s for s in git(demo, "log", "--format=%s").splitlines() if "merge plan" in s]
    assert [m.split()[3] for m in reversed(merges)] == ["01-01", "01-02"]
    assert git(demo, "worktree", "list").count("\n") == 1  # the worktrees are gone
    assert "looprail/" not in git(demo, "branch")

    folders = _transcripts(demo)
    assert len(folders) == 7, [p.name for p in folders]  # discuss, plan, 3 tasks, verify, ship
    for folder in folders:
        meta = json.loads((folder / "meta.json").read_text())
        assert meta["ok"] and meta["complete"] and meta["sessionId"], (folder.name, meta)

    # Every model turn reported 1000 input tokens (600 from the cache) and 50 output: the
    # report counts the same for every CLI, whichever way it reports the cache.
    spend = json.loads(looprail("report", "--json", cwd=demo, env=env).stdout)["spend"]["run"]
    turns = len(agent_turns)
    assert spend["calls"] == 7
    assert (spend["inputTokens"], spend["cachedInputTokens"], spend["outputTokens"]) == (
        1000 * turns,
        600 * turns,
        50 * turns,
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_a_lazy_model_halts_naming_the_artifact_and_the_transcript(
    tmp_path: Path, agent: str
) -> None:
    _cli(agent)
    with ModelServer(Script(mode="lazy")) as server:
        env = real_env(agent, tmp_path, server, tmp_path / "demo")
        demo = _init(tmp_path, agent, env)
        done = looprail("run", "--phase", "1", cwd=demo, env=env)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "did not deliver: no CONTEXT.md in the phase folder" in said
    assert "I looked around and wrote nothing." in said  # the agent's last words
    folder = _transcripts(demo)[0]
    assert f"(transcript: {folder.relative_to(demo)})" in said


@pytest.mark.parametrize("agent", AGENTS)
def test_a_long_prompt_starting_with_a_dash_arrives_whole_from_another_folder(
    tmp_path: Path, agent: str
) -> None:
    _cli(agent)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The planner's prompt: its brief (a project's own, starting with `-`), then the phase's
    # CONTEXT.md (which the model writes), then what is owed: 60 kB each, over 100 kB in all.
    brief = "--help me: BRIEF-START\n" + _filler("brief", 1200) + "BRIEF-END\n"
    context = "# Context\n\nCONTEXT-START\n" + _filler("context", 1200) + "CONTEXT-END\n"
    with ModelServer(Script(context=context)) as server:
        env = real_env(agent, tmp_path, server, tmp_path / "demo")
        demo = _init(tmp_path, agent, env)
        (demo / ".looprail" / "roles" / "planner.md").write_text(brief)
        done = looprail("run", str(demo), "--phase", "1", "--jobs", "2", cwd=elsewhere, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        plan = next(c for c in server.calls if c.tools and "BRIEF-START" in c.text)
    prompt = (_transcripts(demo)[1] / "prompt.md").read_text()
    assert len(prompt.encode()) > 100_000 and prompt.startswith("--help me")
    assert brief.strip() in plan.text and context.strip() in plan.text  # whole, in order
    assert plan.text.index("BRIEF-END") < plan.text.index("CONTEXT-START")
    assert plan.text.index("CONTEXT-END") < plan.text.index("## What you owe")
    assert list(elsewhere.iterdir()) == []  # nothing written where looprail was started
    assert (demo / "a.txt").is_file() and (demo / "b.txt").is_file()


def _filler(what: str, lines: int) -> str:
    return "".join(f"- line {i:05d} of the {what}, to be delivered whole\n" for i in range(lines))


@pytest.mark.parametrize(("agent", "status"), [(a, s) for a in AGENTS for s in ("401", "429")])
def test_an_api_error_halts_at_once_with_what_it_was(
    tmp_path: Path, agent: str, status: str
) -> None:
    _cli(agent)
    with ModelServer(Script(mode=status)) as server:
        env = real_env(agent, tmp_path, server, tmp_path / "demo")
        demo = _init(tmp_path, agent, env)
        start = time.monotonic()
        done = looprail("run", "--phase", "1", cwd=demo, env=env)
        took = time.monotonic() - start
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    label = "not authenticated" if status == "401" else "rate limited"
    assert f"{agent}: {label}: " in said, said
    assert "last words: }" not in said
    meta = json.loads((_transcripts(demo)[0] / "meta.json").read_text())
    assert meta["errorStatus"] in (int(status), None) and meta["ok"] is False
    assert took < 90, f"{agent} took {took:.0f}s to give up on a {status}"


# What each CLI's default permissions (the ones looprail passes, docs/agents.md) do with a
# shell command the model asks for, run in the task's folder: a file command (`touch`), and
# any other program (`sh -c`).
DEFAULT_SHELL = {
    # acceptEdits: file commands in the working folder are accepted like edits; any other
    # command would ask, and print mode refuses it (a permission denial)
    ("claude", "touch"): "ran",
    ("claude", "sh"): "refused",
    # workspace-write: every command runs in Codex's sandbox, writing inside the workspace
    ("codex", "touch"): "ran",
    ("codex", "sh"): "ran",
    # OpenCode's default `permission` allows bash
    ("opencode", "touch"): "ran",
    ("opencode", "sh"): "ran",
    # auto_edit: headless Gemini CLI does not offer its shell tool at all
    ("gemini", "touch"): "not offered",
    ("gemini", "sh"): "not offered",
}
COMMANDS = {"touch": "touch {mark}", "sh": "sh -c ': > {mark}'"}


@pytest.mark.parametrize(("agent", "command"), sorted(DEFAULT_SHELL))
def test_the_default_permissions_and_a_shell_command(
    tmp_path: Path, agent: str, command: str
) -> None:
    _cli(agent)
    project = tmp_path / "proj"
    phase = project / ".planning" / "phases" / "01-demo"
    phase.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    lines: list[str] = []
    with ModelServer(Script(mode="shell", shell=COMMANDS[command])) as server:
        env = real_env(agent, tmp_path, server, project)
        runtime = create_runtime(
            agent, RuntimeSettings(project=project, progress=lines.append, env=env)
        )
        task = TaskWork(
            plan_id="01-01", task_id="T1", index=1, name="Out", files=("out.txt",), action="Do"
        )
        ctx = DispatchContext(project=project, phase_number="1", phase_dir=phase)
        outcome = execute_task(runtime, task, ctx)
        offered = {c.shell_offered for c in server.calls if c.shell_offered is not None}
    # The shell command does not decide: the task wrote its file, so it is done.
    assert outcome.ok, outcome.detail
    assert (project / "out.txt").is_file()
    ran = (project / SHELL_MARK).exists()
    seen = "ran" if ran else ("refused" if offered == {True} else "not offered")
    assert seen == DEFAULT_SHELL[agent, command], (seen, offered)
    meta = json.loads((project / str(outcome.transcript) / "meta.json").read_text())
    if seen == "refused":  # surfaced: on the run's progress and in the transcript
        assert meta["permissionDenials"] and meta["permissionDenials"][0].startswith("Bash ")
        assert any(f"{agent} refused 1 tool call" in line for line in lines), lines


def test_gemini_in_an_untrusted_folder_is_caught_by_doctor_and_named_by_the_run(
    tmp_path: Path,
) -> None:
    _cli("gemini")
    with ModelServer() as server:
        env = real_env("gemini", tmp_path, server, tmp_path / "demo")
        (Path(env["HOME"]) / ".gemini" / "trustedFolders.json").unlink()
        demo = _init(tmp_path, "gemini", env)
        doctor = looprail("doctor", cwd=demo, env=env)
        assert doctor.returncode != 0
        assert f"✗ gemini: {demo} is not a trusted folder" in doctor.stdout, doctor.stdout
        assert "✓ gemini: auth gemini-api-key (settings.json)" in doctor.stdout
        done = looprail("run", "--phase", "1", cwd=demo, env=env)
        assert server.calls == []  # headless Gemini CLI stops before any request
    said = done.stdout + done.stderr
    assert done.returncode != 0
    assert "gemini exited 55 (the folder is not trusted" in said, said


# What each CLI does when the model runs the task's own check with its shell tool: the check
# is in the task (`TaskWork.checks`), so the adapter permits it (runtime/permits.py).
# A check that is not one simple command permits nothing: the defaults of DEFAULT_SHELL hold.
CHECK = "sh check.sh"  # a program acceptEdits alone would refuse (see DEFAULT_SHELL)
CHECK_SHELL = {
    ("claude", CHECK): "ran",
    ("codex", CHECK): "ran",
    ("opencode", CHECK): "ran",
    ("gemini", CHECK): "ran",
    ("claude", CHECK + " && true"): "refused",
    ("codex", CHECK + " && true"): "ran",
    ("opencode", CHECK + " && true"): "ran",
    ("gemini", CHECK + " && true"): "not offered",
    # another task's check permits only itself
    ("claude", "sh other.sh"): "refused",
    ("gemini", "sh other.sh"): "refused",
}


@pytest.mark.parametrize(("agent", "check"), sorted(CHECK_SHELL))
def test_the_executor_may_run_its_tasks_check(tmp_path: Path, agent: str, check: str) -> None:
    _cli(agent)
    project = tmp_path / "proj"
    phase = project / ".planning" / "phases" / "01-demo"
    phase.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "check.sh").write_text("echo CHECK-SAID-$((6 * 7))\n")
    lines: list[str] = []
    with ModelServer(Script(mode="shell", shell=CHECK)) as server:
        env = real_env(agent, tmp_path, server, project)
        runtime = create_runtime(
            agent, RuntimeSettings(project=project, progress=lines.append, env=env)
        )
        task = TaskWork(
            plan_id="01-01", task_id="T1", index=1, name="Out", files=("out.txt",),
            action="Do", checks=(check,),
        )  # fmt: skip
        ctx = DispatchContext(project=project, phase_number="1", phase_dir=phase)
        outcome = execute_task(runtime, task, ctx)
        offered = {c.shell_offered for c in server.calls if c.shell_offered is not None}
        results = "\n".join(c.results for c in server.calls)
    assert outcome.ok, outcome.detail
    ran = "CHECK-SAID-42" in results  # the tool result is the check's output
    seen = "ran" if ran else ("refused" if offered == {True} else "not offered")
    assert seen == CHECK_SHELL[agent, check], (seen, offered, results[-500:])
    meta = json.loads((project / str(outcome.transcript) / "meta.json").read_text())
    if agent == "claude":  # the one CLI that reports its refusals
        assert bool(meta.get("permissionDenials")) == (seen == "refused"), meta
