"""Exit codes as the README promises them: 2 only for a command line that is itself wrong, 1
for every refusal (one line on stderr saying why), whatever command refuses."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.support import EXAMPLE, EXAMPLE_CAPS, run_cli


@pytest.fixture
def hello(tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLE, tmp_path / "hello"))


def _one_line_refusal(done, *needles: str) -> None:
    assert done.returncode == 1, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and line.startswith("looprail: error:"), done.stderr
    for needle in needles:
        assert needle in line, line


def test_a_missing_agent_cli_is_a_refusal_not_a_usage_error(hello: Path) -> None:
    # PATH without any agent CLI, only the interpreter the scripts need
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    assert shutil.which("claude", path=path) is None
    done = run_cli(
        "run", str(hello), "--phase", "1", "--agent", "claude", "--capabilities",
        str(EXAMPLE_CAPS), env={"PATH": path},
    )  # fmt: skip
    _one_line_refusal(done, "`claude` not found on PATH", "the run did not start")
    assert not (hello / ".looprail" / "journal.sqlite").exists()


@pytest.mark.parametrize("argv", [["run", "--phase", "1"], ["resume"], ["diagram", "--hooks"]])
def test_not_a_project_is_a_refusal(tmp_path: Path, argv: list[str]) -> None:
    done = run_cli(*argv, cwd=tmp_path)
    _one_line_refusal(done, "no .planning/ folder")


def test_an_answer_that_cannot_be_right_is_a_refusal(hello: Path) -> None:
    done = run_cli("answer", str(hello), "01-01/T1", "yes")
    _one_line_refusal(done, "no run to answer")


@pytest.mark.parametrize(
    "argv",
    [["run", "--phase", "x"], ["run", "--jobs", "0"], ["run", "--agent", "nope"]],
)
def test_a_wrong_command_line_stays_a_usage_error(hello: Path, argv: list[str]) -> None:
    done = run_cli(*argv, "--project", str(hello), "--capabilities", str(EXAMPLE_CAPS))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
