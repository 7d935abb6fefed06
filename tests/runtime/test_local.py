"""LocalRuntime against real tiny executables under tmp_path/.looprail/."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from looprail.runtime.base import (
    DispatchContext,
    Outcome,
    Runtime,
    TaskWork,
    ask_verdict,
    compact,
    deliver_context,
    deliver_message,
    do_phase_work,
    execute_task,
    run_command,
    run_query_check,
    run_skill,
    spawn_agent,
    spawn_banner,
)
from looprail.runtime.local import LocalRuntime, Timeouts

# Writes its stdin (the request) and a few facts about how it was started next to the project.
RECORDER = """#!/bin/sh
cat > "$LOOPRAIL_PROJECT/request.json"
for a in "$@"; do printf "%s\\n" "$a"; done > "$LOOPRAIL_PROJECT/args.txt"
pwd > "$LOOPRAIL_PROJECT/cwd.txt"
env | grep '^LOOPRAIL_' | sort > "$LOOPRAIL_PROJECT/env.txt"
"""
VERDICT = """#!/bin/sh
for a in "$@"; do printf "%s\\n" "$a"; done > "$LOOPRAIL_PROJECT/args.txt"
echo '{"block": true, "message": "no UI-SPEC.md"}'
"""


def write_exe(path: Path, body: str, *, executable: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".looprail").mkdir(parents=True)
    (root / ".planning" / "phases" / "03-ui").mkdir(parents=True)
    return root


@pytest.fixture
def lines() -> list[str]:
    return []


@pytest.fixture
def runtime(project: Path, lines: list[str]) -> LocalRuntime:
    made = LocalRuntime(project, progress=lines.append)
    made.banner_after_s = 0  # the banner at once: these tests see which work announces itself
    return made


def make_ctx(project: Path, **overrides) -> DispatchContext:
    fields = {
        "project": project,
        "phase_number": "3",
        "phase_dir": project / ".planning" / "phases" / "03-ui",
        "point": "plan:pre",
        "cap_id": "ui",
        "timeout_s": 20,
    }
    fields.update(overrides)
    return DispatchContext(**fields)


def read_request(project: Path) -> dict:
    return json.loads((project / "request.json").read_text())


def read_args(project: Path) -> list[str]:
    return (project / "args.txt").read_text().splitlines()


def read_env(project: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in (project / "env.txt").read_text().splitlines())
    return dict(pairs)


def test_satisfies_the_runtime_protocol(runtime: LocalRuntime) -> None:
    assert isinstance(runtime, Runtime)


def test_skill_receives_the_request_on_stdin(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/skills/gsd-foo", RECORDER)
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project, plan_id="03-01", wave=1))
    assert outcome.ok, outcome.detail
    assert read_request(project) == {
        "protocol": 1,
        "kind": "skill",
        "name": "gsd-foo",
        "project": str(project),
        "point": "plan:pre",
        "capId": "ui",
        "flavor": "gsd",
        "phase": {"number": "3", "dir": str(project / ".planning/phases/03-ui")},
        "planId": "03-01",
        "taskId": None,
        "wave": 1,
    }
    assert read_args(project) == []


def test_environment_and_working_directory(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/skills/gsd-foo", RECORDER)
    ctx = make_ctx(project, env={"EXTRA_VAR": "x", "LOOPRAIL_POINT": "spoofed"})
    assert run_skill(runtime, "gsd-foo", ctx).ok
    env = read_env(project)
    assert env["LOOPRAIL_PROJECT"] == str(project)
    assert env["LOOPRAIL_PHASE"] == "3"
    assert env["LOOPRAIL_PHASE_DIR"] == str(project / ".planning/phases/03-ui")
    assert env["LOOPRAIL_POINT"] == "plan:pre"  # ours win over extras
    assert env["LOOPRAIL_KIND"] == "skill"
    assert env["LOOPRAIL_NAME"] == "gsd-foo"
    assert env["LOOPRAIL_CAP_ID"] == "ui"
    assert env["LOOPRAIL_FLAVOR"] == "gsd"
    assert Path((project / "cwd.txt").read_text().strip()).resolve() == project.resolve()


def test_absent_values_are_empty_not_inherited(
    project: Path, runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPRAIL_POINT", "stale:point")
    write_exe(project / ".looprail/skills/gsd-foo", RECORDER)
    assert run_skill(runtime, "gsd-foo", make_ctx(project, point=None, phase_dir=None)).ok
    env = read_env(project)
    assert env["LOOPRAIL_POINT"] == ""
    assert env["LOOPRAIL_PHASE_DIR"] == ""


def test_exit_zero_with_json_stdout_is_ok_with_data(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/skills/gsd-foo", '#!/bin/sh\necho \'{"wrote": ["a.md"]}\'\n')
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert outcome.ok and outcome.exit_code == 0 and outcome.detail == ""
    assert outcome.data == {"wrote": ["a.md"]}


def test_plain_stdout_has_no_data(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/skills/gsd-foo", "#!/bin/sh\necho done\n")
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert outcome.ok and outcome.stdout == "done\n" and outcome.data is None


def test_non_zero_exit_is_a_failed_outcome(project: Path, runtime: LocalRuntime) -> None:
    write_exe(
        project / ".looprail/skills/gsd-foo", "#!/bin/sh\necho warming >&2\necho boom >&2\nexit 3\n"
    )
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert not outcome.ok and not outcome.unavailable
    assert outcome.exit_code == 3
    assert outcome.detail == ".looprail/skills/gsd-foo exited 3: boom"
    assert outcome.stderr == "warming\nboom\n"


def test_exit_69_is_unavailable(project: Path, runtime: LocalRuntime) -> None:
    body = '#!/bin/sh\necho \'{"block": false, "message": "no data"}\'\nexit 69\n'
    write_exe(project / ".looprail/checks/drift", body)
    outcome = run_query_check(runtime, ["drift"], make_ctx(project))
    assert not outcome.ok and outcome.unavailable and outcome.exit_code == 69
    assert "unavailable" in outcome.detail
    assert outcome.data == {"block": False, "message": "no data"}  # kept, but not a verdict


def test_timeout_kills_the_process(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/agents/slow", "#!/bin/sh\nsleep 30\n")
    outcome = spawn_agent(runtime, "slow", make_ctx(project, timeout_s=0.5))
    assert not outcome.ok and outcome.timed_out and outcome.exit_code is None
    assert outcome.detail == ".looprail/agents/slow timed out after 0.5s and was killed"


def test_default_timeouts_come_from_the_runtime(project: Path, lines: list[str]) -> None:
    write_exe(project / ".looprail/skills/gsd-slow", "#!/bin/sh\nsleep 30\n")
    runtime = LocalRuntime(project, timeouts=Timeouts(skill=0.5), progress=lines.append)
    outcome = run_skill(runtime, "gsd-slow", make_ctx(project, timeout_s=None))
    assert outcome.timed_out


def test_a_large_request_to_a_process_that_never_reads_still_times_out(
    project: Path, runtime: LocalRuntime
) -> None:
    # 1 MiB of role context would block a synchronous stdin write on a full pipe.
    write_exe(project / ".looprail/agents/planner", "#!/bin/sh\nsleep 30\n")
    ctx = make_ctx(project, timeout_s=0.5)
    deliver_context(runtime, "planner", "x" * (1 << 20), ctx)
    outcome = do_phase_work(runtime, "planner", "plan", ctx)
    assert outcome.timed_out


def test_output_is_capped(project: Path, lines: list[str]) -> None:
    body = "#!/bin/sh\nhead -c 10000 /dev/zero | tr '\\0' a\n"
    write_exe(project / ".looprail/skills/gsd-chatty", body)
    runtime = LocalRuntime(project, output_cap=100, progress=lines.append)
    outcome = run_skill(runtime, "gsd-chatty", make_ctx(project))
    assert outcome.ok and outcome.truncated
    assert outcome.stdout == "a" * 100


def test_missing_executable(project: Path, runtime: LocalRuntime) -> None:
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert not outcome.ok and outcome.exit_code is None
    assert outcome.detail == "no executable .looprail/skills/gsd-foo"


def test_non_executable_file(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/skills/gsd-foo", "#!/bin/sh\n", executable=False)
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert not outcome.ok
    assert outcome.detail.startswith(".looprail/skills/gsd-foo is not executable")


def test_a_directory_is_not_an_executable(project: Path, runtime: LocalRuntime) -> None:
    (project / ".looprail/skills/gsd-foo").mkdir(parents=True)
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert outcome.detail == ".looprail/skills/gsd-foo is not a file"


def test_a_file_that_cannot_start(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/skills/gsd-foo", "echo no shebang\n")
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert not outcome.ok
    assert outcome.detail.startswith("could not start .looprail/skills/gsd-foo")


def test_killed_by_a_signal(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/skills/gsd-foo", "#!/bin/sh\nkill -9 $$\n")
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert not outcome.ok
    assert outcome.detail == ".looprail/skills/gsd-foo was killed by SIGKILL"


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "-rf", ".hidden", "", "x\ny", "a..b"])
def test_names_that_are_not_plain_file_names_are_refused(
    project: Path, runtime: LocalRuntime, name: str
) -> None:
    write_exe(project / "escape", "#!/bin/sh\ntouch ran\n")
    outcome = run_skill(runtime, name, make_ctx(project))
    assert not outcome.ok
    assert outcome.detail.startswith("refused name")
    assert "\n" not in outcome.detail
    assert not (project / "ran").exists()


def test_symlink_escaping_looprail_is_refused(
    project: Path, runtime: LocalRuntime, lines: list[str]
) -> None:
    outside = write_exe(project.parent / "outside" / "agent", "#!/bin/sh\ntouch ran\n")
    (project / ".looprail/agents").mkdir()
    (project / ".looprail/agents/evil").symlink_to(outside)
    outcome = spawn_agent(runtime, "evil", make_ctx(project))
    assert not outcome.ok
    assert outcome.detail.startswith(".looprail/agents/evil resolves outside .looprail/")
    assert lines == []  # nothing was spawned, so no banner
    assert not (project / "ran").exists()


def test_symlinked_folder_escaping_looprail_is_refused(
    project: Path, runtime: LocalRuntime
) -> None:
    write_exe(project.parent / "elsewhere" / "gsd-foo", "#!/bin/sh\n")
    (project / ".looprail/skills").symlink_to(project.parent / "elsewhere")
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert not outcome.ok and "resolves outside" in outcome.detail


def test_symlink_inside_looprail_is_followed(project: Path, runtime: LocalRuntime) -> None:
    target = write_exe(project / ".looprail/bin/shared", "#!/bin/sh\necho shared\n")
    (project / ".looprail/skills").mkdir()
    (project / ".looprail/skills/gsd-foo").symlink_to(target)
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert outcome.ok and outcome.stdout == "shared\n"


def test_dangling_symlink_is_missing(project: Path, runtime: LocalRuntime) -> None:
    (project / ".looprail/skills").mkdir()
    (project / ".looprail/skills/gsd-foo").symlink_to(project / ".looprail/nothing")
    outcome = run_skill(runtime, "gsd-foo", make_ctx(project))
    assert outcome.detail == "no executable .looprail/skills/gsd-foo (dangling symlink)"


def test_command_argv_gets_phase_and_raw(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/commands/beads", RECORDER)
    outcome = run_command(runtime, ["beads", "sync", "close"], make_ctx(project))
    assert outcome.ok, outcome.detail
    assert read_args(project) == ["sync", "close", "--phase", "3", "--raw"]
    request = read_request(project)
    assert request["kind"] == "command"
    assert request["name"] == "beads sync close"
    assert request["words"] == ["beads", "sync", "close"]


def test_command_missing_executable_names_the_first_word(
    project: Path, runtime: LocalRuntime
) -> None:
    outcome = run_command(runtime, ["beads", "sync"], make_ctx(project))
    assert outcome.detail == "no executable .looprail/commands/beads"


def test_command_words_that_look_like_options_are_refused(
    project: Path, runtime: LocalRuntime
) -> None:
    write_exe(project / ".looprail/commands/beads", RECORDER)
    outcome = run_command(runtime, ["beads", "--exec=rm"], make_ctx(project))
    assert not outcome.ok and outcome.detail.startswith("refused command")
    assert not (project / "args.txt").exists()


def test_words_must_be_a_sequence_not_a_string(project: Path, runtime: LocalRuntime) -> None:
    with pytest.raises(TypeError):
        run_command(runtime, "beads sync", make_ctx(project))
    with pytest.raises(ValueError):
        run_query_check(runtime, [], make_ctx(project))


def test_query_argv_and_verdict(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/checks/ui", VERDICT)
    outcome = run_query_check(runtime, ["ui", "plan-gate"], make_ctx(project))
    assert outcome.ok, outcome.detail
    assert read_args(project) == ["plan-gate", "3"]
    assert outcome.data == {"block": True, "message": "no UI-SPEC.md"}


@pytest.mark.parametrize(
    ("stdout", "problem"),
    [
        ("", "printed no verdict (stdout is empty)"),
        ("all good", "stdout is not a JSON object"),
        ("[true]", "stdout is not a JSON object"),
        ('{"message": "x"}', 'verdict has no boolean "block"'),
        ('{"block": "yes"}', 'verdict has no boolean "block"'),
        ('{"block": false, "message": 3}', 'verdict "message" is not a string'),
    ],
)
def test_query_without_a_usable_verdict_is_an_error_of_the_check(
    project: Path, runtime: LocalRuntime, stdout: str, problem: str
) -> None:
    body = f"#!/bin/sh\nprintf '%s' '{stdout}'\n"
    write_exe(project / ".looprail/checks/ui", body)
    outcome = run_query_check(runtime, ["ui", "plan-gate"], make_ctx(project))
    assert not outcome.ok and outcome.exit_code == 0
    assert outcome.detail == f".looprail/checks/ui {problem}"


def test_host_tool_receives_commands_and_queries(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str]
) -> None:
    bin_dir = tmp_path / "bin"
    log = tmp_path / "host-args.txt"
    tool = f"""#!/bin/sh
