"""What the executor may run without asking (looprail/runtime/permits.py): the task's simple
check commands, as each agent CLI's allow-list names them, and never anything wider."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from looprail.runtime.agents import ADAPTERS, AgentSettings
from looprail.runtime.base import Request, TaskWork
from looprail.runtime.permits import claude_rules, gemini_rules, permitted, simple
from tests.support.agents import agent_env, looprail

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_./:=@%+,-", min_size=1, max_size=12)
SIMPLE = st.lists(WORD, min_size=1, max_size=5).map(" ".join)
# What could chain, redirect, expand, quote or glob, in a shell or in an allow rule's pattern
SHELL = [";", "&&", "||", "|", "&", "$(", "`", ">", "<", "'", '"', "*", "?", "[", "(", ")",
         "{", "}", "~", "#", "\\", "\n", "\t", "$HOME"]  # fmt: skip


def task(*checks: str, kind: str = "task") -> Request:
    work = TaskWork(plan_id="01-01", task_id="T1", index=1, name="t", checks=checks)
    return Request(
        kind=kind, name="01-01/T1", project="/p", point=None, cap_id=None, flavor="gsd",
        phase={"number": "1", "dir": "/p/.planning/phases/01-x"}, task=work,
    )  # fmt: skip


@given(command=SIMPLE)
def test_a_simple_command_is_permitted_as_itself(command: str) -> None:
    assert simple(command) == command
    assert claude_rules([command]) == [f"Bash({command}:*)"]
    assert gemini_rules([command]) == [f"run_shell_command({command})"]
    assert shlex.split(command) == command.split()  # no quoting the shell would read


@given(head=SIMPLE, meta=st.sampled_from(SHELL), tail=st.text(max_size=20))
def test_a_shell_metacharacter_anywhere_refuses_the_whole_command(
    head: str, meta: str, tail: str
) -> None:
    command = head + meta + tail
    assert simple(command) is None
    assert permitted([command]) == ([], [command])  # never narrowed to its first command
    assert claude_rules([command]) == [] and gemini_rules([command]) == []


@given(commands=st.lists(st.one_of(SIMPLE, st.text(max_size=30)), max_size=6))
def test_every_rule_names_one_command_the_plan_wrote(commands: list[str]) -> None:
    allowed, refused = permitted(commands)
    assert len(allowed) == len(set(allowed))
    for rule in claude_rules(commands):
        inner = rule.removeprefix("Bash(").removesuffix(":*)")
        assert inner in allowed and inner in [simple(c) for c in commands]
        assert not set(inner) & set(";&|$`<>'\"*?()[]{}~#\\\n\t")
    assert all(c in commands for c in refused)


def test_claude_allows_the_tasks_checks_and_keeps_its_permission_mode() -> None:
    argv = ADAPTERS["claude"]().argv(
        "P", task("pytest tests/x.py", "npm test && rm -rf /"), AgentSettings(), git=True
    )
    at = argv.index("--allowedTools")
    assert argv[at + 1] == "Bash(pytest tests/x.py:*)"
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert "bypassPermissions" not in argv and "rm -rf" not in " ".join(argv)


def test_claude_adds_the_checks_to_the_configured_tools_once() -> None:
    s = AgentSettings.parse("claude", {"allowedTools": ["Read", "Bash(pytest:*)"]})
    argv = ADAPTERS["claude"]().argv("P", task("pytest", "ruff check ."), s, git=True)
    assert argv[argv.index("--allowedTools") + 1] == "Read,Bash(pytest:*),Bash(ruff check .:*)"


def test_only_a_task_call_widens_and_only_gemini_and_claude_take_rules() -> None:
    for name, adapter in ADAPTERS.items():
        plain = adapter().argv("P", task(kind="task"), AgentSettings(), git=True)
        for kind in ("verdict", "agent", "phase"):
            other = adapter().argv("P", task("pytest", kind=kind), AgentSettings(), git=True)
            assert "pytest" not in " ".join(other), (name, kind)
        checked = adapter().argv("P", task("pytest"), AgentSettings(), git=True)
        widened = [a for a in checked if a not in plain]
        expected = {
            "claude": ["--allowedTools", "Bash(pytest:*)"],
            "gemini": ["--allowed-tools=run_shell_command(pytest)"],
        }
        assert widened == expected.get(name, []), name


PLAN = """---
phase: 01-first
plan: 01
---
<tasks>
<task type="auto"><name>a</name><verify><automated>pytest tests/x.py</automated>
<automated>cd web && npm test</automated></verify></task>
<task type="auto"><name>b</name><verify><automated>pytest tests/x.py</automated></verify></task>
</tasks>
"""


def test_doctor_shows_what_the_executor_may_run(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    shown = {}
    for agent in ("claude", "gemini", "codex"):
        project = tmp_path / agent
        assert (
            looprail("init", str(project), "--agent", agent, cwd=tmp_path, env=env).returncode == 0
        )
        (project / ".planning" / "phases" / "01-first" / "01-01-PLAN.md").write_text(PLAN)
        done = looprail("doctor", "--json", cwd=project, env=env)
        checks = json.loads(done.stdout)["checks"]
        shown[agent] = next(c for c in checks if "may_run" in c)
        assert "(2 check commands in the plans)" in shown[agent]["message"]
        text = looprail("doctor", cwd=project, env=env).stdout
        assert f"\n  {shown[agent]['may_run'][0]}\n" in text
    refused = "not 'cd web && npm test': not one simple command (looprail runs it after)"
    assert shown["claude"]["may_run"] == ["Bash(pytest tests/x.py:*)", refused]
    assert shown["gemini"]["may_run"] == ["run_shell_command(pytest tests/x.py)", refused]
    assert shown["codex"]["may_run"] == ["any command, inside its --sandbox", refused]
