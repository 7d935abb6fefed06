"""Did a check test anything? A task's check passes only when it exits 0 *and* its test runner
did not report that it ran no tests (a runner that finds nothing often exits 0, or with a code
of its own). The first rule that matches names the runner in the verdict (pure)."""

from __future__ import annotations

import re
from typing import NamedTuple


class NoTestsRule(NamedTuple):
    name: str  # shown in the verdict: "pytest: no tests ran"
    command: re.Pattern[str]  # the runner, found anywhere in the command line
    nothing: re.Pattern[str] | None  # its words for "nothing ran"; None: only the exit code
    exit_code: int | None = None  # the runner's own "nothing ran" exit code
    # words that some tests did run: a workspace where one package has no tests and another
    # ran some (`go test ./...`, cargo's doc-tests) tested something
    ran: re.Pattern[str] | None = None


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.M)


_PYTEST = _rx(r"\bpy\.?test\b")
# `\b` around runner names: `uv run pytest -q`, `python -m pytest`, `npx jest`, not `mypytest`.
# Output patterns match the runner's summary line, not a word in a test's own log.
RULES: tuple[NoTestsRule, ...] = (
    NoTestsRule("pytest: exit 5, no tests ran", _PYTEST, None, 5),
    NoTestsRule(
        "pytest: no tests ran",  # piped (`| tail`, exit 0), or only skipped and deselected
        _PYTEST,
        _rx(
            r"^(?:=+ )?(?:no tests ran|(?:\d+ (?:skipped|deselected|xfailed|warnings?)(?:, )?)+)"
            r" in [\d.]+s\b"
        ),
    ),
    NoTestsRule(
        "jest/vitest: No tests found",
        _rx(r"\b(?:jest|vitest|react-scripts test|(?:npm|yarn|pnpm|bun) (?:run )?test)\b"),
        _rx(r"No tests found|No test files found|^Tests:\s+0 total"),
    ),
    NoTestsRule(
        "go test: no test files",
        _rx(r"\bgo\s+test\b"),
        _rx(r"\[no test files\]|\[no tests to run\]|^testing: warning: no tests to run"),
        ran=_rx(r"^ok\s+\S+\s+(?:[\d.]+s|\(cached\))(?:\s+coverage:.*)?$|^--- PASS"),
    ),
    NoTestsRule(
        "cargo: running 0 tests",
        _rx(r"\bcargo\s+(?:test|nextest)\b"),
        _rx(r"^running 0 tests$|^\s*Starting 0 tests\b"),
        ran=_rx(r"^running [1-9]\d* tests?$|^\s*Starting [1-9]\d* tests?\b"),
    ),
    NoTestsRule("mocha: 0 passing", _rx(r"\bmocha\b"), _rx(r"^\s*0 passing\b")),
    NoTestsRule(
        "node --test: tests 0",
        _rx(r"\bnode\b[^|;&]*\s--test\b"),
        _rx(r"^(?:ℹ|#) tests 0$"),
    ),
    NoTestsRule(
        "unittest: Ran 0 tests",
        _rx(r"\bunittest\b|\bmanage\.py\s+test\b"),
        _rx(r"^Ran 0 tests in\b|^NO TESTS RAN\b"),
        5,
    ),
    NoTestsRule("phpunit: No tests executed", _rx(r"\bphpunit\b"), _rx(r"No tests executed!")),
    NoTestsRule("rspec: 0 examples", _rx(r"\brspec\b"), _rx(r"^0 examples, 0 failures\b")),
    NoTestsRule(
        "dotnet test: no test is available",
        _rx(r"\bdotnet\s+test\b"),
        _rx(r"No test is available|^\s*Total tests: 0\b"),
    ),
)


class Judgement(NamedTuple):
    passed: bool
    rule: str | None  # the rule that caught a run that tested nothing; None otherwise
    reason: str  # one line: why it passed or failed


def judge(command: str, exit_code: int, output: str) -> Judgement:
    """Whether a check that ran `command` and exited `exit_code`, printing `output` (stdout and
    stderr together), passed: it exited 0 and no rule says its runner ran no tests."""
    for rule in RULES:
        if rule.command.search(command) and _tested_nothing(rule, exit_code, output):
            return Judgement(False, rule.name, f"it tested nothing ({rule.name})")
    if exit_code != 0:
        return Judgement(False, None, f"exit {exit_code}")
    return Judgement(True, None, "exit 0")


def _tested_nothing(rule: NoTestsRule, exit_code: int, output: str) -> bool:
    if rule.exit_code is not None and exit_code == rule.exit_code:
        return True
    if rule.nothing is None or not rule.nothing.search(output):
        return False
    return rule.ran is None or not rule.ran.search(output)
