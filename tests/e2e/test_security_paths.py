"""Issue 27, through the CLI: symlinks under `.looprail/` never lead a run, an install or `init`
out of the project (points 4 and 7), no file outside the project reaches an agent's prompt
(point 5), and a child cannot forge its exit status to its guard (point 9). Each test failed
before the fix it names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from looprail.layout import LOOPRAIL_FOLDERS
from tests.support import REPO, feature, run_cli, write_capability
from tests.support.agents import agent_env, calls, looprail
from tests.support.loop import plan_md, task_xml

CAPS = REPO / "examples" / "capabilities"
SECRET = "aws_secret_access_key = SECRET-0123456789"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in folder.rglob("*") if f.is_file()}


def _everything_under(folder: Path) -> str:
    return "\n".join(
        f.read_bytes().decode("utf-8", "replace") for f in folder.rglob("*") if f.is_file()
    )


def _one_line_refusal(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode != 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("looprail: error:")]
    assert len(errors) == 1, p.stderr
    for needle in needles:
        assert needle in errors[0], p.stderr


# ------------------------------------------------------------- 4: folders under .looprail/


@pytest.mark.parametrize("name", LOOPRAIL_FOLDERS)
def test_a_run_refuses_any_looprail_folder_linked_out_of_the_project(hello, tmp_path, name):
    """`.looprail/logs` linked outside got every log; worktrees, partial output, capabilities,
    role briefs and executables the same way. The run now stops before it starts, with one
    line naming the link, and nothing outside changes."""
    outside = tmp_path / "outside" / name
    inside = hello / ".looprail" / name
    if inside.is_dir():  # the example ships agents/, skills/, commands/: move them out
        shutil.move(str(inside), str(outside))
    else:
        outside.mkdir(parents=True)
    inside.symlink_to(outside, target_is_directory=True)
    before = _snapshot(outside.parent)
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))
    _one_line_refusal(
        p, f".looprail/{name}: the folder is a symlink to {outside}", "outside the project"
    )
    assert _snapshot(outside.parent) == before
    assert not (hello / ".looprail" / "journal.sqlite").exists()  # nothing was journaled


def test_a_looprail_folder_linked_inside_the_project_is_fine(hello, tmp_path):
    (hello / "shared-logs").mkdir()
    (hello / ".looprail" / "logs").symlink_to(hello / "shared-logs", target_is_directory=True)
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))
    assert p.returncode == 0 and "shipped" in p.stdout, p.stdout + p.stderr
    assert list((hello / "shared-logs").iterdir())  # the logs went there


def test_capability_install_refuses_a_capabilities_folder_linked_out(hello, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (hello / ".looprail" / "capabilities").symlink_to(outside, target_is_directory=True)
    source = write_capability(tmp_path / "src", feature("extra"))
    p = run_cli("capability", "install", str(source), "--project", str(hello), "--yes")
    _one_line_refusal(p, ".looprail/capabilities: the folder is a symlink to", "refused")
    assert list(outside.iterdir()) == []
    p = run_cli("capability", "remove", "extra", "--project", str(hello))
    _one_line_refusal(p, ".looprail/capabilities: the folder is a symlink to")


def test_a_symlinked_roles_folder_never_puts_its_brief_into_a_prompt(tmp_path):
    """The brief's file was a plain file, so `not own.is_symlink()` let a roles folder linked
    outside through: its text reached the planner's prompt."""
    env = agent_env(tmp_path)
    assert looprail("init", "demo", "--agent", "claude", cwd=tmp_path, env=env).returncode == 0
    demo = tmp_path / "demo"
    outside = tmp_path / "outside-roles"
    shutil.move(str(demo / ".looprail" / "roles"), str(outside))
    (outside / "planner.md").write_text(f"planner brief\n{SECRET}\n")
    (demo / ".looprail" / "roles").symlink_to(outside, target_is_directory=True)
    p = looprail("run", "--phase", "1", cwd=demo, env=env)
    _one_line_refusal(p, ".looprail/roles: the folder is a symlink to")
    assert not any(SECRET in json.dumps(c) for c in calls(tmp_path))


# ------------------------------------------------------------- 5: files that go into a prompt


