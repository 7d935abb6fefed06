"""The token counts of benchmarks/prompt_tokens.py (issue 42, point 5) are counts of what was
sent: a real CLI's run of the example against the scripted model server has every phase's
input, cached and output tokens, and looprail's prompt inside its input; the executor's prompt
splits into parts that add up to it (with the fake CLI, so without the real ones); the
reference's roles are measured from its files. Each part skips without what it needs: a real
CLI, ../shared's real GSD phases, the reference's tree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks.prompt_tokens import (
    CHARS_PER_TOKEN,
    PHASES,
    REFERENCE_ROLES,
    parts_in_tokens,
    prompt_parts,
    real_phase_executor_prompts,
    reference_sizes,
    run_example,
    transcript_prompts,
)
from tests.e2e.test_prompts_carry import _project
from tests.plans import real_projects as rp
from tests.support.agents import agent_env, looprail
from tests.support.real_agents import real_cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is needed")
REFERENCE_TREE = Path("/root/.cache/looprail-reference/gsd")


def _adds_up(prompt: str) -> dict[str, int]:
    parts = prompt_parts(prompt)
    assert sum(parts.values()) == len(prompt), parts
    assert all(chars > 0 for chars in parts.values()), parts
    return parts


@pytest.mark.real_agents
def test_a_real_cli_run_of_the_example_is_counted_phase_by_phase(tmp_path: Path) -> None:
    agent = next((a for a in ("claude", "opencode", "codex", "gemini") if real_cli(a)), None)
    if agent is None:
        pytest.skip("no real agent CLI is installed (.ci/run installs them)")
    got = run_example(agent, tmp_path)
    assert isinstance(got, dict), got
    assert list(got["phases"]) == list(PHASES)
    for phase, row in got["phases"].items():
        assert row["turns"] >= 1, phase
        assert row["input"] > 0 and row["output"] > 0, (phase, row)
        assert 0 <= row["cached"] <= row["input"], (phase, row)
        # every turn but the phase's first repeats the one before it (execute: 3 tasks)
        assert row["cached_turns"] == row["turns"] - 1, (phase, row)
        # looprail's prompt is inside what the CLI sent, in every turn
        assert 0 < got["prompts"][phase] * row["turns"] <= row["input"], (phase, row, got)
    assert got["phases"]["execute"]["turns"] == 6  # 3 tasks, 2 turns each
    executor = got["executor"]
    assert len(executor) == 3 and got["prompts"]["execute"] == sum(
        len(p) // CHARS_PER_TOKEN for p in executor
    )
    for prompt in executor:
        parts = _adds_up(prompt)
        assert {"brief", "task header (plan path, files, TDD flag)", "plan's other tasks"} <= set(
            parts
        )
        assert parts["brief"] > 2000  # the executor's brief, written afresh (issue 42 point 2)


def test_the_executor_prompt_splits_into_parts_that_add_up(tmp_path: Path) -> None:
    """With the fake CLI: a GSD phase whose plan has must_haves, context references, a TDD task
    and read_first files; every part the executor is handed is counted once."""
    env = agent_env(tmp_path)
    demo = _project(tmp_path, env, plan=True)
    done = looprail("run", "--phase", "1", cwd=demo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    prompts = transcript_prompts(demo)
    assert set(prompts) == set(PHASES) - {"plan"}, list(prompts)  # the plan is written
    first, second = prompts["execute"]
    parts = _adds_up(first)
    for name in (
        "brief",
        "phase (folder, step, files)",
        "task header (plan path, files, TDD flag)",
        "task: action, verify, done, criteria",
        "task: behavior, impl., pre, rev.",
        "plan objective",
        "plan must_haves",
        "plan requirements",
        "plan context refs",
        "plan verification, success criteria",
        "plan's other tasks",
        "read_first contents",
    ):
        assert parts.get(name, 0) > 0, (name, parts)
    # a part holds what it is named for: the must_haves block, the read_first file's text
    assert "read_first contents" not in _adds_up(second)  # task 2 names no read_first
    tokens = parts_in_tokens([first, second])
    assert round(sum(tokens.values())) == round((len(first) + len(second)) / 2 / CHARS_PER_TOKEN)
    # a heading inside a file the prompt shows is not a part of its own
    shown = first.replace("## Architecture Patterns", "## What you owe")
    assert prompt_parts(shown).keys() == parts.keys()


@pytest.mark.skipif(not rp.projects(), reason="../shared/conformance/real-projects is absent")
def test_every_real_executor_prompt_adds_up() -> None:
    prompts = real_phase_executor_prompts()
    assert len(prompts) > 100
    for prompt in prompts:
        _adds_up(prompt)
    mean = parts_in_tokens(prompts)
    for name in ("plan must_haves", "plan context refs", "plan verification, success criteria"):
        assert mean[name] > 10, (name, mean)


@pytest.mark.skipif(not REFERENCE_TREE.is_dir(), reason="the reference's tree is absent")
def test_the_references_prompts_are_measured_from_its_files() -> None:
    sizes = reference_sizes(REFERENCE_TREE)
    assert set(sizes) == set(REFERENCE_ROLES)
    for phase, files in REFERENCE_ROLES.items():
        own = sum(len((REFERENCE_TREE / f).read_text(errors="replace")) for f in files)
        # its own files, and what they name (the planner's templates and references)
        assert sizes[phase]["files"] >= len(files), phase
        assert sizes[phase]["tokens"] >= own // CHARS_PER_TOKEN > 0, phase
    assert sizes["plan"]["files"] > len(REFERENCE_ROLES["plan"])