printf '%s\\n' "$@" > "{log}"
if [ "$1" = check ]; then echo '{{"block": false, "message": "fine"}}'; fi
"""
    write_exe(bin_dir / "gsd_run", tool)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    runtime = LocalRuntime(project, host_tool="gsd_run", progress=lines.append)

    assert run_command(runtime, ["beads", "sync"], make_ctx(project)).ok
    assert log.read_text().splitlines() == ["beads", "sync", "--phase", "3", "--raw"]

    outcome = run_query_check(runtime, ["ui", "plan-gate"], make_ctx(project))
    assert outcome.ok, outcome.detail
    assert log.read_text().splitlines() == ["check", "ui", "plan-gate", "3", "--raw"]
    assert outcome.data == {"block": False, "message": "fine"}


def test_host_tool_from_the_context_overrides(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: LocalRuntime
) -> None:
    bin_dir = tmp_path / "bin"
    write_exe(bin_dir / "msd_run", "#!/bin/sh\nexit 4\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    outcome = run_command(runtime, ["sync"], make_ctx(project, host_tool="msd_run", flavor="msd"))
    assert outcome.exit_code == 4
    assert outcome.detail == "msd_run sync exited 4"


def test_missing_host_tool_is_a_failed_outcome(project: Path, lines: list[str]) -> None:
    runtime = LocalRuntime(project, host_tool="looprail_no_such_tool", progress=lines.append)
    for outcome in (
        run_command(runtime, ["sync"], make_ctx(project)),
        run_query_check(runtime, ["ui", "gate"], make_ctx(project)),
    ):
        assert not outcome.ok
        assert outcome.detail == "host tool looprail_no_such_tool not found on PATH"


def test_banner_is_printed_before_the_agent_runs(project: Path) -> None:
    marker = project / "agent-ran"
    write_exe(project / ".looprail/agents/gsd-mapper", f"#!/bin/sh\ntouch '{marker}'\n")
    seen: list[tuple[str, bool]] = []
    runtime = LocalRuntime(project, progress=lambda line: seen.append((line, marker.exists())))
    runtime.banner_after_s = 0
    assert spawn_agent(runtime, "gsd-mapper", make_ctx(project)).ok
    banner = (
        "◆ Spawning gsd-mapper... (runs in a subagent — no output until it returns; "
        "expected, not a freeze)"
    )
    assert seen == [(banner, False)]
    assert marker.exists()


def test_banner_defaults_to_stderr(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_exe(project / ".looprail/agents/gsd-mapper", "#!/bin/sh\n")
    runtime = LocalRuntime(project)
    runtime.banner_after_s = 0
    assert spawn_agent(runtime, "gsd-mapper", make_ctx(project)).ok
    assert capsys.readouterr().err == spawn_banner("gsd-mapper") + "\n"


def test_quick_agent_work_shows_no_banner(project: Path, lines: list[str]) -> None:
    write_exe(project / ".looprail/agents/gsd-mapper", "#!/bin/sh\n")
    runtime = LocalRuntime(project, progress=lines.append)
    assert runtime.banner_after_s == 2.0  # the default: ~2 s of silence first
    assert spawn_agent(runtime, "gsd-mapper", make_ctx(project)).ok
    assert lines == []


def test_silent_agent_work_gets_the_banner_while_it_runs(project: Path) -> None:
    marker = project / "agent-done"
    write_exe(project / ".looprail/agents/gsd-mapper", f"#!/bin/sh\nsleep 1\ntouch '{marker}'\n")
    seen: list[tuple[str, bool]] = []
    runtime = LocalRuntime(project, progress=lambda line: seen.append((line, marker.exists())))
    runtime.banner_after_s = 0.2
    assert spawn_agent(runtime, "gsd-mapper", make_ctx(project)).ok
    assert seen == [(spawn_banner("gsd-mapper"), False)]  # shown while it was still running


def test_streamed_output_cancels_the_banner(project: Path) -> None:
    # with -v the agent's own lines show it is alive: no banner, however long it runs
    write_exe(project / ".looprail/agents/gsd-mapper", "#!/bin/sh\necho working\nsleep 1\n")
    said, streamed = [], []
    runtime = LocalRuntime(
        project, progress=said.append, output=lambda *line: streamed.append(line)
    )
    runtime.banner_after_s = 0.5
    assert spawn_agent(runtime, "gsd-mapper", make_ctx(project)).ok
    assert streamed == [("agent gsd-mapper", "stdout", "working")] and said == []


def test_no_banner_for_a_missing_agent(
    project: Path, runtime: LocalRuntime, lines: list[str]
) -> None:
    outcome = spawn_agent(runtime, "gsd-mapper", make_ctx(project))
    assert outcome.detail == "no executable .looprail/agents/gsd-mapper"
    assert lines == []


def test_phase_work_gets_the_roles_context(
    project: Path, runtime: LocalRuntime, lines: list[str]
) -> None:
    write_exe(project / ".looprail/agents/planner", RECORDER)
    ctx = make_ctx(project, point=None, cap_id=None)
    assert do_phase_work(runtime, "planner", "plan", ctx, ["Read UI-SPEC.md first.\n"]).ok
    request = read_request(project)
    assert request["kind"] == "phase"
    assert request["name"] == "plan"
    assert request["role"] == "planner" and request["step"] == "plan"
    assert request["roleContext"] == {"planner": ["Read UI-SPEC.md first.\n"]}
    assert lines == [spawn_banner("planner")]


def test_a_contribution_runs_nothing(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/agents/planner", RECORDER)
    outcome = deliver_context(runtime, "planner", "hint", make_ctx(project, point="plan:pre"))
    assert outcome.ok and not (project / "request.json").exists()


def test_missing_role_agent_fails_phase_work(project: Path, runtime: LocalRuntime) -> None:
    outcome = do_phase_work(runtime, "verifier", "verify", make_ctx(project))
    assert outcome.detail == "no executable .looprail/agents/verifier"


def test_execute_task_sends_the_resolved_task(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/agents/executor", RECORDER)
    task = TaskWork(
        plan_id="03-01",
        task_id="T2",
        index=1,
        name="Build the card",
        files=("src/card.tsx",),
        read_first=("UI-SPEC.md",),
        action="Write it.",
        verify="npm test",
        acceptance_criteria=("renders",),
        done="card exists",
        tracker_id="beads:GSD-7",
        resolved_by_tracker=True,
    )
    ctx = make_ctx(project, point=None, wave=1)
    assert execute_task(runtime, task, ctx, ["Use the design tokens."]).ok
    request = read_request(project)
    assert request["kind"] == "task" and request["name"] == "03-01/T2"
    assert (request["planId"], request["taskId"], request["wave"]) == ("03-01", "T2", 1)
    assert request["roleContext"] == {"executor": ["Use the design tokens."]}
    assert request["task"] == {
        "planId": "03-01",
        "taskId": "T2",
        "index": 1,
        "name": "Build the card",
        "type": "auto",
        "files": ["src/card.tsx"],
        "readFirst": ["UI-SPEC.md"],
        "action": "Write it.",
        "verify": "npm test",
        "acceptanceCriteria": ["renders"],
        "done": "card exists",
        "trackerId": "beads:GSD-7",
        "resolvedByTracker": True,
        "planSections": {},
        "readFirstNotes": {},
        "taskSections": {},
        "checks": [],
        "checkFailures": [],
    }
    env = read_env(project)
    assert (env["LOOPRAIL_PLAN_ID"], env["LOOPRAIL_TASK_ID"], env["LOOPRAIL_WAVE"]) == (
        "03-01",
        "T2",
        "1",
    )


def test_agent_verdict(project: Path, runtime: LocalRuntime, lines: list[str]) -> None:
    body = """#!/bin/sh
