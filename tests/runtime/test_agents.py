"""Agent runtimes and the runtime plugin layer: the registry (entry points), the conformance kit
every runtime passes, what an agent is asked (prompts), adapters' argv and output parsing."""

from __future__ import annotations

import json
import stat
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from looprail.cli import main
from looprail.hooks.gates.checks import CheckContext, CheckError, Verdict, evaluate_check
from looprail.runtime import registry
from looprail.runtime.adapter import classify
from looprail.runtime.agents import ADAPTERS, AgentSettings, extract_verdict
from looprail.runtime.base import (
    BaseRuntime,
    DispatchContext,
    Outcome,
    Request,
    TaskWork,
    deliver_context,
    deliver_message,
    do_phase_work,
    execute_task,
    run_skill,
    spawn_agent,
)
from looprail.runtime.local import LocalRuntime
from looprail.runtime.registry import RuntimeSettings, create_runtime
from looprail.runtime.scripted import ScriptedRuntime
from looprail.testing.conformance import check_runtime
from tests.support import REPO
from tests.support.agents import AGENTS, fake_bin


def executable(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".planning" / "phases" / "01-demo").mkdir(parents=True)
    # commands and checks run as with the local runtime, whatever the agent
    executable(root / ".looprail" / "commands" / "conformance", "print('ok')\n")
    executable(
        root / ".looprail" / "checks" / "conf",
        "import json; print(json.dumps({'block': False, 'message': ''}))\n",
    )
    return root


