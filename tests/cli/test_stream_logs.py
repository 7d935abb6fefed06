"""`-v` streams what running steps and agents print, line by line, while they run; every
process of a run has its log under `.looprail/logs/<run>/`, written as output arrives; a failed
unit's log is named in the failure line, `status`, `report` and `--json`. Through the CLI, with
real processes (and the fake agent CLIs)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.agents import agent_env, looprail

PLAN = (
    "---\nphase: 01-tiny\nplan: {plan}\ntype: execute\nwave: 1\ndepends_on: []\n"
    "files_modified: [{plan}.txt]\nautonomous: true\n---\n<tasks>\n"
    '<task type="auto"><name>work</name><files>{plan}.txt</files><action>work</action></task>\n'
    "</tasks>\n"
)
VERIFIER = "#!/bin/sh\nprintf -- '---\\nstatus: passed\\n---\\n' > \"$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md\"\n"


def make_project(tmp_path: Path, executor: str, plans: tuple[str, ...] = ("01",)) -> Path:
    """A phase with its CONTEXT and plans written (one task each, all in wave 1); the executor
    agent is `executor` (a shell script body), the verifier passes."""
    project = tmp_path / "p"
    phase = project / ".planning" / "phases" / "01-tiny"
    phase.mkdir(parents=True)
    for plan in plans:
        (phase / f"01-{plan}-PLAN.md").write_text(PLAN.format(plan=plan))
    (phase / "01-CONTEXT.md").write_text("x")
    agents = project / ".looprail" / "agents"
    agents.mkdir(parents=True)
    for role in ("orchestrator", "planner"):
        (agents / role).write_text("#!/bin/sh\nexit 0\n")
    (agents / "verifier").write_text(VERIFIER)
    (agents / "executor").write_text(f"#!/bin/sh\n{executor}\n")
    for exe in agents.iterdir():
        exe.chmod(0o755)
    return project


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
    """In process: the runtimes pipe every child's output and relay it as lines, the same in
    the console script's process (a run that is stopped or read live is a `Reader`)."""
    return looprail(*args, cwd=cwd or Path.cwd(), env=env or dict(os.environ))


class Reader:
    """looprail started in the background; its stderr read line by line as it comes."""

    def __init__(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "looprail", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=env,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = 30) -> str:
        """The first line (from here on) containing `pattern`; fails after `timeout`."""
        deadline = time.monotonic() + timeout
        for line in self.lines:
            if pattern in line:
                return line
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if pattern in line:
                return line
        raise AssertionError(f"{pattern!r} not seen; stderr so far:\n{''.join(self.lines)}")

    def finish(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout=timeout)
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


# A step that prints, then waits for the test's go-ahead (a file), then prints again: the first
# line can only be seen before the second if it was streamed while the step was still running.
def waiting_step(release: Path) -> str:
    return (
        'echo "first line of $LOOPRAIL_TASK_ID"\n'
        f"i=0; while [ ! -e '{release}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n"
        'echo "second line"\n'
    )


def test_verbose_shows_a_steps_first_line_while_the_step_still_runs(tmp_path: Path) -> None:
    release = tmp_path / "release"
    project = make_project(tmp_path, waiting_step(release))
    run = Reader("run", str(project), "--phase", "1", "-v")
    try:
        first = run.wait_for("first line of")
        assert first == "    ┆ 01-01/T1: first line of T1\n"
        assert run.proc.poll() is None  # the step is still waiting
        assert not any("second line" in line for line in run.lines)
        release.touch()
        assert run.finish() == 0, "".join(run.lines)
    finally:
        run.kill()
    out = "".join(run.lines)
    assert out.index("┆ 01-01/T1: first line") < out.index("┆ 01-01/T1: second line")
    assert out.index("┆ 01-01/T1: second line") < out.index("✓ 01-01/T1")


