"""`looprail run --interactive` with the real Claude Code and Gemini CLI on a real
pseudo-terminal, against the scripted model server (tests/support/model_server.py): the CLI's
interactive screen gets, as its first message, the 0600 file holding the discuss prompt to read
(never the prompt itself: issue 40), the model reads it and writes CONTEXT.md
with the CLI's own tool, the user ends the session with the keys they would press (`/exit` and
Enter; Ctrl-C twice), and the loop goes on with the same CLI, non-interactive, to plan (then the
test stops the run with SIGTERM, as a user may: the rest of the loop is test_real_agents.py's).

Each CLI gets a fresh HOME set up as after a first interactive start (claude: onboarding done,
the test's API key approved, the project trusted; gemini, opencode: as `real_env` sets them).
Codex's screen is not driven here (see docs/agents.md, "An interactive discuss")."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.e2e.test_interactive_discuss import context_of
from tests.support.agents import looprail
from tests.support.model_server import ModelServer, brief_file
from tests.support.real_agents import KEY, real_cli, real_env
from tests.support.terminal import Terminal

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is needed for plan worktrees"),
    pytest.mark.real_agents,
]

# How a user ends each CLI's interactive session.
END_KEYS = {
    "claude": (b"/exit", b"\r"),
    "gemini": (b"\x03", b"\x03"),
    "opencode": (b"\x03",),  # its screen ends on the first
}


@pytest.mark.parametrize("agent", sorted(END_KEYS))
def test_the_real_cli_talks_on_the_terminal_then_the_loop_ships(tmp_path: Path, agent: str) -> None:
    if real_cli(agent) is None:
        pytest.skip(f"the real `{agent}` is not installed (.ci/run installs it)")
    with ModelServer() as server:
        demo = tmp_path / "demo"
        env = {**real_env(agent, tmp_path, server, demo), "TERM": "xterm-256color"}
        if agent == "claude":  # what the first interactive start asks, answered once
            (Path(env["HOME"]) / ".claude.json").write_text(
                json.dumps(
                    {
                        "hasCompletedOnboarding": True,
                        "theme": "dark",
                        "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
                        "projects": {str(demo): {"hasTrustDialogAccepted": True}},
                    }
                )
            )
        done = looprail("init", "demo", "--agent", agent, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        argv = ["run", "--phase", "1", "--interactive"]
        with Terminal.looprail(*argv, cwd=demo, env=env, answer=True) as t:
            t.expect(f"{agent} has the terminal", timeout=60)
            t.expect("CONTEXT.md", timeout=120)  # the model wrote it through the CLI's tool
            for _ in range(600):
                t.read_for(0.2)
                if list((demo / ".planning" / "phases").glob("*/*-CONTEXT.md")):
                    break
            t.read_for(3)  # the CLI's screen settles after the turn
            turns = [call for call in server.calls if call.tools]  # not titles or probes
            assert turns, "the CLI never asked the model"
            brief = assert_brief_read_from_its_file(turns[0].text, [c.results for c in turns[1:]])
            t.keys(*END_KEYS[agent])
            t.expect("orchestrator did the discuss work", timeout=60)
            try:
                t.expect("planner did the plan work", timeout=300)  # the same CLI, `-p`/`run`
            except AssertionError as exc:  # what the CLI itself logged says why
                raise AssertionError(f"{exc}\n{agent}'s own log:\n{cli_log(env)}") from None
            os.kill(t.pid, signal.SIGTERM)
            code = t.wait(timeout=120)
        assert code == 128 + signal.SIGTERM, t.text[-3000:]
        assert "# Context" in context_of(demo).read_text()
        # a brief handed over from a private folder outside the project (gemini) is gone
        assert brief.is_relative_to(demo) or not brief.parent.exists()
        assert list(context_of(demo).parent.glob("*-PLAN.md"))
        run = next((demo / ".looprail" / "logs").iterdir())
        discuss = next(p for p in sorted(run.iterdir()) if "phase-discuss" in p.name)
        assert json.loads((discuss / "meta.json").read_text())["interactive"] is True


def assert_brief_read_from_its_file(first: str, results: list[str]) -> Path:
    """The first message only names the brief's file (the user alone can read it); the brief
    reaches the model as the result of the CLI's own read tool (issue 40: never in argv)."""
    named = brief_file(first)
    assert named, first[-2000:]
    brief = Path(named)
    assert brief.name == "prompt.md" and brief.stat().st_mode & 0o777 == 0o600
    assert "## This is a conversation" not in first
    read = [r for r in results if "## This is a conversation" in r and "Step: discuss" in r]
    assert read, "the brief never reached the model through the CLI's read tool"
    return brief


def cli_log(env: dict[str, str]) -> str:
    """The tail of the CLI's own log in the test's HOME (OpenCode writes one), or a note."""
    logs = sorted((Path(env["HOME"]) / ".local" / "share" / "opencode" / "log").glob("*.log"))
    return "\n".join(p.read_text(errors="replace")[-6000:] for p in logs) or "(none written)"
