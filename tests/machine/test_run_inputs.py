"""`looprail run` reads and checks every input it reads up front before the journal run starts:
bad input is one line naming the file, the field and the reason, exit 1, and nothing journaled
(no failed or halted run left behind, no journal created in a fresh project). Each case went
through the CLI and left a halted run in the journal before the fix."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.support import REPO, run_cli, write_config

EXAMPLE = REPO / "examples" / "hello-loop"
CAPS = REPO / "examples" / "capabilities"
HOOKS = {"local": {"lint": {"description": "d", "event": "plan:pre", "shell": "true"}}}


@pytest.fixture
def hello(tmp_path):
    project = tmp_path / "hello-loop"
    shutil.copytree(EXAMPLE, project)
    return project


@pytest.fixture
def native_home(tmp_path):
    """A LOOPRAIL_HOME with one native hook: the next-turn queue is read only when there are."""
    home = tmp_path / "lhome"
    home.mkdir()
    (home / "hooks.json").write_text(json.dumps(HOOKS))
    return {"LOOPRAIL_HOME": str(home)}


def _run(project, env=None):
    args = ("run", str(project), "--phase", "1", "--capabilities", str(CAPS))
    return run_cli(*args, env=env)


def _runs(project) -> list:
    from looprail.journal import Journal

    if not (project / ".looprail" / "journal.sqlite").exists():
        return []
    jr = Journal.open_readonly(project)
    try:
        return [(r.id, r.status) for r in jr.runs()]
    finally:
        jr.close()


def _refused(p, *expected: str) -> None:
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("looprail: error:")]
    assert len(errors) == 1, p.stderr
    for text in expected:
        assert text in errors[0], p.stderr
    assert "run " not in p.stdout  # no run was announced


@pytest.mark.parametrize(
    "body, where, reason",
    [
        ('[{"message": "x"},', "$", "not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "$", "JSON nested too deeply"),
        ('{"message": "x"}', "$", "must be a list of messages, not object"),
        ('["x"]', "$[0]", "must be an object, not string"),
        ('[{"message": "ok"}, {"message": 3}]', "$[1].message", "must be a string"),
        ('[{"message": "ok", "sendAs": "root"}]', "$[0].sendAs", 'must be "custom" or "user"'),
        ('[{"message": "ok", "triggerTurn": "yes"}]', "$[0].triggerTurn", "must be true or false"),
        ('[{"message": "ok", "sendTo": "x"}]', "$[0].sendTo", "unknown field"),
        (b"\xff[]", "$", "not UTF-8"),
    ],
)
def test_a_broken_next_turn_queue_stops_the_run_before_it_is_journaled(
    hello, native_home, body, where, reason
):
    queue = hello / ".looprail" / "next-turn.json"
    if isinstance(body, bytes):
        queue.write_bytes(body)
    else:
        queue.write_text(body)
    before = queue.read_bytes()
    p = _run(hello, native_home)
    _refused(p, f"{queue}: {where}: {reason}", "the run did not start")
    assert not (hello / ".looprail" / "journal.sqlite").exists()
    assert queue.read_bytes() == before  # what was queued is kept, never dropped


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_next_turn_queue_is_refused_without_reading_it(hello, native_home):
    queue = hello / ".looprail" / "next-turn.json"
    os.mkfifo(queue)  # a read would wait forever for a writer
    p = _run(hello, native_home)
    _refused(p, f"{queue}: $: cannot be read", "not a regular file")
    assert _runs(hello) == []


def test_bad_input_adds_no_run_to_an_existing_journal(hello, native_home):
    first = _run(hello, native_home)
    assert first.returncode == 0, first.stderr
    runs = _runs(hello)
    assert [status for _, status in runs] == ["shipped"]
    queue = hello / ".looprail" / "next-turn.json"
    queue.write_text('[{"message": 3}]')
    _refused(_run(hello, native_home), "$[0].message: must be a string")
    assert _runs(hello) == runs
    queue.unlink()
    plan = hello / ".planning" / "phases" / "01-greeting" / "01-02-PLAN.md"
    plan.write_text(plan.read_text().replace("depends_on: []", "depends_on: ["))
    _refused(_run(hello, native_home), "01-02-PLAN.md:", "invalid YAML frontmatter")
    assert _runs(hello) == runs


def test_a_malformed_plan_already_there_stops_the_run_before_anything_is_written(hello):
    phase = hello / ".planning" / "phases" / "01-greeting"
    (phase / "01-01-PLAN.md").write_text("---\nwave: [\n---\n")
    before = sorted(f.name for f in phase.iterdir())
    p = _run(hello)
    _refused(p, "01-01-PLAN.md:", "invalid YAML frontmatter", "the run did not start")
    assert _runs(hello) == [] and not (hello / ".looprail" / "journal.sqlite").exists()
    assert sorted(f.name for f in phase.iterdir()) == before  # no CONTEXT.md from discuss


def test_a_valid_queue_is_still_delivered_and_consumed(hello, native_home):
    queue = hello / ".looprail" / "next-turn.json"
    queue.write_text(json.dumps([{"message": "remember the tests", "sendAs": "custom"}]))
    p = _run(hello, native_home)
    assert p.returncode == 0, p.stderr
    assert not queue.exists()


def test_a_non_boolean_worktrees_setting_stops_the_run_before_it_is_journaled(hello):
    config = json.loads((hello / ".planning" / "config.json").read_text())
    config["looprail"] = {"worktrees": "yes"}
    write_config(hello, config)
    p = _run(hello)
    _refused(p, ".planning/config.json: looprail.worktrees: must be true or false")
    assert _runs(hello) == []


def test_a_missing_agent_cli_stops_the_run_before_it_is_journaled(hello, tmp_path):
    # Found at the first role before: the run was journaled, discuss:pre had run, then it halted.
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    path = f"{empty}{os.pathsep}{os.path.dirname(shutil.which('sh') or '/bin/sh')}"
    p = run_cli(
        "run", str(hello), "--phase", "1", "--capabilities", str(CAPS), "--agent", "codex",
        env={"PATH": path},
    )  # fmt: skip
    _refused(p, "codex: `codex` not found on PATH; install Codex CLI", "the run did not start")
    assert _runs(hello) == []
