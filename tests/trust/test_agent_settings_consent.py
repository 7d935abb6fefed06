"""A cloned project cannot replace its agent or loosen its permissions (issue 27, points 2, 3).

Settings in `.planning/config.json` arrive with `git clone`. Those that change what runs or
widen what the agent may do (`binary`, `args`, `permissionMode`, `allowedTools`, `sandbox`,
`approvalMode`) count only from the user's own `$LOOPRAIL_HOME/agents.json` or with consent
(`looprail trust`, bound to their values); `run`, `doctor` and `capability audit` compute them
in one function and print every flag. `doctor` never runs a program the project supplies.
Everything through the CLI, with the fake agent CLIs first on PATH."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looprail.runtime.agent_settings import mode_in_effect
from looprail.runtime.agents import AgentSettings, describe
from tests.support.agents import agent_env, calls, looprail

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is needed for plan worktrees",
)


def demo(tmp_path: Path, agent: str, settings: dict | None = None) -> tuple[Path, dict[str, str]]:
    env = agent_env(tmp_path, LOOPRAIL_HOME=str(tmp_path / "home"))
    done = looprail("init", "demo", "--agent", agent, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "demo"
    if settings is not None:
        set_agent(root, agent, settings)
    return root, env


def set_agent(root: Path, agent: str, settings: dict) -> None:
    config = {"looprail": {"agent": agent, "agents": {agent: settings}}}
    (root / ".planning" / "config.json").write_text(json.dumps(config))


WIDENING = [
    ("claude", "permissionMode", "bypassPermissions"),
    ("claude", "args", ["--dangerously-skip-permissions", "--add-dir", "/"]),
    ("claude", "allowedTools", ["Bash"]),
    ("claude", "binary", "tools/claude"),
    ("codex", "sandbox", "danger-full-access"),
    ("codex", "args", ["--dangerously-bypass-approvals-and-sandbox"]),
    ("gemini", "approvalMode", "yolo"),
    ("opencode", "args", ["--agent", "build"]),
    ("opencode", "binary", "/bin/true"),
]


@pytest.mark.parametrize(("agent", "key", "value"), WIDENING)
def test_a_run_refuses_project_settings_that_widen_without_consent(
    tmp_path: Path, agent: str, key: str, value: object
) -> None:
    root, env = demo(tmp_path, agent, {key: value})
    done = looprail("run", "--phase", "1", cwd=root, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    err = done.stderr.strip()
    assert err.count("\n") == 0, err  # one line: file, field, how to consent
    assert ".planning/config.json" in err and f"looprail.agents.{agent}.{key}" in err
    assert "looprail trust" in err and "agents.json" in err
    assert calls(tmp_path) == []  # the agent never ran
    assert not (root / ".looprail" / "journal.sqlite").exists()  # nothing journaled


@pytest.mark.parametrize(
    ("agent", "settings", "flag"),
    [
        ("claude", {"permissionMode": "plan", "model": "opus"}, "--permission-mode plan"),
        ("codex", {"sandbox": "read-only"}, "--sandbox read-only"),
        ("gemini", {"approvalMode": "default"}, "--approval-mode default"),
    ],
)
def test_settings_no_wider_than_the_default_need_no_consent(
    tmp_path: Path, agent: str, settings: dict, flag: str
) -> None:
    root, env = demo(tmp_path, agent, settings)
    done = looprail("run", "--phase", "1", cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    assert f"agent {agent}: " in done.stderr and flag in done.stderr


def test_consent_is_bound_to_the_values_and_the_run_prints_every_flag(tmp_path: Path) -> None:
    settings = {"permissionMode": "bypassPermissions", "args": ["--add-dir", "/"]}
    root, env = demo(tmp_path, "claude", settings)
    audit = looprail("capability", "audit", cwd=root, env=env)
    assert audit.returncode == 0, audit.stderr
    assert "REFUSED: .planning/config.json: looprail.agents.claude.args" in audit.stdout
    assert "(so do permissionMode)" in audit.stdout

    trusted = looprail("trust", "--yes", cwd=root, env=env)
    assert trusted.returncode == 0, trusted.stderr
    assert '"bypassPermissions"' in trusted.stdout and "--add-dir /" in trusted.stdout
    assert "agent settings that change what runs" in trusted.stderr  # said even with --yes

    done = looprail("run", "--phase", "1", cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if "agent claude: " in x)
    assert "--permission-mode bypassPermissions --add-dir /" in line, line
    assert "(permission mode in effect: bypassPermissions)" in line, line
    argv = calls(tmp_path)[0]["argv"]
    end = argv.index("--")  # the prompt comes after `--`, the settings' args just before it
    assert argv[end - 2 : end] == ["--add-dir", "/"] and "bypassPermissions" in argv

    # The same line in doctor and capability audit, with where the settings came from.
    doctor = looprail("doctor", cwd=root, env=env)
    assert line.split("agent claude: ", 1)[1] in doctor.stdout
    assert "permissionMode from .planning/config.json, consented" in doctor.stdout
    audit = looprail("capability", "audit", "--json", cwd=root, env=env)
    agent = json.loads(audit.stdout)["agent"]
    assert agent["line"].endswith("(permission mode in effect: bypassPermissions)")
    assert agent["refusal"] is None and agent["pending"] == {}

    # One changed value and consent is gone: the run refuses again.
    set_agent(root, "claude", {**settings, "args": ["--add-dir", "/etc"]})
    again = looprail("run", "--phase", "1", cwd=root, env=env)
    assert again.returncode == 1 and "looprail.agents.claude.args" in again.stderr
    revoked = looprail("revoke", "--agent-settings", cwd=root, env=env)
    assert revoked.returncode == 0 and "nothing to revoke" not in revoked.stdout


def test_a_permission_mode_in_args_is_the_one_shown(tmp_path: Path) -> None:
    """`args` alone set the mode: the line says so, not looprail's default."""
    root, env = demo(tmp_path, "claude")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # the user's own settings need no consent
    (home / "agents.json").write_text(
        json.dumps({"claude": {"args": ["--permission-mode", "bypassPermissions"]}})
    )
    done = looprail("run", "--phase", "1", cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if "agent claude: " in x)
    assert "(permission mode in effect: bypassPermissions)" in line, line
    doctor = looprail("doctor", cwd=root, env=env)
    assert f"args from {home / 'agents.json'}" in doctor.stdout