def test_an_agent_clis_events_stream_as_lines_while_it_works(tmp_path: Path) -> None:
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is needed for the agent runtime's plan worktrees")
    release = tmp_path / "release"
    env = agent_env(
        tmp_path, FAKE_AGENT_EVENT_SLEEP="0.05", FAKE_AGENT_WAIT_FOR=str(release), NO_COLOR="1"
    )
    done = cli("init", "demo", "--agent", "claude", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    run = Reader("run", "--phase", "1", "-v", cwd=tmp_path / "demo", env=env)
    try:
        # The first agent (discuss) said it started; it has not answered yet.
        init = run.wait_for("┆ orchestrator: [init] session ses-")
        assert init.startswith("    ┆ orchestrator: [init] session ses-")
        assert not any("orchestrator did the discuss work" in line for line in run.lines)
        assert run.proc.poll() is None
        release.touch()
        assert run.finish() == 0, "".join(run.lines)
    finally:
        run.kill()
    out = "".join(run.lines)
    # Events are read into words, each on its own line, before the step's own verdict.
    assert "    ┆ orchestrator: done\n" in out
    assert "    ┆ orchestrator: [result] success, $0.01\n" in out
    assert out.index("┆ orchestrator: done") < out.index("orchestrator did the discuss work")
    for task in ("01-01/T1", "01-02/T1", "01-03/T1"):
        assert f"    ┆ {task}: Wrote " in out, out
    assert '{"type"' not in out  # no raw JSON events


def test_parallel_tasks_interleave_by_whole_lines(tmp_path: Path) -> None:
    body = "x" * 300
    # Each task prints 200 long lines as fast as it can, both at once (--jobs 2).
    script = f'for i in $(seq 1 200); do echo "$LOOPRAIL_PLAN_ID-$i-{body}"; done'
    project = make_project(tmp_path, script, plans=("01", "02"))
    done = cli("run", str(project), "--phase", "1", "--jobs", "2", "-v")
    assert done.returncode == 0, done.stderr
    streamed = [line for line in done.stderr.splitlines() if "┆" in line]
    assert len(streamed) == 400, done.stderr[-2000:]
    pattern = re.compile(rf"    ┆ (01-0[12])/T1: (01-0[12])-(\d+)-{body}")
    seen: dict[str, list[int]] = {"01-01": [], "01-02": []}
    for line in streamed:
        match = pattern.fullmatch(line)
        assert match is not None, f"a line was cut or mixed: {line[:120]!r}"
        assert match.group(1) == match.group(2)
        seen[match.group(1)].append(int(match.group(3)))
    assert seen == {"01-01": list(range(1, 201)), "01-02": list(range(1, 201))}


def test_control_characters_in_streamed_lines_are_escaped(tmp_path: Path) -> None:
    script = r"printf 'bell\007 \033[31mred\033[0m \033]0;title\007end \001 done\n'"
    project = make_project(tmp_path, script)
    done = cli("run", str(project), "--phase", "1", "-v")
    assert done.returncode == 0, done.stderr
    assert "    ┆ 01-01/T1: bell\\x07 red end \\x01 done\n" in done.stderr, done.stderr
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", done.stderr)


def test_without_verbose_nothing_a_step_prints_is_shown(tmp_path: Path) -> None:
    project = make_project(tmp_path, "echo 'the executor talks'; echo 'and warns' >&2")
    done = cli("run", str(project), "--phase", "1")
    assert done.returncode == 0, done.stderr
    assert "the executor talks" not in done.stderr + done.stdout
    assert "and warns" not in done.stderr + done.stdout and "┆" not in done.stderr
    # …but the log has it, both streams.
    (log,) = (project / ".looprail" / "logs").glob("*/*-task-01-01-T1.log")
    text = log.read_text()
    assert "the executor talks\n" in text and "and warns\n" in text


def test_quiet_wins_over_verbose(tmp_path: Path) -> None:
    project = make_project(tmp_path, "echo 'the executor talks'")
    done = cli("run", str(project), "--phase", "1", "-q", "-v")
    assert done.returncode == 0, done.stderr
    assert "┆" not in done.stderr


# -- logs -------------------------------------------------------------------------------------


def test_every_process_of_a_run_has_its_log_under_the_run(tmp_path: Path) -> None:
    project = make_project(tmp_path, "echo 'working on it'")
    done = cli("run", str(project), "--phase", "1", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "shipped" and summary["log"] is None
    folder = project / ".looprail" / "logs" / summary["runId"]
    names = sorted(p.name for p in folder.iterdir())
    # numbered in the order the work started, named as the agent runtimes name transcripts
    assert names == [
        "001-task-01-01-T1.log",
        "002-phase-verify.log",
        "003-phase-ship.log",
    ], names
    text = (folder / names[0]).read_text()
    assert text.splitlines() == [
        "# looprail: .looprail/agents/executor",
        "working on it",
        text.splitlines()[-1],
    ]
    assert re.fullmatch(r"# looprail: ok \(\d+\.\ds\)", text.splitlines()[-1])


def test_a_failed_steps_log_is_named_everywhere(tmp_path: Path) -> None:
    project = make_project(
        tmp_path, "echo 'compiling the thing'; echo 'error: it broke' >&2; exit 3"
    )
    done = cli("run", str(project), "--phase", "1")
    assert done.returncode == 1
    found = re.search(r"\(log: (\.looprail/logs/[^ )]+\.log)\)", done.stderr)
    assert found is not None, done.stderr
    rel = found.group(1)
    halted = [line for line in done.stderr.splitlines() if line.startswith("run ")][-1]
    assert "halted" in halted and f"(log: {rel})" in halted
    text = (project / rel).read_text()
    assert "compiling the thing\n" in text and "error: it broke\n" in text
    assert "exited 3" in text.splitlines()[-1]

    status = cli("status", str(project))
    assert f"\nlog: {rel}\n" in status.stdout, status.stdout
    status_json = json.loads(cli("status", str(project), "--json").stdout)
    assert status_json["log"] == rel
    report = cli("report", str(project))
    assert f"\n  log: {rel}\n" in report.stdout, report.stdout
    assert (
        f"(log: {rel})"
        in json.loads(cli("report", str(project), "--json").stdout)["run"]["haltReason"]
    )
    resumed = cli("resume", str(project), "--json")
    assert resumed.returncode == 1
    again = json.loads(resumed.stdout)
    assert again["status"] == "halted" and again["log"].endswith("-task-01-01-T1.log")
    assert again["log"] != rel  # the task ran again, with a log of its own
    assert (project / again["log"]).is_file()


def test_a_sigkilled_run_leaves_the_partial_log(tmp_path: Path) -> None:
    project = make_project(tmp_path, "echo 'step one done'; echo 'on stderr too' >&2; sleep 60")
    run = Reader("run", str(project), "--phase", "1")
    try:
        deadline = time.monotonic() + 30
        logs: list[Path] = []
        while time.monotonic() < deadline:
            logs = list((project / ".looprail" / "logs").glob("*/*-task-01-01-T1.log"))
            if logs and "on stderr too" in logs[0].read_text():
                break
            time.sleep(0.05)
        assert logs, "no log appeared while the step ran"
        assert run.proc.poll() is None  # still running: the log was written as output arrived
        os.kill(run.proc.pid, signal.SIGKILL)
        run.proc.wait(timeout=30)
    finally:
        run.kill()
    text = logs[0].read_text()
    assert "step one done\n" in text and "on stderr too\n" in text
    assert "# looprail: ok" not in text  # it never finished