@pytest.mark.parametrize("target", ["secret", "environ"])
def test_a_context_md_linked_out_of_the_project_never_reaches_a_prompt(tmp_path, target):
    """A CONTEXT.md linked to `~/.aws/credentials` or `/proc/self/environ` landed in the
    planner's prompt and in `.looprail/logs/…/prompt.md`. Now the phase is refused when it is
    loaded (before the run starts), with one line naming the file."""
    env = agent_env(tmp_path, LOOPRAIL_TEST_API_KEY="sk-ENVIRON-SECRET-42")
    assert looprail("init", "demo", "--agent", "claude", cwd=tmp_path, env=env).returncode == 0
    demo = tmp_path / "demo"
    secret = tmp_path / "credentials"
    secret.write_text(SECRET + "\n")
    link = demo / ".planning" / "phases" / "01-first" / "01-CONTEXT.md"
    link.symlink_to(secret if target == "secret" else Path("/proc/self/environ"))
    p = looprail("run", "--phase", "1", cwd=demo, env=env, process=True)
    _one_line_refusal(p, "01-CONTEXT.md: the phase's CONTEXT.md is a symlink to", "refused")
    assert p.returncode == 1 and "the run did not start" in p.stderr
    seen = json.dumps(calls(tmp_path))
    logs = demo / ".looprail" / "logs"
    seen += _everything_under(logs) if logs.is_dir() else ""
    assert "SECRET-0123456789" not in seen and "sk-ENVIRON-SECRET-42" not in seen
    assert not calls(tmp_path)  # no agent was asked anything


def test_a_context_md_inside_the_project_still_reaches_the_prompt(tmp_path):
    env = agent_env(tmp_path)
    assert looprail("init", "demo", "--agent", "claude", cwd=tmp_path, env=env).returncode == 0
    demo = tmp_path / "demo"
    (demo / "notes.md").write_text("# Context\n\nMARKER-IN-PROJECT\n")
    (demo / ".planning" / "phases" / "01-first" / "01-CONTEXT.md").symlink_to(demo / "notes.md")
    p = looprail("run", "--phase", "1", cwd=demo, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    prompts = [c for c in calls(tmp_path) if "MARKER-IN-PROJECT" in json.dumps(c)]
    assert prompts  # the planner read it


def test_read_first_linked_out_or_to_a_fifo_halts_the_task(hello, tmp_path):
    """`read_first` was already held to the project; it is now also held to regular files (a
    FIFO inside the project passed `exists()` and would block a reader)."""
    phase = hello / ".planning" / "phases" / "01-greeting"
    os.mkfifo(hello / "pipe")
    (hello / "creds").symlink_to(tmp_path / "creds")
    (tmp_path / "creds").write_text(SECRET)
    for rel in ("pipe", "creds"):
        shutil.rmtree(phase, ignore_errors=True)
        phase.mkdir()
        (phase / "01-CONTEXT.md").write_text("# Context\n")
        task = task_xml("T1", files=["hello/a.txt"], read_first=[rel], action="Write 'hi'")
        (phase / "01-01-PLAN.md").write_text(plan_md("01", files=["hello/a.txt"], tasks=[task]))
        p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS), "--new")
        assert p.returncode != 0, p.stdout + p.stderr
        assert f"read_first: missing {rel}" in p.stdout + p.stderr
        assert not (hello / "hello" / "a.txt").exists()


# ------------------------------------------------------------- 7: init never writes through links


def _init(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("init", *args, cwd=cwd)


def test_init_never_appends_through_a_symlinked_gitignore(tmp_path):
    project, outside = tmp_path / "p", tmp_path / "outside.txt"
    project.mkdir()
    outside.write_text("precious\n")
    (project / ".gitignore").symlink_to(outside)
    p = _init(tmp_path, "p")
    _one_line_refusal(p, ".gitignore: is a symlink", "nothing changed")
    assert p.returncode == 1
    assert outside.read_text() == "precious\n"
    assert not (project / ".planning").exists()  # refused before anything was written


@pytest.mark.parametrize(
    "rel", [".planning/config.json", ".looprail/agents/executor", ".looprail/roles/planner.md"]
)
def test_init_never_creates_a_file_through_a_dangling_link(tmp_path, rel):
    project, outside = tmp_path / "p", tmp_path / "created-outside"
    link = project / rel
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    p = _init(tmp_path, "p")
    _one_line_refusal(p, f"{rel}: is a symlink")
    assert not outside.exists()


@pytest.mark.parametrize("name", [".planning", ".looprail"])
def test_init_refuses_a_symlinked_planning_or_looprail_folder(tmp_path, name):
    project, outside = tmp_path / "p", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / name).symlink_to(outside, target_is_directory=True)
    p = _init(tmp_path, "p")
    _one_line_refusal(p, f"{name}: is a symlink")
    assert list(outside.iterdir()) == []


