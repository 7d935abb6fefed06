"""`plans/checkjudge.py`: a check passes only when it exits 0 and tested something. Properties
over generated commands and outputs, and real runners (pytest, node --test, cargo) where
installed."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looprail.plans.checkjudge import RULES, judge

# (a command of the runner, what it prints when it ran nothing, the rule that must catch it)
NOTHING_RAN = [
    ("uv run pytest -q tests/test_x.py", "no tests ran in 0.01s", "pytest: no tests ran"),
    ("python -m pytest -k slow", "===== 4 deselected in 0.02s =====", "pytest: no tests ran"),
    ("pytest", "3 skipped, 1 warning in 0.10s", "pytest: no tests ran"),
    ("npx jest src/", "No tests found, exiting with code 0", "jest/vitest: No tests found"),
    ("npm test -- --filter=ui", "No test files found, exiting with code 1", "jest/vitest: No tests found"),
    ("go test ./...", "?   \texample.com/m\t[no test files]", "go test: no test files"),
    ("go test -run TestNope ./pkg", "ok  \tex.com/pkg\t0.002s [no tests to run]", "go test: no test files"),
    ("cargo test -q", "\nrunning 0 tests\n\ntest result: ok. 0 passed", "cargo: running 0 tests"),
    ("npx mocha test/", "\n  0 passing (1ms)\n", "mocha: 0 passing"),
    ("node --test test/", "1..0\n# tests 0\n# pass 0", "node --test: tests 0"),
    ("python -m unittest discover", "\nRan 0 tests in 0.000s\n\nOK", "unittest: Ran 0 tests"),
    ("vendor/bin/phpunit", "No tests executed!", "phpunit: No tests executed"),
    ("bundle exec rspec", "0 examples, 0 failures", "rspec: 0 examples"),
    ("dotnet test", "No test is available in /x/bin/Debug/x.dll.", "dotnet test: no test is available"),
]  # fmt: skip
# (command, what a run that tested something prints)
SOMETHING_RAN = [
    ("pytest -q", "..\n2 passed, 1 skipped in 0.03s"),
    ("npx vitest run", " Test Files  1 passed (1)\n      Tests  4 passed (4)"),
    ("go test ./...", "?   \tex.com/m/cmd\t[no test files]\nok  \tex.com/m/pkg\t0.011s"),
    ("cargo test", "running 3 tests\ntest a ... ok\n\nrunning 0 tests\n"),  # doc-tests: 0
    ("npx mocha", "  3 passing (4ms)"),
    ("node --test", "# tests 2\n# pass 2"),
    ("test -s a.txt", ""),
]
lines = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)


@pytest.mark.parametrize(("command", "output", "rule"), NOTHING_RAN)
def test_a_run_that_tested_nothing_fails_naming_the_rule(command, output, rule) -> None:
    verdict = judge(command, 0, output)
    assert (verdict.passed, verdict.rule) == (False, rule)
    assert rule in verdict.reason


@pytest.mark.parametrize(("command", "output"), SOMETHING_RAN)
def test_a_run_that_tested_something_passes_on_exit_0(command, output) -> None:
    assert judge(command, 0, output) == (True, None, "exit 0")


def test_every_rule_is_exercised() -> None:
    named = {rule for _, _, rule in NOTHING_RAN} | {"pytest: exit 5, no tests ran"}
    assert named == {rule.name for rule in RULES}


def test_pytest_exit_5_is_no_tests() -> None:
    assert judge(".venv/bin/python -m pytest tests/", 5, "").rule == "pytest: exit 5, no tests ran"


@given(command=lines, code=st.integers(-255, 255).filter(bool), output=lines)
def test_a_non_zero_exit_never_passes(command: str, code: int, output: str) -> None:
    assert judge(command, code, output).passed is False


@given(
    case=st.sampled_from(NOTHING_RAN),
    before=st.lists(lines, max_size=4),
    after=st.lists(lines, max_size=4),
    code=st.integers(0, 255),
)
def test_no_tests_is_caught_anywhere_in_the_output(case, before, after, code) -> None:
    command, output, rule = case
    text = "\n".join([*before, output, *after])
    verdict = judge(command, code, text)
    assert verdict.passed is False
    assert verdict.rule is not None  # caught by a rule (its own, or pytest's exit 5)


@given(output=lines, code=st.integers(0, 255))
def test_a_command_of_no_known_runner_passes_exactly_on_exit_0(output: str, code: int) -> None:
    verdict = judge("grep -q main src/app.ts && test -s README.md", code, output)
    assert (verdict.passed, verdict.rule) == (code == 0, None)


@given(case=st.sampled_from(SOMETHING_RAN), noise=st.lists(lines, max_size=4))
def test_a_words_in_a_tests_own_log_do_not_fail_it(case, noise) -> None:
    command, output = case
    text = "\n".join([output, *(f"log: {n}" for n in noise)])
    assert judge(command, 0, text).passed


# --- real runners ---------------------------------------------------------------------------


def _run(command: list[str], cwd: Path) -> tuple[int, str]:
    env = dict(os.environ)
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)  # the tests' HOME is a temporary folder
    for name in ("RUSTUP_HOME", "CARGO_HOME"):
        folder = home / f".{name.split('_')[0].lower()}"
        if name not in env and folder.is_dir():
            env[name] = str(folder)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    return done.returncode, done.stdout + done.stderr


def test_real_pytest(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    pytest_ = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    code, out = _run(pytest_, tmp_path)
    assert judge(" ".join(pytest_), code, out).passed
    code, out = _run([*pytest_, "-k", "nothing_matches"], tmp_path)
    assert judge(" ".join(pytest_), code, out).rule is not None
    # behind a pipe the exit code is tail's: the summary line still says it
    code, out = _run(["sh", "-c", " ".join([*pytest_, "-k", "nope", "| tail -3"])], tmp_path)
    assert code == 0 and judge("pytest -k nope | tail -3", code, out).rule == "pytest: no tests ran"


@pytest.mark.skipif(shutil.which("node") is None, reason="node needed")
def test_real_node_test(tmp_path: Path) -> None:
    code, out = _run(["node", "--test"], tmp_path)
    assert judge("node --test", code, out).rule == "node --test: tests 0"


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo needed")
def test_real_cargo_test(tmp_path: Path) -> None:
    crate = tmp_path / "zt"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "zt"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (crate / "src" / "lib.rs").write_text("pub fn f() {}\n")
    code, out = _run(["cargo", "test", "--offline", "-q"], crate)
    assert judge("cargo test -q", code, out).rule == "cargo: running 0 tests"
    (crate / "src" / "lib.rs").write_text("#[test]\nfn t() {}\n")
    code, out = _run(["cargo", "test", "--offline", "-q"], crate)
    assert judge("cargo test -q", code, out).passed