@pytest.fixture
def fakes_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = fake_bin(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_AGENT_LOG", str(tmp_path / "calls.jsonl"))
    return bin_dir


def phase_dir(project: Path) -> Path:
    return project / ".planning" / "phases" / "01-demo"


# ── the registry ─────────────────────────────────────────────────────────────────────────────


def test_pyproject_registers_every_builtin_runtime_as_an_entry_point() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    declared = meta["project"]["entry-points"][registry.GROUP]
    assert declared == dict(registry.BUILTIN)
    assert set(declared) == {"local", "scripted", "claude", "codex", "opencode", "gemini"}


@pytest.mark.parametrize("name", sorted(registry.BUILTIN))
def test_each_registered_name_builds_its_runtime(name: str, project: Path) -> None:
    runtime = create_runtime(name, RuntimeSettings(project=project))
    assert type(runtime).name == name and isinstance(runtime, BaseRuntime)


class EchoRuntime(BaseRuntime):
    """A third-party runtime: one method. Role work writes what the loop needs."""

    name = "echo"

    @classmethod
    def from_settings(cls, settings: RuntimeSettings) -> EchoRuntime:
        return cls(progress=settings.progress)

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        if request.kind in ("query", "verdict"):
            return Outcome.succeeded(data={"block": False, "message": "echo"})
        if request.kind == "task":
            Path(ctx.workdir or ctx.project, "echo.txt").write_text(request.name)
        return Outcome.succeeded(f"echo {request.kind} {request.name}")


def test_a_third_party_runtime_is_found_through_the_entry_point_group(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    point = EntryPoint(
        name="echo", value="tests.runtime.test_agents:EchoRuntime", group=registry.GROUP
    )
    monkeypatch.setattr(registry, "_entry_points", lambda: {"echo": point})
    assert "echo" in registry.available()
    check_runtime(
        lambda: create_runtime("echo", RuntimeSettings(project=project)),
        project,
        expect_ok=("skill", "agent", "verdict", "phase", "task", "message", "compact"),
    )


def test_a_broken_plugin_is_one_line(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    point = EntryPoint(name="broken", value="no_such_module_x:Thing", group=registry.GROUP)
    monkeypatch.setattr(registry, "_entry_points", lambda: {"broken": point})
    code = main(["run", str(project), "--phase", "1", "--agent", "broken", "--no-journal"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1
    assert "runtime 'broken' (no_such_module_x:Thing) cannot be loaded: ModuleNotFoundError" in err


def test_an_unknown_agent_is_a_usage_error_naming_the_choices(project: Path, capsys) -> None:
    code = main(["run", str(project), "--phase", "1", "--agent", "nope", "--no-journal"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == (
        "looprail: error: unknown agent runtime 'nope'; choose one of: "
        "claude, codex, gemini, local, opencode, scripted"
    )


@pytest.mark.parametrize(
    ("looprail_section", "message"),
    [
        ({"agent": 3}, ".planning/config.json: looprail.agent: must be a runtime name"),
        (
            {"agent": "claude", "agents": {"claude": {"permisionMode": "x"}}},
            ".planning/config.json: looprail.agents.claude.permisionMode: unknown setting",
        ),
        (
            {"agent": "codex", "agents": {"codex": {"args": "--x"}}},
            ".planning/config.json: looprail.agents.codex.args: must be a list of strings",
        ),
        (  # the prompt comes after the args: a "--" there would make it a positional
            {"agent": "gemini", "agents": {"gemini": {"args": ["--debug", "--"]}}},
            '.planning/config.json: looprail.agents.gemini.args: "--" ends the CLI\'s options',
        ),
        (
            {"agent": "claude", "worktrees": "yes"},
            ".planning/config.json: looprail.worktrees: must be true or false",
        ),
    ],
)
def test_bad_agent_config_is_one_line(project: Path, capsys, looprail_section, message) -> None:
    (project / ".planning" / "config.json").write_text(json.dumps({"looprail": looprail_section}))
    code = main(["run", str(project), "--phase", "1", "--no-journal"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and message in err, err


def test_config_picks_the_agent_and_the_flag_wins(project: Path) -> None:
    config = {"looprail": {"agent": "codex"}}
    assert registry.agent_name(config) == "codex"
    assert registry.agent_name(config, "gemini") == "gemini"
    assert registry.agent_name(None) == "local"


# ── the conformance kit, for every runtime ─────────────────────────────────────────────────


def test_local_runtime_conforms(project: Path) -> None:
    write = (
        "import json, sys, pathlib; r = json.load(sys.stdin); d = pathlib.Path(r['phase']['dir'] or '.')\n"
        "s = r.get('step')\n"
        "if s == 'discuss': (d / '01-CONTEXT.md').write_text('c')\n"
        "if s == 'verify': (d / '01-VERIFICATION.md').write_text('---\\nstatus: passed\\n---\\n')\n"
        "if r['kind'] == 'verdict': print(json.dumps({'block': False}))\n"
    )
    for name in ("orchestrator", "planner", "verifier", "executor", "conformance"):
        executable(project / ".looprail" / "agents" / name, write)
    executable(project / ".looprail" / "skills" / "gsd-conformance", "")
    executable(project / ".looprail" / "session", "")
    out = check_runtime(
        lambda: LocalRuntime(project, progress=lambda _l: None),
        project,
        phase_dir=phase_dir(project),
        expect_ok=[*AGENT_KINDS, "command", "query"],
    )
    assert out["verdict"].data == {"block": False}


AGENT_KINDS = ("skill", "agent", "verdict", "phase", "task", "message", "compact")


def test_scripted_runtime_conforms(project: Path) -> None:
    check_runtime(ScriptedRuntime, project, expect_ok=[*AGENT_KINDS, "command", "query"])


@pytest.mark.parametrize("agent", AGENTS)
def test_agent_runtimes_conform(agent: str, project: Path, fakes_on_path: Path) -> None:
    make = lambda: create_runtime(agent, RuntimeSettings(project=project, progress=lambda _l: None))  # noqa: E731
    out = check_runtime(
        make, project, phase_dir=phase_dir(project), expect_ok=[*AGENT_KINDS, "command", "query"]
    )
    assert out["verdict"].data == {"block": False, "message": "fine"}
    assert out["phase"].usage is not None and out["phase"].usage.agent == agent
    assert out["phase"].transcript and (project / out["phase"].transcript / "prompt.md").is_file()
    assert (project / "c.txt").is_file()  # the task wrote its file


# ── what an agent is asked ─────────────────────────────────────────────────────────────────


def agent_runtime(name: str, project: Path):
    return create_runtime(name, RuntimeSettings(project=project, progress=lambda _l: None))


def ctx_for(project: Path, **extra) -> DispatchContext:
    return DispatchContext(project=project, phase_number="1", phase_dir=phase_dir(project), **extra)


def prompt_of(outcome: Outcome, project: Path) -> str:
    assert outcome.transcript
    return (project / outcome.transcript / "prompt.md").read_text()


def test_phase_prompt_is_brief_phase_contributions_and_what_is_owed(
    project: Path, fakes_on_path: Path
) -> None:
    (phase_dir(project) / "01-CONTEXT.md").write_text("# Context\n\nUse tabs.\n")
    rt = agent_runtime("claude", project)
    assert deliver_context(rt, "planner", "NOT A PROMPT", ctx_for(project, point="plan:pre")).ok
    texts = ["FIRST: keep plans small", "SECOND: {braces} stay"]
    outcome = do_phase_work(rt, "planner", "plan", ctx_for(project), texts)
    assert outcome.ok, outcome.detail
    prompt = prompt_of(outcome, project)
    assert prompt.startswith("You are the planner")
    assert "`.planning/phases/01-demo/`" in prompt  # the brief's {phase_dir}, substituted
    assert "Use tabs." in prompt  # the phase context
    assert prompt.index("FIRST: keep plans small") < prompt.index("SECOND: {braces} stay")
    assert "NOT A PROMPT" not in prompt  # the machine hands the role its context
    assert prompt.rstrip().endswith("in the format above.")  # what is owed comes last


def test_looprail_variables_win_over_a_configured_env(
    project: Path, fakes_on_path: Path, tmp_path: Path
) -> None:
    """An agent's configured `env` adds variables; it never re-points the call's own
    `LOOPRAIL_*` (the project, the phase), as with the local runtime."""
    settings = RuntimeSettings(
        project=project,
        progress=lambda _l: None,
        env={"LOOPRAIL_PROJECT": "/elsewhere", "LOOPRAIL_EXTRA": "kept"},
    )
    outcome = do_phase_work(create_runtime("claude", settings), "planner", "plan", ctx_for(project))
    assert outcome.ok, outcome.detail
    (call,) = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert call["env"]["LOOPRAIL_PROJECT"] == str(project)
    assert call["env"]["LOOPRAIL_PHASE"] == "1"
    assert call["env"]["LOOPRAIL_EXTRA"] == "kept"


def test_a_project_overrides_a_role_brief(project: Path, fakes_on_path: Path) -> None:
    own = project / ".looprail" / "roles" / "verifier.md"
    own.parent.mkdir(parents=True)
    own.write_text("HOUSE VERIFIER for phase {phase} in {phase_dir}\n")
    outcome = do_phase_work(agent_runtime("codex", project), "verifier", "verify", ctx_for(project))
    prompt = prompt_of(outcome, project)
    assert prompt.startswith("HOUSE VERIFIER for phase 1 in .planning/phases/01-demo")
    assert "You are the verifier" not in prompt


def test_task_prompt_has_the_task_content_and_its_read_first_files(
    project: Path, fakes_on_path: Path
) -> None:
    (project / "notes.md").write_text("READ ME FIRST\n")
    task = TaskWork(
        plan_id="01-02",
        task_id="T3",
        index=3,
        name="Add login",
        files=("src/login.py",),
        read_first=("notes.md",),
        action="Write the login form.",
        verify="pytest -k login",
        acceptance_criteria=("form posts",),
        done="login works",
        tracker_id="gh:12",
    )
    rt = agent_runtime("gemini", project)
    outcome = execute_task(rt, task, ctx_for(project, plan_id="01-02", task_id="T3"), ["EXEC HINT"])
    assert outcome.ok, outcome.detail
    prompt = prompt_of(outcome, project)
    for text in (
        "You are the executor",
        "## Task 01-02/T3: Add login",
        "- Files: src/login.py",
        "Write the login form.",
        "pytest -k login",
        "- form posts",
        "login works",
        "### notes.md",
        "READ ME FIRST",
        "EXEC HINT",
        "gh:12",
    ):
        assert text in prompt, text
    assert (project / "src" / "login.py").is_file()


def test_skills_and_subagents_run_the_agents_way(
    project: Path, fakes_on_path: Path, tmp_path: Path
) -> None:
    claude = agent_runtime("claude", project)
    assert prompt_of(
        run_skill(claude, "gsd-lint", ctx_for(project, point="plan:pre")), project
    ).startswith("/gsd-lint\n")
    assert "Use the gsd-mapper subagent" in prompt_of(
        spawn_agent(claude, "gsd-mapper", ctx_for(project, point="plan:pre")), project
    )
    opencode = agent_runtime("opencode", project)
    spawn_agent(opencode, "reviewer", ctx_for(project, point="plan:pre"))
    last = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[-1])
    assert last["argv"][:6] == [
        "run",
        "--format",
        "json",
        "--agent",
        "reviewer",
        *last["argv"][5:6],
    ]


def test_messages_reach_the_next_prompt_once(project: Path, fakes_on_path: Path) -> None:
    rt = agent_runtime("claude", project)
    ctx = ctx_for(project, point="plan:pre")
    assert deliver_message(
        rt, "MIND THE TESTS", send_as="custom", delivery="nextTurn", trigger_turn=False, ctx=ctx
    ).ok
    first = prompt_of(run_skill(rt, "gsd-a", ctx), project)
    second = prompt_of(run_skill(rt, "gsd-b", ctx), project)
    assert "MIND THE TESTS" in first and "MIND THE TESTS" not in second


@pytest.mark.parametrize("agent", AGENTS)
def test_a_malformed_agent_verdict_is_a_check_error(
    agent: str, project: Path, fakes_on_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_ctx = CheckContext(
        project=project, phase_number="1", phase_dir=Path(".planning/phases/01-demo")
    )
    rt = agent_runtime(agent, project)
    spec = {"ref": "ui-auditor", "prompt": "Is the UI spec complete?"}
    assert evaluate_check({"agentVerdict": spec}, check_ctx, rt) == Verdict(False, "fine")
    monkeypatch.setenv("FAKE_AGENT_MODE", "bad_verdict")
    result = evaluate_check({"agentVerdict": spec}, check_ctx, rt)
    assert isinstance(result, CheckError)
    assert "stdout is not a JSON object" in result.reason


def test_a_missing_cli_says_how_to_install_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    outcome = run_skill(
        agent_runtime("codex", project), "gsd-a", ctx_for(project, point="plan:pre")
    )
    assert not outcome.ok
    assert outcome.detail.startswith("codex: `codex` not found on PATH; install Codex CLI")


def test_doctor_says_how_to_fix_a_missing_cli(project: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    code = main(["doctor", "--project", str(project), "--agent", "gemini"])
    out = capsys.readouterr().out
    assert code == 1
    assert (
        "✗ a run refuses: gemini: `gemini` not found on PATH; install Gemini CLI (npm install -g "
        "@google/gemini-cli)" in out
    )


def test_init_never_overwrites_a_project(tmp_path: Path, capsys) -> None:
    assert main(["init", str(tmp_path / "p"), "--agent", "codex"]) == 0
    config = (tmp_path / "p" / ".planning" / "config.json").read_bytes()
    capsys.readouterr()
    assert main(["init", str(tmp_path / "p")]) == 0  # the agent the config names: kept
    assert "nothing to add" in capsys.readouterr().out
    assert main(["init", str(tmp_path / "p"), "--agent", "claude"]) == 1  # never changed
    assert "looprail.agent is 'codex'; init never changes a setting" in capsys.readouterr().err
    assert (tmp_path / "p" / ".planning" / "config.json").read_bytes() == config
    assert main(["init", str(tmp_path / "q"), "--agent", "nope"]) == 2


# ── adapters: argv and permissions ─────────────────────────────────────────────────────────


def request(kind: str = "task", name: str = "01-01/T1") -> Request:
    return Request(
        kind=kind,
        name=name,
        project="/p",
        point=None,
        cap_id=None,
        flavor="gsd",
        phase={"number": "1", "dir": "/p/.planning/phases/01-x"},
    )


def test_default_permissions_are_conservative_and_changed_only_explicitly() -> None:
    default = AgentSettings()
    claude = ADAPTERS["claude"]().argv("P", request(), default, git=True)
    assert claude == [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        "--",
        "P",
    ]
    assert ADAPTERS["codex"]().argv("P", request(), default, git=True) == [
        "codex",
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "--",
        "P",
    ]
    assert (
        ADAPTERS["codex"]().argv("P", request(), default, git=False)[5] == "--skip-git-repo-check"
    )
    assert ADAPTERS["opencode"]().argv("P", request(), default, git=True) == [
        "opencode",
        "run",
        "--format",
        "json",
    ]  # the prompt goes on stdin: `opencode run` rewrites arguments holding spaces
    assert ADAPTERS["opencode"].prompt_on_stdin
    assert ADAPTERS["gemini"]().argv("P", request(), default, git=True) == [
        "gemini",
        "--output-format",
        "json",
        "--approval-mode",
        "auto_edit",
        "--prompt=P",
    ]
    for name, adapter in ADAPTERS.items():
        argv = " ".join(adapter().argv("P", request(), default, git=True))
        for loose in ("dangerously", "bypassPermissions", "yolo", "danger-full-access"):
            assert loose not in argv, (name, loose)
    explicit = AgentSettings.parse(
        "claude", {"permissionMode": "plan", "allowedTools": ["Bash(git *)"], "model": "opus"}
    )
    assert ADAPTERS["claude"]().argv("P", request(), explicit, git=True)[5:] == [
        "--permission-mode",
        "plan",
        "--allowedTools",
        "Bash(git *)",
        "--model",
        "opus",
        "--",
        "P",
    ]


@pytest.mark.parametrize("agent", AGENTS)
@given(text=st.text(max_size=300))
def test_parsers_never_raise_on_any_output(agent: str, text: str) -> None:
    reply = ADAPTERS[agent]().parse(text)
    assert isinstance(reply.final, str)


def test_verdicts_are_found_in_the_agents_final_text() -> None:
    assert extract_verdict('{"block": true, "message": "x"}') == {"block": True, "message": "x"}
    assert extract_verdict('Thinking…\n```json\n{"block": false}\n```') == {"block": False}
    assert extract_verdict('all good\n{"block": false, "message": "ok"}') == {
        "block": False,
        "message": "ok",
    }
    assert extract_verdict("no verdict here") is None


@pytest.mark.parametrize("agent", AGENTS)
def test_a_prompt_too_long_for_argv_goes_the_way_the_cli_reads_more_input(
    agent: str, project: Path, fakes_on_path: Path, tmp_path: Path
) -> None:
    for name in ("big1.txt", "big2.txt"):
        (project / name).write_text(("x" * 99 + "\n") * 640)  # 64 000 bytes each
    task = TaskWork(
        plan_id="01-01",
        task_id="T1",
        index=1,
        name="Big",
        files=("out.txt",),
        read_first=("big1.txt", "big2.txt"),
        action="Write out.txt",
    )
    outcome = execute_task(
        agent_runtime(agent, project), task, ctx_for(project, plan_id="01-01", task_id="T1")
    )
    assert outcome.ok, outcome.detail
    assert (project / "out.txt").is_file()  # the fake read the task from stdin / the file
    argv = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[-1])["argv"]
    assert max(len(a.encode()) for a in argv) < 100_000
    if agent == "opencode":
        assert argv == ["run", "--format", "json"]  # every prompt goes on stdin
    else:
        assert any(a.endswith("Follow the instructions given on stdin.") for a in argv)


def test_claude_error_codes_on_assistant_messages_and_codex_retried_errors() -> None:
    stream = "\n".join(
        json.dumps(e)
        for e in (
            {"type": "system", "subtype": "init", "session_id": "s1"},
            {
                "type": "assistant",
                "error": "rate_limit",
                "message": {"content": [{"type": "text", "text": "Please try again later."}]},
            },
        )
    )
    reply = ADAPTERS["claude"]().parse(stream)
    assert reply.error == "rate_limit: Please try again later." and not reply.complete
    codex = "\n".join(
        json.dumps(e)
        for e in (
            {"type": "thread.started", "thread_id": "t1"},
            {"type": "error", "message": "stream disconnected; retrying 1/5"},
            {"type": "item.completed", "item": {"type": "agent_message", "text": "ok"}},
            {"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 1}},
        )
    )
    reply = ADAPTERS["codex"]().parse(codex)
    assert reply.error is None and reply.complete and reply.final == "ok"
    assert (reply.session_id, reply.input_tokens, reply.output_tokens) == ("t1", 3, 1)


# ── what the real CLIs print (shapes captured from the npm releases docs/agents.md names) ──────


def test_claude_api_errors_end_in_success_with_is_error_and_read_as_the_message() -> None:
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 401,
        "result": "Failed to authenticate. API Error: 401 Invalid API key",
        "session_id": "s1",
        "total_cost_usd": 0,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "permission_denials": [],
    }
    reply = ADAPTERS["claude"]().parse(json.dumps(result))
    assert reply.error == "Failed to authenticate. API Error: 401 Invalid API key"
    assert reply.error_status == 401 and reply.complete


def test_claude_permission_denials_are_read_one_line_each() -> None:
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "Done.",
        "permission_denials": [
            {"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {"command": "npm test"}}
        ],
    }
    reply = ADAPTERS["claude"]().parse(json.dumps(result))
    assert reply.error is None and reply.denials == ['Bash {"command": "npm test"}']


def test_tokens_count_the_same_for_every_cli_cache_included() -> None:
    claude = {
        "type": "result",
        "subtype": "success",
        "usage": {
            "input_tokens": 100,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 600,
            "output_tokens": 50,
        },
    }
    codex = {
        "type": "turn.completed",
        "usage": {"input_tokens": 1000, "cached_input_tokens": 600, "output_tokens": 50},
    }
    opencode = {
        "type": "step_finish",
        "part": {
            "reason": "stop",
            "cost": 0,
            "tokens": {"input": 100, "output": 50, "cache": {"read": 600, "write": 300}},
        },
    }
    gemini = {
        "response": "ok",
        "stats": {"models": {"m": {"tokens": {"prompt": 1000, "cached": 600, "candidates": 50}}}},
    }
    for name, out in (
        ("claude", claude),
        ("codex", codex),
        ("opencode", opencode),
        ("gemini", gemini),
    ):
        reply = ADAPTERS[name]().parse(json.dumps(out))
        assert (reply.input_tokens, reply.cached_input_tokens, reply.output_tokens) == (
            1000,
            600,
            50,
        ), name


def test_gemini_api_errors_are_read_from_stderr_with_their_exit_codes() -> None:
    stderr = (
        'Error when talking to Gemini API _ApiError: {"error":{"code":401}}\n'
        "    at throwErrorIfNotOK (file:///x.js:1:2) {\n  status: 401\n}\n"
        + json.dumps(
            {
                "session_id": "s1",
                "error": {
                    "type": "Error",
                    "message": json.dumps(
                        {"error": {"code": 401, "message": "Invalid API key", "status": "X"}}
                    ),
                    "code": 401,
                },
            },
            indent=2,
        )
        + "\n"
    )
    gemini = ADAPTERS["gemini"]()
    reply = gemini.parse("", stderr)
    assert reply.error == "Invalid API key" and reply.error_status == 401
    assert gemini.exit_reason(145) == "HTTP 401: not authenticated"
    assert gemini.exit_reason(173) == "HTTP 429: rate limited"
    assert "not trusted" in (gemini.exit_reason(55) or "")
    assert gemini.parse("", "Gemini CLI is not running in a trusted directory.").error is None


def test_gemini_doctor_checks_folder_trust_and_the_auth_method(tmp_path: Path) -> None:
    gemini = ADAPTERS["gemini"]()
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    env = {"HOME": str(home)}
    (trust, _), (auth, _) = gemini.readiness(project, AgentSettings(), env)
    assert (trust, auth) == ("problem", "problem")
    (home / ".gemini" / "trustedFolders.json").write_text(
        json.dumps({str(project): "TRUST_FOLDER", str(project / "sub"): "DO_NOT_TRUST"})
    )
    (home / ".gemini" / "settings.json").write_text(
        '// comments are allowed\n{"security": {"auth": {"selectedType": "gemini-api-key"}}}'
    )
    checks = gemini.readiness(project, AgentSettings(), env)
    assert [c[0] for c in checks] == ["ok", "ok"] and "gemini-api-key" in checks[1][1]
    assert gemini.readiness(project / "sub", AgentSettings(), env)[0][0] == "problem"
    skip = AgentSettings.parse("gemini", {"args": ["--skip-trust"]})
    assert gemini.readiness(project / "sub", skip, env)[0][0] == "ok"
    assert gemini.readiness(tmp_path, AgentSettings(), {**env, "GEMINI_API_KEY": "k"})[1][0] == "ok"


def test_a_cost_of_zero_is_priced_from_the_tokens_when_prices_are_configured(
    project: Path, fakes_on_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENT_COST", "0")
    runtime = create_runtime(
        "opencode",
        RuntimeSettings(
            project=project,
            progress=lambda _l: None,
            agent={"inputUsdPerMTok": 3, "outputUsdPerMTok": 15},
        ),
    )
    task = TaskWork(plan_id="01-01", task_id="T1", index=1, name="X", files=("x.txt",))
    outcome = execute_task(runtime, task, ctx_for(project, plan_id="01-01", task_id="T1"))
    assert outcome.ok and outcome.usage is not None
    assert outcome.usage.cost_usd == round((100 * 3 + 20 * 15) / 1_000_000, 6)


@given(port=st.integers(1, 65535), status=st.sampled_from(["401", "403", "429"]))
@example(port=42917, status="401")  # the port that once made a 401 read "rate limited"
@example(port=429, status="401")  # a port that is a status code's number
@example(port=401, status="429")
def test_an_api_error_is_classified_by_its_status_not_by_digits_in_its_address(port, status):
    said = {
        "401": "unexpected status 401 Unauthorized: the key is not valid",
        "403": "unexpected status 403 Forbidden",
        "429": "unexpected status 429 Too Many Requests: slow down",
    }[status]
    error = f"{said}, url: http://127.0.0.1:{port}/v1/responses (request req_{port}429401)"
    assert classify(error) == ("rate limited" if status == "429" else "not authenticated")
    assert classify(f"stream closed, url: http://127.0.0.1:{port}/v1") == "error"
    assert classify(f"stream closed, url: http://localhost:{port}/v1") == "error"


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ('{"error": {"code":429, "message": "Resource exhausted"}}', "rate limited"),
        ("HTTP/1.1 401 Unauthorized", "not authenticated"),
        ("status: 403", "not authenticated"),
        ("error 429 from the API", "rate limited"),
    ],
)
def test_an_api_error_names_its_status_in_the_usual_forms(error, kind):
    assert classify(error) == kind
