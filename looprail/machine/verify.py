"""Done means verified (docs/loop.md, "Verification"): looprail runs a task's checks itself
once its executor returns (one bounded process each, its output under
`.looprail/logs/<run>/checks/`), judges each (`plans/checkjudge.py`) and hands a failure to
the executor's next call, until the same failure comes back unchanged (a stuck agent)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from looprail.errors import HaltError, LooprailError
from looprail.fsutil import atomic_write, looprail_path
from looprail.journal.recorder import EventRecord, Recorder
from looprail.layout import LOGS_DIR, LOOPRAIL_DIR
from looprail.machine.answers import SECRET_ENV
from looprail.plans.checkjudge import judge
from looprail.plans.musthaves import MustHaves, check_artifacts, check_key_links
from looprail.plans.planfile import Plan, Task
from looprail.plans.taskchecks import unchecked_tasks
from looprail.runtime.base import DispatchContext, Outcome, TaskWork
from looprail.runtime.git import git
from looprail.runtime.logs import slug
from looprail.runtime.process import find_program, run_bounded, tail
from looprail.runtime.request import CheckFailure
from looprail.runtime.settings import VerifySettings
from looprail.textsafe import plural

CHECK_OUTPUT_CAP = 256 * 1024  # bytes per stream: a test runner's summary is at the end
TAIL_CHARS = 2000  # what a retry is handed of a failed check's output


class CheckRun(BaseModel):
    """One check that ran. `tree`: the git tree it ran on (None outside git)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str
    exit_code: int | None
    duration_ms: int
    passed: bool
    reason: str
    rule: str | None = None
    attempt: int = 1
    log: str | None = None
    tree: str | None = None
    tail: str = ""

    def signature(self) -> str:
        """The failure, normalised: equal twice in a row means the agent is stuck."""
        return self.command + "\0" + normalised(self.tail)


