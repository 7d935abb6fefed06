"""Command-line conventions users expect from a native tool: `python -m`, a fast --version,
global -q/-v, colour only on a terminal, usage errors exit 2, help for every positional, shell
completion, a positional PROJECT, --json on run/resume, SIGTERM exits 143."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from looprail._version import __version__
from tests.support import REPO, cli_commands, run_cli, write_config
from tests.support.terminal import Terminal

CAPS = str(REPO / "examples" / "capabilities")
ESC = re.compile(r"\x1b\[")


def run_in_pty(*args: str, env: dict[str, str] | None = None, cwd=None) -> tuple[int, str]:
    """`looprail ARGS` on a pseudo-terminal: (exit code, what it drew, escapes and all)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    full_env.update({"TERM": "xterm-256color", "COLUMNS": "120", **(env or {})})
    with Terminal([sys.executable, "-m", "looprail", *args], cwd=cwd, env=full_env) as shown:
        return shown.wait(), shown.raw_text


@pytest.fixture(scope="module")
def module_home(tmp_path_factory):
    """One HOME for this module: the shared `halted` project's journal is sealed with a key
    kept under HOME, so every command on it must see the same one."""
    home = tmp_path_factory.mktemp("home")
    return {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}


@pytest.fixture(autouse=True)
def _module_home(_isolated_home, module_home, monkeypatch):
    for key, value in module_home.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="module")
def halted(tmp_path_factory, module_home):
    """The example project with one journaled run, halted at ship:pre by the release gate."""
    project = tmp_path_factory.mktemp("conv") / "hello"
    shutil.copytree(REPO / "examples" / "hello-loop", project)
    write_config(
        project, {"style": {"contribute": True}, "release": {"gate": True, "allow_ship": False}}
    )
    env = module_home  # module scope runs before the per-test HOME isolation
    r = run_cli("run", str(project), "--phase", "1", "--capabilities", CAPS, "-q", env=env)
    assert r.returncode == 1, r.stderr
    return project


# --------------------------------------------------------------------------- start


def test_python_dash_m_and_a_fast_version():
    r = subprocess.run(
        [sys.executable, "-m", "looprail", "--version"], capture_output=True, text=True
    )
    assert r.returncode == 0 and r.stdout == f"looprail {__version__}\n"
    r = subprocess.run([sys.executable, "-m", "looprail", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "render-hooks" not in r.stdout and "completion" in r.stdout
    # --version builds no parser and imports nothing heavy (scripts call it to probe)
    code = (
        "import sys, contextlib, io\n"
        "from looprail.cli import main\n"
        "try:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        main(['--version'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0\n"
        "heavy = {'pydantic', 'networkx', 'statemachine', 'graphviz', 'rich', 'yaml', 'argparse'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy),"
        " sorted(m for m in sys.modules if m.startswith('looprail.cli.')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "[] []", r.stdout + r.stderr


# --------------------------------------------------------------------------- parser shape


def test_every_positional_has_help_and_every_command_takes_q_and_v():
    for path, parser in cli_commands():
        for action in parser._actions:
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                assert action.help, (path, action.dest)
        assert {"-q", "-v"} <= set(parser._option_string_actions), path


def test_global_q_and_v_before_or_after_the_command(halted):
    for argv in (["-q", "status", str(halted)], ["status", str(halted), "-v"], ["-vv", "history"]):
        r = run_cli(*argv, cwd=halted)
        assert r.returncode == 0, (argv, r.stderr)
    loud = run_cli("run", str(halted), "--phase", "1", "--capabilities", CAPS)
    quiet = run_cli("-q", "run", str(halted), "--phase", "1", "--capabilities", CAPS)
    assert loud.returncode == quiet.returncode == 1
    assert "▸ ship:pre" in loud.stderr and "▸" not in quiet.stderr
    assert not ESC.search(loud.stdout + loud.stderr)  # a pipe: no escape codes
    assert quiet.stderr.strip().splitlines()[-1].startswith("run ")  # the summary stays


# --------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    "argv",
    [
        ["loop", "render-hooks", "execute:task"],
        ["run", ".", "--phase", "abc"],
        ["lint", ".", "--phase", "one"],
        ["diagram", "-o", "x.jpg"],
        ["status", "--nope"],
    ],
)
def test_usage_errors_exit_2(tmp_path, argv):
    (tmp_path / ".planning").mkdir()
    r = run_cli(*argv, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_a_mistyped_command_gets_did_you_mean_not_every_choice(tmp_path):
    r = run_cli("stauts", cwd=tmp_path)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert (
        last
        == "looprail: error: argument COMMAND: invalid choice: 'stauts'; did you mean 'status'?"
    )
    assert "'history'" not in r.stderr  # the 22 choices are not listed
    nothing_close = run_cli("xyzzy", cwd=tmp_path).stderr.strip().splitlines()[-1]
    assert nothing_close.endswith("invalid choice: 'xyzzy' (`looprail --help` lists them)")
    # a short list of choices is still shown, with the close one first
    fmt = run_cli("diagram", "--format", "jpg", cwd=tmp_path).stderr.strip().splitlines()[-1]
    assert "did you mean 'png'? (choose from 'svg', 'png', 'dot', 'mermaid')" in fmt


def test_did_you_mean_holds_with_the_argparse_of_python_3_13_1(tmp_path, monkeypatch):
    """Python 3.12.8 and 3.13.1 print choices unquoted (CPython gh-86357); the hint is written
    from the choices, so it holds whatever argparse's own check says."""

    def newer_check(self, action, value):  # argparse's `_check_value` from 3.13.1 on
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(str, action.choices))
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r} (choose from {choices})"
            )

    monkeypatch.setattr(argparse.ArgumentParser, "_check_value", newer_check)
    last = run_cli("stauts", cwd=tmp_path).stderr.strip().splitlines()[-1]
    assert last.endswith("invalid choice: 'stauts'; did you mean 'status'?")
    fmt = run_cli("diagram", "--format", "jpg", cwd=tmp_path).stderr.strip().splitlines()[-1]
    assert "did you mean 'png'? (choose from 'svg', 'png', 'dot', 'mermaid')" in fmt


