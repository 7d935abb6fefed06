"""A secret answer's file never outlives its run's need for it (issue 40, point 6): given by
`looprail answer` between processes, it waits in `looprail_home()/answers/`; it is removed once
no later executor call of its plan can take it, at the latest when the plan is done, and when
the run ends (shipped, or abandoned by `run --new`). Real processes, through the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from looprail.machine.answers import secret_path
from tests.e2e.test_checkpoints import SECRET, answers, project_with
from tests.support import run_cli

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs POSIX")


def waiting(project: Path, secret: str, task: str = "01-01/T2") -> Path:
    """Pause at the secret checkpoint, answer it from another process: the file that waits."""
    assert run_cli("run", str(project), "--phase", "1", subprocess=True).returncode == 3
    given = run_cli("answer", str(project), task, input=secret + "\n", subprocess=True)
    assert given.returncode == 0, given.stderr
    path = secret_path(project, answers(project)[0].run_id, task)
    assert path.read_text() == secret
    return path


def test_a_secret_asked_by_a_plans_last_task_is_removed_when_the_plan_is_done(
    tmp_path: Path,
) -> None:
    project = project_with(tmp_path, SECRET, after=0)  # no executor call after it
    path = waiting(project, "sk-last-task-0011223344")
    done = run_cli("run", str(project), "--phase", "1", subprocess=True)
    assert done.returncode == 0, done.stderr
    assert not path.exists()
    assert not list(path.parent.glob("*.secret"))


def test_an_abandoned_runs_secret_is_removed(tmp_path: Path) -> None:
    project = project_with(tmp_path, SECRET, after=1)
    path = waiting(project, "sk-abandoned-5566778899")
    again = run_cli("run", str(project), "--phase", "1", "--new", subprocess=True)
    assert again.returncode == 3, again.stderr  # the new run asks again
    assert not path.exists()