def test_the_users_settings_win_over_the_projects(tmp_path: Path) -> None:
    root, env = demo(tmp_path, "codex", {"sandbox": "danger-full-access"})
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "agents.json").write_text(json.dumps({"codex": {"sandbox": "read-only"}}))
    done = looprail("run", "--phase", "1", cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    assert "--sandbox read-only" in done.stderr
    assert all("danger-full-access" not in c["argv"] for c in calls(tmp_path))


def test_a_malformed_user_settings_file_is_one_line(tmp_path: Path) -> None:
    root, env = demo(tmp_path, "claude")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "agents.json").write_text(json.dumps({"claude": {"args": "--x"}}))
    done = looprail("run", "--phase", "1", cwd=root, env=env)
    assert done.returncode != 0
    err = done.stderr.strip()
    assert err.count("\n") == 0 and str(home / "agents.json") in err and "claude.args" in err


# ── doctor never runs what the project supplies ──────────────────────────────────────────────


def planted(root: Path, marker: Path, rel: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport pathlib\npathlib.Path({str(marker)!r}).touch()\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("consent", [False, True])
def test_doctor_never_runs_a_binary_the_projects_config_names(
    tmp_path: Path, consent: bool
) -> None:
    marker = tmp_path / "ran"
    root, env = demo(tmp_path, "claude", {"binary": "tools/claude"})
    planted(root, marker, "tools/claude")
    if consent:
        assert looprail("trust", "--yes", cwd=root, env=env).returncode == 0
    doctor = looprail("doctor", cwd=root, env=env)
    assert not marker.exists(), "doctor ran the project's tools/claude"
    assert "tools/claude" in doctor.stdout
    if consent:
        assert "not run; doctor never runs a program the project supplies" in doctor.stdout
    else:
        assert doctor.returncode == 1
        assert "a run refuses: .planning/config.json: looprail.agents.claude.binary" in (
            doctor.stdout
        )


def test_doctor_never_runs_a_program_found_inside_the_project(tmp_path: Path) -> None:
    """The agent's name found on PATH, but in the project's own folder: reported, not run."""
    marker = tmp_path / "ran"
    root, env = demo(tmp_path, "claude")
    planted(root, marker, "bin/claude")
    env = {**env, "PATH": f"{root / 'bin'}{os.pathsep}{env['PATH']}"}
    doctor = looprail("doctor", cwd=root, env=env)
    assert not marker.exists(), "doctor ran the project's bin/claude"
    assert f"{root / 'bin' / 'claude'} (from the project folder): not run" in doctor.stdout


# ── the one line shows every flag ───────────────────────────────────────────────────────────

_FLAGS = st.sampled_from(
    [
        "--permission-mode",
        "bypassPermissions",
        "plan",
        "--dangerously-skip-permissions",
        "--add-dir",
        "/",
        "--model",
        "x y",
        "-p",
        "--permission-mode=default",
        "'",
        "$(id)",
    ]
)


@given(args=st.lists(_FLAGS, max_size=8))
def test_the_agent_line_shows_every_argument_and_the_last_mode_flag_wins(args: list[str]) -> None:
    line = describe("claude", AgentSettings.parse("claude", {"args": args}))
    assert " ".join(shlex.quote(a) for a in args) in line  # every argument, quoted as typed
    # The mode in effect: what a reader of the argv from the left would end with.
    mode, i, argv = "acceptEdits", 0, ["--permission-mode", "acceptEdits", *args]
    while i < len(argv):
        if argv[i] == "--dangerously-skip-permissions":
            mode = "bypassPermissions"
        elif argv[i].startswith("--permission-mode="):
            mode = argv[i].split("=", 1)[1]
        elif argv[i] == "--permission-mode" and i + 1 < len(argv):
            mode, i = argv[i + 1], i + 1
        i += 1
    assert mode_in_effect("claude", argv) == mode
    assert line.endswith(f"(permission mode in effect: {mode})")
