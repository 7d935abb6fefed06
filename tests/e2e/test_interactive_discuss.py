"""`looprail run --interactive` through a real pseudo-terminal: the discuss step is handed to the
agent CLI's interactive mode (a stand-in, `tests/fakes/interactive_agent.py`, installed as
`claude`, `codex`, `opencode` and `gemini`, which asks a question on the terminal and writes
the answer into CONTEXT.md), or to the local runtime's starter orchestrator; the loop goes on
to plan with what was said. A session that ends without CONTEXT.md halts naming the file; no
terminal at all is refused at once (exit 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import FAKES
from tests.support.agents import AGENTS, agent_env, calls, looprail
from tests.support.terminal import Terminal

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is needed for plan worktrees",
)

STAND_IN = FAKES / "interactive_agent.py"
ANSWER = "a todo list whose items have due dates"


def interactive_env(root: Path, **extra: str) -> dict[str, str]:
    """The fakes' environment, with the stand-in first on PATH as each agent CLI (it is the
    fake CLI for every call that is not interactive)."""
    bin_dir = root / "interactive-bin"
    bin_dir.mkdir(exist_ok=True)
    for name in AGENTS:
        target = bin_dir / name
        source = f"compile(open({str(STAND_IN)!r}).read(), {str(STAND_IN)!r}, 'exec')"
        target.write_text(  # argv[0] stays the CLI's name, `__file__` the stand-in's
            f"#!{sys.executable}\nexec({source}, {{'__name__': '__main__', "
            f"'__file__': {str(STAND_IN)!r}}})\n"
        )
        target.chmod(0o755)
    env = agent_env(root, **extra)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env.pop("COLUMNS", None)
    return env


def init_demo(root: Path, agent: str, env: dict[str, str]) -> Path:
    done = looprail("init", "demo", "--agent", agent, cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    return root / "demo"


def context_of(demo: Path) -> Path:
    found = sorted((demo / ".planning" / "phases").glob("*/*-CONTEXT.md"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_discuss_is_a_conversation_on_the_terminal_and_the_loop_goes_on(
    tmp_path: Path, agent: str
) -> None:
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, agent, env)
    with Terminal.looprail("run", "--phase", "1", "--interactive", cwd=demo, env=env) as t:
        t.expect(f"{agent} here. What must phase 1 deliver?")
        assert "has the terminal" in t.text and "is not captured" in t.text
        t.send(ANSWER)
        code = t.wait()
    assert code == 0, t.text
    assert "shipped" in t.text
    assert ANSWER in context_of(demo).read_text()

    talks = [c for c in calls(tmp_path) if c.get("interactive")]
    assert len(talks) == 1 and talks[0]["agent"] == agent
    # The loop went on to plan, and the planner was handed what the user said.
    plan = next(
        c for c in calls(tmp_path) if "-PLAN.md" in c["prompt"].split("## What you owe")[-1]
    )
    assert ANSWER in plan["prompt"]
    # The session's folder keeps the prompt and what it came to, not the conversation.
    run = next((demo / ".looprail" / "logs").iterdir())
    discuss = next(p for p in sorted(run.iterdir()) if "phase-discuss" in p.name)
    meta = json.loads((discuss / "meta.json").read_text())
    assert meta["interactive"] is True and meta["ok"] is True
    assert meta["transcript"].startswith("not captured")
    assert "<prompt>" in meta["argv"]
    assert not (discuss / "stdout.jsonl").exists()
    assert "## This is a conversation" in (discuss / "prompt.md").read_text()
    # the report lists the session beside the other calls, with nothing the CLI did not say
    report = looprail("report", cwd=demo, env=env)
    assert report.returncode == 0, report.stderr
    assert str(discuss.relative_to(demo)) in report.stdout


def test_a_session_that_ends_without_context_md_halts_naming_the_file(tmp_path: Path) -> None:
    env = interactive_env(tmp_path, FAKE_AGENT_MODE="lazy")
    demo = init_demo(tmp_path, "claude", env)
    with Terminal.looprail("run", "--phase", "1", "--interactive", cwd=demo, env=env) as t:
        t.expect("What must phase 1 deliver?")
        t.send(ANSWER)
        code = t.wait()
    assert code == 1, t.text  # as for a lazy agent: the run halted
    halted = " ".join(line for line in t.text.splitlines() if "halted" in line)
    phase_dir = next((demo / ".planning" / "phases").iterdir())
    owed = f".planning/phases/{phase_dir.name}/01-CONTEXT.md"
    assert "discuss: orchestrator failed: orchestrator did not deliver: " in halted, t.text
    assert f"the interactive claude session exited 0 without writing {owed}" in halted
    assert not list(phase_dir.glob("*-CONTEXT.md"))
    assert not [c for c in calls(tmp_path) if "-PLAN.md" in c["prompt"]]  # no plan step


def test_the_local_runtime_gives_its_orchestrator_the_terminal(tmp_path: Path) -> None:
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, "local", env)
    with Terminal.looprail("run", "--phase", "1", "--interactive", cwd=demo, env=env) as t:
        t.expect("What must phase 1 deliver?")
        t.send(ANSWER)
        code = t.wait()
    assert code == 0, t.text
    assert "shipped" in t.text
    assert f"- The user: {ANSWER}" in context_of(demo).read_text()


def test_the_local_orchestrator_ending_without_an_answer_halts_naming_the_file(
    tmp_path: Path,
) -> None:
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, "local", env)
    with Terminal.looprail("run", "--phase", "1", "--interactive", cwd=demo, env=env) as t:
        t.expect("What must phase 1 deliver?")
        t.send_eof()  # Ctrl-D: the starter orchestrator writes nothing and exits 1
        code = t.wait()
    assert code == 1, t.text
    assert "the interactive .looprail/agents/orchestrator session exited 1 without writing " in (
        " ".join(t.text.split())
    )


def test_the_config_key_makes_a_run_interactive(tmp_path: Path) -> None:
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, "codex", env)
    config = demo / ".planning" / "config.json"
    config.write_text(json.dumps({"looprail": {"agent": "codex", "interactive": True}}))
    with Terminal.looprail("run", "--phase", "1", cwd=demo, env=env) as t:
        t.expect("What must phase 1 deliver?")
        t.send(ANSWER)
        assert t.wait() == 0, t.text
    assert ANSWER in context_of(demo).read_text()


def test_without_a_terminal_interactive_is_refused_at_once(tmp_path: Path) -> None:
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, "claude", env)
    done = looprail("run", "--phase", "1", "--interactive", cwd=demo, env=env, process=True)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "looprail: error: --interactive: the discuss step is a conversation on your terminal, "
        "and stdin is not a terminal; run it from a terminal"
    ], done.stderr
    assert not (demo / ".looprail" / "journal").exists() and not calls(tmp_path)
    # the config's key says the same, and names the way out
    config = demo / ".planning" / "config.json"
    config.write_text(json.dumps({"looprail": {"agent": "claude", "interactive": True}}))
    done = looprail("resume", cwd=demo, env=env, process=True)
    assert done.returncode == 1, done.stderr
    assert "looprail.interactive in .planning/config.json: " in done.stderr
    assert "or pass --no-interactive" in done.stderr
    done = looprail("run", "--phase", "1", "--no-interactive", cwd=demo, env=env, process=True)
    assert done.returncode == 0, done.stderr
    assert not [c for c in calls(tmp_path) if c.get("interactive")]


def test_a_bad_interactive_key_is_one_line_naming_it(tmp_path: Path) -> None:
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, "claude", env)
    config = demo / ".planning" / "config.json"
    config.write_text(json.dumps({"looprail": {"agent": "claude", "interactive": "yes"}}))
    done = looprail("run", "--phase", "1", cwd=demo, env=env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "looprail: error: .planning/config.json: looprail.interactive: must be true or false"
    ], done.stderr


def test_doctor_says_what_the_discuss_would_talk_with(tmp_path: Path) -> None:
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, "gemini", env)
    doctor = looprail("doctor", cwd=demo, env=env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert (
        "✓ interactive discuss (run --interactive): gemini --approval-mode auto_edit "
        "--prompt-interactive=<prompt>, on your terminal"
    ) in doctor.stdout
    config = demo / ".planning" / "config.json"
    config.write_text(json.dumps({"looprail": {"agent": "gemini", "interactive": True}}))
    doctor = looprail("doctor", cwd=demo, env=env, process=True)
    assert "! looprail.interactive is on (gemini " in doctor.stdout
    assert "is not a terminal: a run from here refuses (exit 1) unless given --no-interactive" in (
        doctor.stdout
    )
    with Terminal.looprail("doctor", cwd=demo, env=env) as t:
        assert t.wait() == 0, t.text
    assert "✓ looprail.interactive is on: the discuss step talks with you here (gemini " in t.text


def test_ctrl_c_ends_the_session_not_the_run(tmp_path: Path) -> None:
    """Ctrl-C is the session's while it runs (the stand-in reads a line in the terminal's
    cooked mode, so the terminal sends SIGINT to the whole foreground group): it ends the
    conversation, and the run halts as for any session that wrote nothing."""
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, "opencode", env)
    with Terminal.looprail("run", "--phase", "1", "--interactive", cwd=demo, env=env) as t:
        t.expect("What must phase 1 deliver?")
        t.keys(b"\x03")
        code = t.wait()
    assert code == 1, t.text  # halted, not interrupted (130)
    assert "the interactive opencode session was killed by SIGINT without writing " in (
        " ".join(t.text.split())
    )
    assert "interrupted" not in t.text


def test_a_configured_timeout_stops_a_session_nobody_answers(tmp_path: Path) -> None:
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, "claude", env)
    config = demo / ".planning" / "config.json"
    config.write_text(json.dumps({"looprail": {"agent": "claude", "timeouts": {"interactive": 2}}}))
    with Terminal.looprail("run", "--phase", "1", "--interactive", cwd=demo, env=env) as t:
        t.expect("What must phase 1 deliver?")
        code = t.wait(timeout=60)  # nobody answers
    assert code == 1, t.text
    assert "the interactive claude session timed out and was stopped without writing " in (
        " ".join(t.text.split())
    )
