"""No prompt text ever appears on an agent's command line (issue 40, point 2): any local user
reads `/proc/PID/cmdline` for as long as the agent runs. Each call of a real `looprail run`,
for every adapter and for the interactive discuss, is checked against the command line the
fake CLI read from its own `/proc/PID/cmdline`; the interactive session's brief is a file only
the user can read."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from looprail.runtime.adapter import LONG_PROMPT
from tests.e2e.test_interactive_discuss import ANSWER, init_demo, interactive_env
from tests.support.agents import AGENTS, agent_env, calls, looprail
from tests.support.terminal import Terminal

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is needed for plan worktrees",
)

MARK = "zq-context-marker-7781"  # in CONTEXT.md, so in every later prompt


def leaked(call: dict) -> list[str]:
    """The lines of the call's prompt (16 characters and more) found on its command line; the
    fake reads the prompt as the real CLI does, the fixed line standing in argv (which says to
    read stdin) and stdin."""
    line = "\0".join(call["cmdline"])
    lines = {x.strip() for x in call["prompt"].splitlines() if len(x.strip()) >= 16}
    lines.discard(LONG_PROMPT)
    return sorted(x for x in lines if x in line)


@pytest.mark.parametrize("agent", AGENTS)
def test_no_prompt_text_is_ever_on_an_agents_command_line(tmp_path: Path, agent: str) -> None:
    env = agent_env(tmp_path)
    done = looprail("init", "demo", "--agent", agent, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "demo"
    phase = next((project / ".planning" / "phases").iterdir())
    (phase / "01-CONTEXT.md").write_text(f"# Phase context\n\n- Secret plan: {MARK}\n")
    done = looprail("run", "--phase", "1", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    made = calls(tmp_path)
    assert len(made) >= 4 and all(c["agent"] == agent for c in made)
    assert sum(MARK in c["prompt"] for c in made) >= 3  # the prompts did carry it
    for call in made:
        assert len(call["prompt"]) > 200  # a whole prompt reached the CLI
        assert leaked(call) == [], call["cmdline"]
        assert MARK not in "\0".join(call["cmdline"])


@pytest.mark.parametrize("agent", AGENTS)
def test_the_interactive_discuss_is_told_to_read_a_private_file(tmp_path: Path, agent: str) -> None:
    env = interactive_env(tmp_path)
    demo = init_demo(tmp_path, agent, env)
    with Terminal.looprail("run", "--phase", "1", "--interactive", cwd=demo, env=env) as t:
        t.expect(f"{agent} here. What must phase 1 deliver?")
        t.send(ANSWER)
        code = t.wait()
    assert code == 0, t.text
    talks = [c for c in calls(tmp_path) if c.get("interactive")]
    assert len(talks) == 1 and "## This is a conversation" in talks[0]["prompt"]
    assert leaked(talks[0]) == [], talks[0]["cmdline"]
    run = next((demo / ".looprail" / "logs").iterdir())
    for brief in run.glob("*/prompt.md"):
        assert stat.S_IMODE(brief.stat().st_mode) == 0o600, brief
    for call in calls(tmp_path):
        assert leaked(call) == [], call["cmdline"]
