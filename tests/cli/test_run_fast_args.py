"""`run`/`resume` read a plain argv without argparse (looprail/cli/run.py `fast_args`); whatever
it reads, argparse reads the same, and anything unusual goes to argparse."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.cli import build_parser
from looprail.cli.run import fast_args
from tests.support import REPO, examples

KEYS = (
    "command",
    "project_pos",
    "first",
    "run",
    "phase",
    "dry_run",
    "new",
    "autonomous",
    "approve",
    "answer",
    "checkpoint_rounds",
    "jobs",
    "host_tool",
    "accept_changes",
    "no_journal",
    "executor",
    "agent",
    "budget_usd",
    "json",
    "interactive",
    "project",
    "capabilities",
    "flavor",
    "through",
    "all_phases",
)
VALUES = st.sampled_from(["1", "02", "2.1", "x", "-1", "0", "3", "1e3", "nan", "", "gsd", "msd"])
OPTIONS = st.sampled_from(
    [
        "--phase",
        "--through",
        "--jobs",
        "--host-tool",
        "--executor",
        "--agent",
        "--budget-usd",
        "--project",
        "--flavor",
        "--approve",
        "--answer",
        "--checkpoint-rounds",
        "--capabilities",
    ]
)
FLAGS = st.sampled_from(
    [
        "--autonomous",
        "--accept-changes",
        "--no-journal",
        "--json",
        "--interactive",
        "--no-interactive",
        "--inter",
        "--quiet",
        "-q",
        "--dry-run",
        "--new",
        "--all",
        "-v",
        "--pha",
        "--json=1",
        "-h",
        "--",
        "-",
        "proj",
        "other",
    ]
)
TOKENS = st.one_of(
    st.tuples(OPTIONS, VALUES).map(lambda t: [t[0], t[1]]),
    st.tuples(OPTIONS, VALUES).map(lambda t: [f"{t[0]}={t[1]}"]),
    FLAGS.map(lambda f: [f]),
    OPTIONS.map(lambda o: [o]),  # an option without its value
)


def parsed(argv: list[str]):
    """argparse's namespace, or None when it refuses argv (usage error or help)."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return build_parser("run").parse_args(argv)
        except SystemExit:
            return None


@settings(max_examples=examples(300), deadline=None)
@given(command=st.sampled_from(["run", "resume"]), tokens=st.lists(TOKENS, max_size=6))
def test_fast_run_args_are_argparse_s(command, tokens):
    argv = [command, *(t for group in tokens for t in group)]
    fast = fast_args(argv)
    if fast is None:
        return
    full = parsed(argv)
    assert full is not None, argv
    for key in KEYS:
        assert getattr(fast, key, None) == getattr(full, key, None), (argv, key)
    assert bool(getattr(fast, "quiet", False)) == bool(getattr(full, "quiet", False))
    assert fast.handler is full.handler


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--phase", "1"],
        ["run", "proj", "--phase=02", "-q", "--json", "--jobs", "3", "--approve", "01-02/T3"],
        ["run", "--phase", "1", "--budget-usd", "2.5", "--flavor", "msd", "--dry-run"],
        ["resume"],
        ["resume", "proj", "01AB", "--accept-changes", "--project", "p"],
    ],
)
def test_plain_run_argv_skips_argparse(argv):
    fast = fast_args(argv)
    assert fast is not None
    full = parsed(argv)
    assert all(getattr(fast, k, None) == getattr(full, k, None) for k in KEYS)


@pytest.mark.parametrize(
    "argv",
    [
        ["run"],  # no --phase: the project loop (`--through`, `--all`) is argparse's
        ["run", "--phase", "x"],
        ["run", "--phase", "1", "--jobs", "many"],
        ["run", "--phase", "1", "--budget-usd", "-1"],
        ["run", "--phase", "1", "--flavor", "nope"],
        ["run", "--phase", "1", "a", "b"],
        ["run", "--pha", "1"],
        ["run", "--phase", "1", "-v"],
        ["run", "--phase", "1", "--help"],
        ["resume", "--phase", "1"],
        ["resume", "--dry-run"],
        ["resume", "a", "b", "c"],
    ],
)
def test_unusual_run_argv_goes_to_argparse(argv):
    assert fast_args(argv) is None


def test_a_run_imports_no_argparse(tmp_path):
    """In a fresh interpreter: `run` with a plain argv never imports argparse (here the project
    is missing, so the run stops with its one-line error right after parsing)."""
    code = (
        "import sys\n"
        "from looprail.cli import main\n"
        f"code = main(['run', {str(tmp_path / 'none')!r}, '--phase', '1'])\n"
        "print(code, 'argparse' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split() == ["2", "False"], out.stdout + out.stderr
    assert out.stderr.startswith("looprail: error:")