cat > "$LOOPRAIL_PROJECT/request.json"
echo '{"block": true, "message": "looks off"}'
"""
    write_exe(project / ".looprail/agents/ui-auditor", body)
    ask = {"ref": "ui-auditor", "prompt": "Does the UI match?"}
    outcome = ask_verdict(runtime, ask, make_ctx(project))
    assert outcome.ok and outcome.data == {"block": True, "message": "looks off"}
    request = read_request(project)
    assert request["kind"] == "verdict"
    assert request["verdict"] == {"ref": "ui-auditor", "prompt": "Does the UI match?"}
    assert lines == [spawn_banner("ui-auditor")]


def test_agent_verdict_without_ref(project: Path, runtime: LocalRuntime) -> None:
    outcome = ask_verdict(runtime, {"prompt": "?"}, make_ctx(project))
    assert outcome == Outcome.failed('agentVerdict has no "ref" naming an agent')


def test_message_and_compact_go_to_the_session(project: Path, runtime: LocalRuntime) -> None:
    write_exe(project / ".looprail/session", RECORDER)
    ctx = make_ctx(project, point=None)
    outcome = deliver_message(
        runtime, "Blocked.", send_as="custom", delivery="followUp", trigger_turn=True, ctx=ctx
    )
    assert outcome.ok
    request = read_request(project)
    assert request["kind"] == "message" and request["name"] == "session"
    assert request["message"] == {
        "text": "Blocked.",
        "sendAs": "custom",
        "delivery": "followUp",
        "triggerTurn": True,
    }
    assert compact(runtime, "Keep the decisions.", ctx).ok
    request = read_request(project)
    assert request["kind"] == "compact" and request["instructions"] == "Keep the decisions."


def test_missing_session_is_a_failed_delivery(project: Path, runtime: LocalRuntime) -> None:
    outcome = compact(runtime, None, make_ctx(project))
    assert outcome.detail == "no executable .looprail/session"


def test_invalid_message_delivery_is_a_programming_error(
    project: Path, runtime: LocalRuntime
) -> None:
    with pytest.raises(ValueError):
        deliver_message(
            runtime,
            "x",
            send_as="custom",
            delivery="nextTurn",
            trigger_turn=True,
            ctx=make_ctx(project),
        )


def test_context_for_another_project_is_a_programming_error(
    project: Path, runtime: LocalRuntime, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="project"):
        run_skill(runtime, "gsd-foo", make_ctx(tmp_path / "other"))


def test_a_relative_project_is_reported_absolute(
    project: Path, runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_exe(project / ".looprail/skills/gsd-foo", RECORDER)
    monkeypatch.chdir(project.parent)
    ctx = make_ctx(Path(project.name), phase_dir=None)
    assert run_skill(runtime, "gsd-foo", ctx).ok
    assert read_request(project)["project"] == str(project.resolve())


@pytest.mark.parametrize("path_var", ["bin", ":/nonexistent", "/nonexistent::", "."])
def test_host_tool_is_never_found_through_an_empty_or_relative_path_entry(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str], path_var
) -> None:
    # An empty or relative PATH entry is the current directory (often the project): neither
    # the cwd's nor the project's gsd_run may run.
    for where in (project, project / "bin"):
        write_exe(where / "gsd_run", "#!/bin/sh\necho planted\n")
    monkeypatch.chdir(project)
    monkeypatch.setenv("PATH", path_var)
    runtime = LocalRuntime(project, host_tool="gsd_run", progress=lines.append)
    outcome = run_command(runtime, ["sync"], make_ctx(project))
    assert not outcome.ok
    assert "not found on PATH" in outcome.detail


@pytest.mark.parametrize("host", ["./gsd_run", "bin/gsd_run", "-gsd_run", ".."])
def test_host_tool_must_be_a_plain_name(project: Path, lines: list[str], host: str) -> None:
    runtime = LocalRuntime(project, host_tool=host, progress=lines.append)
    outcome = run_command(runtime, ["sync"], make_ctx(project))
    assert not outcome.ok
    assert "host tool" in outcome.detail and "a plain name" in outcome.detail


def test_host_tool_may_be_an_absolute_path(tmp_path: Path, project: Path, lines: list[str]) -> None:
    tool = tmp_path / "elsewhere" / "gsd_run"
    write_exe(tool, '#!/bin/sh\necho "$@"\n')
    runtime = LocalRuntime(project, host_tool=str(tool), progress=lines.append)
    outcome = run_command(runtime, ["sync"], make_ctx(project))
    assert outcome.ok, outcome.detail
    assert outcome.stdout == "sync --phase 3 --raw\n"
    missing = LocalRuntime(project, host_tool=str(tmp_path / "nope"), progress=lines.append)
    outcome = run_command(missing, ["sync"], make_ctx(project))
    assert not outcome.ok and "does not exist" in outcome.detail
