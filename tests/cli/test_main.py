"""`looprail.cli.main`: exit codes and the edges of the terminal (closed pipes, Ctrl-C)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import looprail.cli as cli
import looprail.cli.app as cli_app

ENTRY = "import sys; from looprail.cli import main; sys.exit(main(sys.argv[1:]))"


def _run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[bytes]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` that has already exited
    try:
        return subprocess.run(
            [sys.executable, "-c", ENTRY, *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)


def test_a_closed_stdout_is_a_quiet_success() -> None:
    done = _run_into_closed_pipe("schema", "capability")
    assert done.stderr == b""
    assert done.returncode == 0


def test_version_is_one_line_and_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("looprail ")


def test_a_group_without_subcommand_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["capability"]) == 2
    assert "SUBCOMMAND" in capsys.readouterr().err


def test_an_interrupt_while_parsing_is_exit_130_without_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(only=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_app, "build_parser", interrupted)
    assert cli.main(["schema", "capability"]) == 130
    assert capsys.readouterr().err == "looprail: interrupted\n"