def test_a_mistyped_option_is_named_by_its_command_with_a_suggestion(tmp_path):
    r = run_cli("run", "--phse", "1", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("usage: looprail run ")
    last = r.stderr.strip().splitlines()[-1]
    assert last == "looprail run: error: unrecognized arguments: --phse (did you mean --phase?)"
    nested = run_cli("phase", "plan-index", "1", "--rwa", cwd=tmp_path)
    assert nested.stderr.strip().splitlines()[-1] == (
        "looprail phase plan-index: error: unrecognized arguments: --rwa (did you mean --raw?)"
    )


def test_quiet_status_is_one_line_and_quiet_lint_only_the_problems(halted):
    loud, quiet = run_cli("status", str(halted)), run_cli("status", str(halted), "-q")
    assert quiet.returncode == loud.returncode == 0
    assert quiet.stdout.splitlines() == loud.stdout.splitlines()[:1]
    assert re.fullmatch(r"run \w+ · phase 1 · halted\n", quiet.stdout)
    lint = run_cli("lint", str(halted), "--capabilities", CAPS)
    quiet_lint = run_cli("-q", "lint", str(halted), "--capabilities", CAPS)
    assert quiet_lint.returncode == lint.returncode
    problems = [ln for ln in lint.stdout.splitlines() if "] " in ln and ": info [" not in ln]
    assert problems, lint.stdout  # the example has warnings to keep
    assert [ln for ln in quiet_lint.stdout.splitlines() if "] " in ln] == problems
    assert not re.search(r"^\d+ errors?, ", quiet_lint.stdout, re.MULTILINE)  # no count line


def test_quiet_lint_of_a_clean_project_prints_nothing(tmp_path):
    (tmp_path / ".planning").mkdir()
    assert run_cli("lint", str(tmp_path)).stdout.endswith(
        "\nno problems found\n"
    )  # after its sources
    quiet = run_cli("lint", str(tmp_path), "-q")
    assert quiet.returncode == 0 and quiet.stdout == ""


def _tiny_project(tmp_path, executor: str):
    """One phase, one plan, one task; role agents that do nothing but the executor's body."""
    project = tmp_path / "p"
    phase = project / ".planning" / "phases" / "01-tiny"
    phase.mkdir(parents=True)
    (phase / "01-01-PLAN.md").write_text(
        "---\nphase: 01-tiny\nplan: 01\ntype: execute\nwave: 1\ndepends_on: []\n"
        "files_modified: []\nautonomous: true\n---\n<tasks>\n"
        '<task type="auto"><name>work</name><action>work</action></task>\n</tasks>\n'
    )
    (phase / "01-CONTEXT.md").write_text("x")
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    for role in ("orchestrator", "planner", "verifier"):
        (agents / role).write_text("#!/bin/sh\nexit 0\n")
    (agents / "executor").write_text(f"#!/bin/sh\n{executor}\n")
    for exe in agents.iterdir():
        exe.chmod(0o755)
    return project


def test_verbose_shows_what_the_agents_printed(tmp_path):
    project = _tiny_project(tmp_path, "echo 'hello from the executor'; echo 'a note' >&2")
    args = ("run", str(project), "--phase", "1", "--no-journal")
    r = run_cli(*args, "-v")
    assert "    ┆ 01-01/T1: hello from the executor\n" in r.stderr, r.stderr
    assert "    ┆ 01-01/T1 stderr: a note\n" in r.stderr
    r = run_cli(*args)
    assert "hello from the executor" not in r.stderr and "┆" not in r.stderr


def test_the_liveness_banner_only_after_two_silent_seconds_and_never_over_output(tmp_path):
    banner = (
        "◆ Spawning executor (01-01/T1)... (runs in a subagent — no output until it returns; "
        "expected, not a freeze)"
    )
    silent = _tiny_project(tmp_path / "silent", "sleep 2.6")
    r = run_cli("run", str(silent), "--phase", "1", "--no-journal")
    assert "verifier did the verify work" in r.stderr, r.stderr  # the task ran to its end
    assert r.stderr.count("◆ Spawning") == 1 and banner in r.stderr  # the roles were quick
    talking = _tiny_project(tmp_path / "talking", "echo 'step 1 of 2'; sleep 2.6; echo done")
    r = run_cli("run", str(talking), "--phase", "1", "--no-journal", "-v")
    assert "┆ 01-01/T1: done" in r.stderr, r.stderr
    assert "┆ 01-01/T1: step 1 of 2" in r.stderr and "◆ Spawning" not in r.stderr


def test_sigterm_halts_the_run_resumably_and_exits_143(tmp_path):
    marker = tmp_path / "executor-started"
    project = _tiny_project(tmp_path, f"touch '{marker}'\nexec sleep 60")
    proc = subprocess.Popen(
        [sys.executable, "-m", "looprail", "run", str(project), "--phase", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert marker.exists(), proc.communicate(timeout=30)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert time.monotonic() - started < 20  # the agent was stopped, not waited for
    assert err.strip().splitlines()[-1] == "looprail: interrupted (signal 15)"
    status = json.loads(run_cli("status", str(project), "--json").stdout)
    assert status["run"]["status"] == "halted"
    assert status["run"]["haltReason"] == "interrupted (SIGTERM)"


# --------------------------------------------------------------------------- colour


def test_colour_only_on_a_terminal(halted):
    code, shown = run_in_pty("status", str(halted))
    assert code == 0 and "halted" in shown
    assert "\x1b[1;31mhalted" in shown  # bold red on a terminal
    for env in ({"NO_COLOR": "1"}, {"NO_COLOR": ""}, {"TERM": "dumb"}):
        code, shown = run_in_pty("status", str(halted), env=env)
        assert code == 0 and "halted" in shown and not ESC.search(shown), env
    r = run_cli("status", str(halted))  # a pipe
    assert "halted" in r.stdout and not ESC.search(r.stdout + r.stderr)


def test_run_on_a_terminal_colours_the_verdict_and_plain_logs_have_no_codes(halted):
    code, shown = run_in_pty("run", str(halted), "--phase", "1", "--capabilities", CAPS)
    assert code == 1
    assert "\x1b[1;31mhalted\x1b[0m in verify" in shown
    code, shown = run_in_pty(
        "run", str(halted), "--phase", "1", "--capabilities", CAPS, env={"NO_COLOR": "1"}
    )
    assert code == 1 and "halted in verify" in shown and not ESC.search(shown)


# --------------------------------------------------------------------------- PROJECT, --json


def test_project_positional_on_status_history_report_and_resume(halted, tmp_path):
    elsewhere = tmp_path  # not the project: the positional must be what is read
    status = json.loads(run_cli("status", str(halted), "--json", cwd=elsewhere).stdout)
    run_id = status["run"]["id"]
    history = json.loads(run_cli("history", str(halted), "--json", cwd=elsewhere).stdout)
    assert run_id in [r["id"] for r in history["runs"]]
    for argv in (
        ["report", str(halted), "--json"],
        ["report", str(halted), run_id[:8], "--json"],
        ["report", run_id[:8], "--project", str(halted), "--json"],
    ):
        r = run_cli(*argv, cwd=elsewhere)
        assert r.returncode == 0, (argv, r.stderr)
        assert json.loads(r.stdout)["run"]["id"] == run_id
    r = run_cli("resume", str(halted), "--capabilities", CAPS, "--json", cwd=elsewhere)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 1 and summary["runId"] == run_id and summary["resumed"] is True


def test_run_json_summary(halted):
    r = run_cli("run", str(halted), "--phase", "1", "--capabilities", CAPS, "--json")
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1  # stdout carries only the summary; progress is on stderr
    summary = json.loads(lines[0])
    assert summary["status"] == "halted" and summary["exitCode"] == 1
    assert summary["phase"] == "1" and summary["state"] == ["verify"]
    assert summary["refusedBy"] == {"capId": "release-gate", "point": "ship:pre", "kind": "gate"}
    assert "release.allow_ship" in summary["reason"]
    assert set(summary) >= {"runId", "durationS", "tasksRun", "wavesRun", "hooksDispatched"}


# --------------------------------------------------------------------------- completion


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_completion_script():
    r = run_cli("completion", "bash")
    assert r.returncode == 0, r.stderr
    assert "render-hooks" in r.stdout and "--phase" in r.stdout
    check = subprocess.run(["bash", "-n"], input=r.stdout, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    r = run_cli("completion", "fish")
    assert r.returncode == 2


def test_live_progress_on_a_terminal(tmp_path):
    project = tmp_path / "hello"
    shutil.copytree(REPO / "examples" / "hello-loop", project)
    code, shown = run_in_pty("run", str(project), "--phase", "1", "--capabilities", CAPS)
    assert code == 0, shown
    # 4 tasks in 2 waves, each running task on a line of its own; quick ones get no banner
    assert "◆ Spawning" not in shown
    assert "▹ 01-01/T1" in shown and "▹ 01-03/T1" in shown
    assert "\x1b[1;32mshipped\x1b[0m" in shown
