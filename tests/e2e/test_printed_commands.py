"""Every command looprail prints for a person to run quotes each part taken from data (issue 40,
point 3). A plan file named `01-01;touch${IFS}X;#-PLAN.md` with a decision whose option id is
`clerk;touch${IFS}Y;#` pauses a real run; the command lines the run, `status` and the dashboard
print are pasted into a real shell, where a stub `looprail` records the words it is given:
each id comes back as one word and nothing else runs. A property test does the same for any
ids."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.machine.commands import answer_command, pause_hint
from looprail.plans.checkpoint import Checkpoint, CheckpointOption
from tests.e2e.test_checkpoints import DECISION, SECRET, VERIFY, project_with
from tests.support import run_cli

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX sh")

PLAN = "01-01;touch${IFS}X;#"
TASK = f"{PLAN}/T2"
OPTION = "clerk;touch${IFS}Y;#"


def pasted(line: str, where: Path) -> list[str]:
    """The words `line` gives a `looprail` run by a real shell in `where` (a stub records them)."""
    stub = where / "stub-bin"
    stub.mkdir(exist_ok=True)
    (stub / "looprail").write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done\n')
    (stub / "looprail").chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}:/usr/bin:/bin"}
    done = subprocess.run(
        ["sh", "-c", line], cwd=where, env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


def command_in(text: str) -> str:
    """The command at the end of the line holding "answer with": it is printed last."""
    line = next(x for x in text.splitlines() if "answer with" in x)
    return line[line.rindex(": looprail answer ") + 2 :]


def hostile(tmp_path: Path, checkpoint: str) -> Path:
    project = project_with(tmp_path, checkpoint.replace('id="clerk"', f'id="{OPTION}"'))
    phase = project / ".planning" / "phases" / "01-demo"
    (phase / "01-01-PLAN.md").rename(phase / f"{PLAN}-PLAN.md")
    return project


@pytest.mark.parametrize(
    ("checkpoint", "answer"),
    [(DECISION, ["supabase"]), (VERIFY, ["approved"]), (SECRET, [])],
    ids=["decision", "verify", "secret"],
)
def test_a_paused_runs_commands_quote_every_id(
    tmp_path: Path, checkpoint: str, answer: list[str]
) -> None:
    project = hostile(tmp_path, checkpoint)
    done = run_cli("run", str(project), "--phase", "1", cwd=project)
    assert done.returncode == 3, done.stderr
    status = run_cli("status", cwd=project)
    for text in (done.stderr, status.stdout):
        assert pasted(command_in(text), project) == ["answer", ".", TASK, *answer]
        approve = text[text.index("run again with ") + 15 : text.index(", or answer with")]
        assert pasted(f"looprail {approve}", project) == ["--approve", TASK]
    if checkpoint is DECISION:
        note = done.stderr[done.stderr.index("(one of the option ids ") + 23 :]
        assert shlex.split(note[: note.index(")")].replace(",", " ")) == ["supabase", OPTION]
    assert not (project / "X").exists() and not (project / "Y").exists()


def test_the_dashboards_commands_quote_every_id(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    httpx = pytest.importorskip("httpx")
    from looprail.ui.server import create_app
    from tests.support import ui as uikit

    project = hostile(tmp_path, DECISION)
    assert run_cli("run", str(project), "--phase", "1", cwd=project).returncode == 3
    with uikit.serve(create_app(project)) as url:
        snap = httpx.get(f"{url}/api/state", timeout=10).json()
    (item,) = snap["checkpoints"]["items"]
    assert pasted(item["command"], project) == ["answer", str(project), TASK, "supabase"]
    words = pasted(snap["run"]["continue"], project)
    assert words[:2] == ["resume", snap["run"]["id"]] and words[-2:] == ["--approve", TASK]
    assert not (project / "X").exists() and not (project / "Y").exists()


ids = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1)


@settings(max_examples=60, deadline=None)
@given(plan=ids, option=ids, where=ids)
def test_any_ids_come_back_as_one_word_each(plan: str, option: str, where: str) -> None:
    cp = Checkpoint(
        task_id=f"{plan}/T2",
        plan_id=plan,
        kind="decision",
        options=(CheckpointOption(id=option), CheckpointOption(id="other")),
    )
    assert shlex.split(answer_command(where, cp)) == [
        "looprail",
        "answer",
        where,
        cp.task_id,
        option,
    ]
    hint = pause_hint(where, cp)
    assert hint.endswith(answer_command(where, cp))
    approve = hint[len("run again with ") : hint.index(", or answer with")]
    assert shlex.split(approve) == ["--approve", cp.task_id]