_NOISE = (
    (re.compile(r"\d+(?:\.\d+)?\s*(?:ms|s|sec|seconds?)\b"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?\b"), "<clock>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<addr>"),
    (re.compile(r"(?:/[\w.@+-]+){2,}"), "<path>"),
    (re.compile(r"\b(?:pid|PID)[ =:]*\d+"), "pid <n>"),
    (re.compile(r"\b\d{4,}\b"), "<n>"),
)


def normalised(text: str) -> str:
    for pattern, word in _NOISE:
        text = pattern.sub(word, text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def shell_argv(command: str, env: Mapping[str, str] | None = None) -> list[str]:
    """How a check command runs: bash with `pipefail` (a real check often ends in `| tail`,
    which would hide the runner's exit code), else `/bin/sh -c`."""
    bash = find_program("bash", env)
    if bash is not None:
        return [bash, "-o", "pipefail", "-c", command]
    return ["/bin/sh", "-c", "set -o pipefail 2>/dev/null; " + command]


def run_check(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    log: Path | None,
    attempt: int = 1,
    tree: str | None = None,
    shown_log: str | None = None,
) -> CheckRun:
    done = run_bounded(
        shell_argv(command, env), timeout_s=timeout_s, cwd=cwd, env=env, output_cap=CHECK_OUTPUT_CAP
    )
    output = done.stdout + (("\n" + done.stderr) if done.stderr else "")
    if done.timed_out or done.spawn_error:
        passed, rule, reason = False, None, done.describe_failure()
    else:
        passed, rule, reason = judge(command, done.exit_code or 0, output)
    if log is not None:
        _write_log(log, command, output, reason)
    return CheckRun(
        command=command,
        exit_code=done.exit_code,
        duration_ms=int(done.duration_s * 1000),
        passed=passed,
        reason=reason,
        rule=rule,
        attempt=attempt,
        log=shown_log,
        tree=tree,
        tail="" if passed else tail(output, TAIL_CHARS),
    )


def _write_log(path: Path, command: str, output: str, reason: str) -> None:
    with contextlib.suppress(OSError):  # no room for logs: the verdict still stands
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"$ {command}\n{output}\n--- {reason}\n", encoding="utf-8")


def tree_id(cwd: Path, env: Mapping[str, str] | None = None) -> str | None:
    """The git tree of everything in `cwd` now (through a scratch index), or None outside git."""
    fd, index = tempfile.mkstemp(prefix="looprail-tree-")
    os.close(fd)
    scratch = dict(os.environ if env is None else env) | {"GIT_INDEX_FILE": index}
    try:
        git(["read-tree", "--empty"], cwd, env=scratch, timeout_s=60)
        add = ["add", "-A", "--", ".", f":!{LOOPRAIL_DIR}"]
        if git(add, cwd, env=scratch, timeout_s=120).exit_code != 0:
            return None
        done = git(["write-tree"], cwd, env=scratch, timeout_s=60)
        return done.stdout.strip() or None if done.exit_code == 0 else None
    finally:
        os.unlink(index)


def fingerprint(runs: Sequence[CheckRun]) -> str:
    joined = "\0\0".join(r.signature() for r in runs if not r.passed)
    return hashlib.sha256(joined.encode()).hexdigest()


def check_failures(runs: Sequence[CheckRun]) -> tuple[CheckFailure, ...]:
    return tuple(
        CheckFailure(
            command=r.command,
            exit_code=r.exit_code,
            reason=r.reason,
            output_tail=r.tail,
            attempt=r.attempt,
        )
        for r in runs
        if not r.passed
    )


# What the retry loop is given: `check(dctx, attempt)` runs the checks on the tree `dctx`
# names (None: where the plan runs, no executor call before it); `call(work, after)` is one
# executor call whose outcome `after(outcome, dctx)` turns failed when the checks fail.
Check = Callable[[DispatchContext | None, int], list[CheckRun]]
After = Callable[[Outcome, DispatchContext], Outcome]
Call = Callable[[TaskWork, After], Outcome]


@dataclass
class VerifiedCall:
    """One task (or one plan's must-haves) held to its checks: a failure calls the executor
    again with it, at most `retries` times in all (`rounds_before`: failed rounds journaled
    before a resume); the same failure twice in a row stops early (stuck)."""

    where: str  # "01-01-PLAN.md: task 01-01/T1", the halt line's start
    retries: int
    rounds_before: int
    check: Check
    call: Call
    evidence: list[CheckRun] = field(default_factory=list)

    def run(self, work: TaskWork, *, check_first: bool) -> list[CheckRun]:
        """The checks that ran, once they all pass; raises `HaltError` otherwise."""
        rounds = self.rounds_before
        previous: str | None = None
        if check_first:  # a resumed task (fixed by hand?), or a plan's must-haves
            runs = self.check(None, rounds + 1)
            self.evidence += runs
            if all(r.passed for r in runs):
                return self.evidence
            rounds, previous = rounds + 1, fingerprint(runs)
            work = work.model_copy(update={"check_failures": check_failures(runs)})
            self._budget(runs, rounds)
        while True:
            failed: list[CheckRun] = []
            outcome = self.call(work, partial(self._after, failed, rounds + 1))
            if outcome.ok:
                return self.evidence
            if not failed:  # the executor itself failed: no check ran
                raise HaltError(f"{self.where} failed: {outcome.detail}")
            rounds += 1
            now = fingerprint(failed)
            if now == previous:
                raise HaltError(self._halt(failed, "stuck: the same failure twice in a row"))
            previous = now
            self._budget(failed, rounds)
            work = work.model_copy(update={"check_failures": check_failures(failed)})

    def _after(self, failed: list[CheckRun], attempt: int, outcome: Outcome, dctx: Any) -> Outcome:
        if not outcome.ok:
            return outcome
        runs = self.check(dctx, attempt)
        self.evidence += runs
        if all(r.passed for r in runs):
            return outcome
        failed += runs
        why = "; ".join(f"`{r.command}`: {r.reason}" for r in runs if not r.passed)
        return Outcome.failed(f"check failed: {why}", duration_s=outcome.duration_s)

    def _budget(self, runs: list[CheckRun], rounds: int) -> None:
        if rounds > self.retries:
            raise HaltError(self._halt(runs, f"{plural(self.retries, 'retry', 'retries')} spent"))

    def _halt(self, runs: list[CheckRun], why: str) -> str:
        first = next(r for r in runs if not r.passed)
        caught = f" [{first.rule}]" if first.rule else ""
        log = f"; log: {first.log}" if first.log else ""
        return f"{self.where}: check `{first.command}` failed ({first.reason}{caught}); {why}{log}"


class Checks:
    """A run's checks: where they run, what they found (per plan and task, for its SUMMARY)."""

    def __init__(self, project: Path, recorder: Recorder, settings: VerifySettings) -> None:
        self.project = project
        self.recorder = recorder
        self.settings = settings
        self._lock = threading.Lock()
        self._kept: dict[str, dict[str, list[CheckRun]]] = {}
        self._before: dict[str, int] | None = None
        self._words: dict[str, dict[str, str]] = {}

    def run(
        self, commands: Sequence[str], dctx: DispatchContext, key: str, attempt: int
    ) -> list[CheckRun]:
        """Each command in the task's working tree, the env less a checkpoint's secret answer."""
        cwd = dctx.workdir or self.project
        env = {**os.environ, **{k: v for k, v in dctx.env.items() if k != SECRET_ENV}}
        tree = tree_id(cwd)
        runs = []
        for i, command in enumerate(commands, 1):
            log = self._log(key, attempt, i)
            runs.append(
                run_check(
                    command,
                    cwd=cwd,
                    env=env,
                    timeout_s=self.settings.timeout,
                    log=log,
                    attempt=attempt,
                    tree=tree,
                    shown_log=log.relative_to(self.project).as_posix() if log else None,
                )
            )
        return runs

    def _log(self, key: str, attempt: int, index: int) -> Path | None:
        """Where one check's output is filed: `.looprail/logs/<run>/checks/<task>-a<N>-<i>.log`."""
        name = f"{slug(key.replace('/', '-'))}-a{attempt}-{index}.log"
        try:
            return looprail_path(self.project, LOGS_DIR, self.recorder.run_id, "checks") / name
        except LooprailError:  # `.looprail/logs` linked out of the project: no log
            return None

    def journal(self, run: CheckRun, plan_id: str, key: str, wave: int | None) -> None:
        self.recorder.event(
            EventRecord(
                kind="check",
                plan_id=plan_id,
                task_id=key,
                wave=wave,
                outcome="passed" if run.passed else "failed",
                duration_ms=run.duration_ms,
                message=run.reason,
                data=run.model_dump(exclude={"tail", "duration_ms", "reason"}),
            )
        )

    def unchecked(
        self, plan_id: str, key: str, wave: int | None, reason: str, outcome: Outcome, _: Any
    ) -> Outcome:
        """A task ran that no command checks: journaled, never silent (an executor call's
        `after`, so the task's finish commits it)."""
        if not outcome.ok:
            return outcome
        self.recorder.event(
            EventRecord(
                kind="check", plan_id=plan_id, task_id=key, wave=wave, outcome="unchecked",
                message=reason,
            )
        )  # fmt: skip
        return outcome

    def unverified(self) -> list[str]:
        """The tasks of this run (before a resume too) no command checked."""
        seen = (e.task_id for e in self.recorder.kinds("check") if e.outcome == "unchecked")
        return list(dict.fromkeys(k for k in seen if k))

    def rounds_before(self, key: str) -> int:
        """How many check rounds of `key` failed in this run before it was resumed."""
        with self._lock:
            if self._before is None:
                failed: dict[str, set[object]] = {}
                for e in self.recorder.kinds("check"):
                    if e.outcome == "failed" and e.task_id:
                        failed.setdefault(e.task_id, set()).add(e.data.get("attempt"))
                self._before = {k: len(v) for k, v in failed.items()}
            return self._before.get(key, 0)

    def said(self, plan_id: str, key: str, outcome: Outcome) -> Outcome:
        """Keep the executor's closing words for the task's SUMMARY."""
        words = closing_words(outcome.stdout) if outcome.ok else ""
        if words:
            with self._lock:
                self._words.setdefault(plan_id, {})[key] = words
        return outcome

    def summary_lines(self, plan: Plan) -> list[str]:
        """The `## Verification` section of `plan`'s SUMMARY: what ran in this process."""
        with self._lock:
            kept = {k: list(v) for k, v in self._kept.get(plan.id, {}).items()}
            words = dict(self._words.get(plan.id, {}))
        unchecked = {c.task_id: c.reason or "" for c in unchecked_tasks(plan)}
        order = [t.id for t in plan.tasks] + [f"{plan.id}/must-haves"]
        return evidence_lines(kept, unchecked, words, order)

    def evidence(self) -> list[str]:
        """What the verifier is handed: every check journaled in this run, per task."""
        checks: dict[str, list[CheckRun]] = {}
        unchecked: dict[str, str] = {}
        order: list[str] = []
        for e in self.recorder.kinds("check"):
            order.append(e.task_id or "")
            run = run_of_event(e)
            if e.task_id and run is not None:
                checks.setdefault(e.task_id, []).append(run)
            elif e.task_id:
                unchecked[e.task_id] = e.message or ""
        # in plan and task order, whatever order a wave's parallel plans finished in
        return evidence_lines(checks, unchecked, order=sorted(set(order), key=_task_order))

    def keep(self, plan_id: str, key: str, runs: list[CheckRun]) -> None:
        with self._lock:
            self._kept.setdefault(plan_id, {}).setdefault(key, []).extend(runs)


def must_have_runs(
    must: MustHaves, root: Path, promised: frozenset[str], attempt: int
) -> list[CheckRun]:
    """A plan's must_haves verdicts (`plans/musthaves.py`) as checks, one per artifact and key
    link; a link whose source a later plan promises is pending, not failed."""
    start = time.monotonic()
    artifacts = check_artifacts(must, root)
    links = check_key_links(must, root, promised)
    ms = int((time.monotonic() - start) * 1000)
    runs = [
        CheckRun(
            command=f"must_haves artifact {a.path}",
            exit_code=None,
            duration_ms=ms,
            passed=a.passed,
            reason="; ".join(a.issues) or "ok",
            attempt=attempt,
            tail="\n".join(a.issues),
        )
        for a in artifacts.artifacts
    ]
    runs += [
        CheckRun(
            command=f"must_haves key_link {k.source} → {k.to}",
            exit_code=None,
            duration_ms=ms,
            passed=k.verified or bool(k.pending),
            reason=k.detail,
            attempt=attempt,
            tail="" if k.verified or k.pending else f"{k.detail} (via {k.via})",
        )
        for k in links.links
    ]
    return runs


CLOSING_CHARS = 2000
_DEVIATIONS = re.compile(r"^\W*deviations?\b", re.I | re.M)


def closing_words(text: str) -> str:
    """What the executor said last: from its deviations on when it reports any, else its
    final paragraph (capped)."""
    text = text.strip()
    found = _DEVIATIONS.search(text)
    if found is not None:
        words = text[found.start() :]
    else:
        words = re.split(r"\n\s*\n", text)[-1] if text else ""
    return words.strip()[-CLOSING_CHARS:]


_BLOCKED = re.compile(r"^\W*BLOCKED\W*?:[*_]*\s*(.+?)\s*$")  # `**BLOCKED:**` too


def blocked_reason(text: str) -> str | None:
    """The reason in `BLOCKED: <reason>` when it is the executor's very last line."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    found = _BLOCKED.match(lines[-1]) if lines else None
    return found.group(1) if found is not None else None


def run_of_event(event: EventRecord) -> CheckRun | None:
    if event.outcome not in ("passed", "failed"):
        return None
    data = event.data
    return CheckRun(
        command=str(data.get("command", "")),
        exit_code=data.get("exit_code"),
        duration_ms=event.duration_ms or 0,
        passed=event.outcome == "passed",
        reason=event.message or "",
        rule=data.get("rule"),
        attempt=1 if data.get("attempt") is None else int(data["attempt"]),  # 0: merged tree
        log=data.get("log"),
        tree=data.get("tree"),
    )


def _task_order(key: str) -> tuple[str, int, str]:
    """`01-02/T10` after `01-02/T9`; a plan's must-haves after its tasks."""
    plan, _, task = key.rpartition("/")
    number = task[1:]
    return (plan, int(number) if task[:1] == "T" and number.isdigit() else 1 << 30, task)


def check_line(run: CheckRun) -> str:
    verdict = "passed" if run.passed else "FAILED"
    code = "" if run.exit_code is None else f"exit {run.exit_code}, "
    why = "" if run.reason == f"exit {run.exit_code}" else f"; {run.reason}"
    caught = f" [{run.rule}]" if run.rule else ""
    when = f"attempt {run.attempt}" if run.attempt else "again on the merged tree"
    return f"- `{run.command}`: {verdict} ({code}{run.duration_ms} ms, {when}{why}{caught})"


def evidence_lines(
    checks: Mapping[str, Sequence[CheckRun]],
    unchecked: Mapping[str, str],
    words: Mapping[str, str] | None = None,
    order: Sequence[str] = (),
) -> list[str]:
    """The `## Verification` section of a SUMMARY (and the verifier's evidence): per task,
    every check that ran, or why none did, and the executor's closing words."""
    lines = ["## Verification", ""]
    found = {*checks, *unchecked, *(words or {})}
    keys = [k for k in order if k in found] + sorted(found - set(order))
    for key in keys:
        lines.append(f"### {key}")
        lines += [check_line(r) for r in checks.get(key, ())]
        if key in unchecked:
            lines.append(f"- unverified: no automated check ({unchecked[key]})")
        said = (words or {}).get(key)
        if said:
            lines += ["", "Executor's closing words:", ""]
            lines += [f"> {line}" if line else ">" for line in said.splitlines()]
        lines.append("")
    if not keys:
        lines += ["No check ran.", ""]
    return lines


HUMAN_NEEDED = "human_needed"
_STATUS_LINE = re.compile(r"^status:[ \t]*['\"]?human_needed['\"]?[ \t]*$", re.M)


def human_verify_task(phase_number: str, path: Path, frontmatter: object) -> tuple[Plan, Task]:
    """A VERIFICATION.md that says `status: human_needed` as a human-verify checkpoint (task
    `<phase>-verify/T1`) listing its `human_verification` items."""
    items = frontmatter.get("human_verification") if isinstance(frontmatter, dict) else None
    steps = []
    for i, item in enumerate(items if isinstance(items, list) else [], 1):
        if isinstance(item, dict):
            test, expected = item.get("test", ""), item.get("expected", "")
            why = item.get("why_human")
            steps.append(
                f"{i}. {test}" + (f" (expected: {expected})" if expected else "")
                + (f" (why a person: {why})" if why else "")
            )  # fmt: skip
        else:
            steps.append(f"{i}. {item}")
    plan_id = f"{phase_number}-verify"
    task = Task(
        id=f"{plan_id}/T1",
        index=1,
        line=1,
        type="checkpoint:human-verify",
        gate="blocking",
        name="Verify what the verifier could not",
        extra={
            "what-built": f"Phase {phase_number}, verified by looprail's checks and the verifier",
            "how-to-verify": "\n".join(steps) or "See " + path.name,
            "resume-signal": 'Type "approved" to continue, or describe issues to fix',
        },
    )
    return Plan(id=plan_id, path=path, tasks=[task], autonomous=False), task


def mark_human_verified(path: Path, source: str) -> None:
    """A person approved: VERIFICATION.md says `status: passed` (and who said so)."""
    text = path.read_text(encoding="utf-8")
    new = _STATUS_LINE.sub(f"status: passed\nhuman_verified: {json.dumps(source)}", text, 1)
    atomic_write(path, new)