def test_init_still_scaffolds_and_keeps_what_is_there(tmp_path):
    project = tmp_path / "p"
    (project / ".looprail" / "roles").mkdir(parents=True)
    (project / ".looprail" / "roles" / "planner.md").write_text("mine\n")
    (project / ".gitignore").write_text("node_modules/")
    p = _init(tmp_path, "p")
    assert p.returncode == 0, p.stderr
    assert (project / ".looprail" / "roles" / "planner.md").read_text() == "mine\n"
    assert (project / ".gitignore").read_text().startswith("node_modules/\n# looprail state")
    executor = project / ".looprail" / "agents" / "executor"
    assert os.access(executor, os.X_OK) and not executor.is_symlink()
    again = _init(tmp_path, "p")  # a second init adds nothing and changes nothing
    assert (again.returncode, again.stdout.splitlines()[0]) == (
        0,
        "nothing to add: p has what looprail init adds",
    )


# ------------------------------------------------------------- 9: the guard's status channel

FD_PROBE = """#!{python}
import json, os, sys
req = json.load(sys.stdin)
root = req["project"]
opened = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
    except OSError:
        continue
    opened.append(fd)
with open(os.path.join(root, "fds.json"), "w") as fh:
    json.dump(opened, fh)
for fd in opened:  # forge a success on every channel there is
    try:
        os.write(fd, b"X0\\n")
    except OSError:
        pass
sys.exit(3)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard is Linux-only")
def test_an_executor_sees_only_fds_0_to_2_and_cannot_forge_its_status(hello):
    """An executor finds no descriptor beyond 0-2 (its guard's status channel is not
    inherited): one that writes a forged success on every descriptor and exits 3 fails."""
    executor = hello / ".looprail" / "agents" / "executor"
    executor.write_text(FD_PROBE.format(python=sys.executable))
    args = ("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))
    p = run_cli(*args, subprocess=True)
    assert p.returncode != 0, p.stdout + p.stderr
    assert json.loads((hello / "fds.json").read_text()) == []
    assert "shipped" not in p.stdout
    status = run_cli("status", str(hello), "--json")
    tasks = json.loads(status.stdout)
    assert "failed" in json.dumps(tasks) and '"done"' not in json.dumps(tasks.get("tasks", {}))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard is Linux-only")
def test_a_blocking_command_gate_cannot_be_passed_by_forging_the_status(hello, tmp_path):
    """A blocking `command-exit-zero` gate on `…; exit 1` passed when the command wrote `X0` to
    the inherited status channel first."""
    seen = tmp_path / "gate-fds.json"
    forge = (
        f"{sys.executable} -c 'import json, os\n"
        "fds = []\n"
        "for fd in range(3, 1024):\n"
        "    try: os.fstat(fd)\n"
        "    except OSError: continue\n"
        "    fds.append(fd)\n"
        '    try: os.write(fd, b"X0\\n")\n'
        "    except OSError: pass\n"
        f'open("{seen}", "w").write(json.dumps(fds))\'; exit 1'
    )
    gate = {
        "point": "ship:pre",
        "check": {"predicate": {"kind": "command-exit-zero", "command": forge}},
        "blocking": True,
        "onError": "halt",
    }
    caps = tmp_path / "caps"
    shutil.copytree(CAPS, caps)
    write_capability(caps, feature("forged", gates=[gate]))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(caps), subprocess=True)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "blocked at ship:pre by gate forged: command exited 1" in p.stdout + p.stderr
    assert json.loads(seen.read_text()) == []  # the gate's command saw only 0-2 as well
    assert "shipped" not in p.stdout
