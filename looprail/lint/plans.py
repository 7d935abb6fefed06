"""Plan findings: invalid PLAN.md, dangling dependencies, cycles, serialised waves, roles, and
task tracker-ids with no resolver, several, or one that failed to load."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from looprail.errors import LooprailError
from looprail.hooks.task_content import (
    runnable_resolvers,
    split_tracker_id,
    unloadable_resolvers,
)
from looprail.layout import LOOPRAIL_DIR
from looprail.lint.findings import Finding, finding
from looprail.lint.inputs import LintInput, PhaseInput, _rel
from looprail.machine.spec import DEFAULT_LOOP
from looprail.plans.frontmatter import file_frontmatter
from looprail.plans.plancheck import check_phase_plans
from looprail.plans.taskchecks import unchecked_tasks
from looprail.plans.waves import normalize_path

if TYPE_CHECKING:
    from looprail.hooks.manifest import TaskContentResolver
    from looprail.plans.phase import Phase
    from looprail.plans.planfile import Plan
    from looprail.plans.waves import WavePlan

_WHERE = re.compile(r"^(?P<file>[^:\s][^:]*?)(?::(?P<line>\d+))?: (?P<message>.+)$")
# The fix for a phase warning: the first whose words are in it.
_WARNING_FIXES = (
    ("looks like a plan", "name it {phase}-{plan}-PLAN.md, or move it out of the phase folder"),
    ("disagrees with the file name", "make the frontmatter `plan:` match the file name"),
    ("did you mean", "rename the key to the one suggested"),
    (
        "is unknown and ignored",
        "remove the key, or rename it to one of the known keys (docs/plans.md)",
    ),
    ("autonomous", "set `autonomous: false` in the plan's frontmatter"),
)


def _plan_error(exc: LooprailError, code: str, fallback: str, fix: str) -> Finding:
    text = str(exc)
    match = _WHERE.match(text)
    if match and ("/" in match["file"] or match["file"].endswith(".md")):
        line = f"line {match['line']}" if match["line"] else ""
        return finding(code, match["file"], match["message"], fix, line)
    return finding(code, fallback, text, fix)


def _plans(data: LintInput) -> Iterator[Finding]:
    resolvers = _resolvers(data)
    said: set[str] = set()
    for item in data.phases:
        if item.error is not None:
            if str(item.error) not in said:  # two folders for one phase: one finding names both
                said.add(str(item.error))
                fix = "fix the PLAN.md (see docs/plans.md); the phase cannot run until then"
                yield _plan_error(item.error, "plan-invalid", item.label, fix)
        elif item.phase is not None:
            yield from _phase(data, item, item.phase, resolvers)


def _phase(
    data: LintInput, item: PhaseInput, phase: Phase, resolvers: _Resolvers
) -> Iterator[Finding]:
    for plan in phase.plans:
        for reason in plan.unmet:
            missing = "not finished" not in reason and "halted" not in reason
            yield finding(
                "plan-dependency-missing" if missing else "plan-dependency-unfinished",
                _rel(plan.path, data.project),
                f"plan {plan.id}: {reason}: the run halts this plan",
                "fix the depends_on entry (docs/plans.md)"
                if missing
                else "run the phase it depends on first (its plan needs a SUMMARY)",
                path="depends_on",
            )
    for w in phase.warnings:
        if "the run halts plan" not in w:  # a halted plan is said above
            file = w.split(": ", 1)[0] if ": " in w else item.label
            fix = next((f for words, f in _WARNING_FIXES if words in w), "see docs/plans.md")
            yield finding("plan-warning", _rel(file, data.project), w.split(": ", 1)[-1], fix)
    if item.wave_error is not None:
        fix = "break the cycle: a plan may only depend on plans of earlier waves"
        yield _plan_error(item.wave_error, "plan-dag", item.label, fix)
    elif item.waves is not None:
        yield from _waves(item, phase, item.waves, data)
    for plan in phase.plans:
        yield from _trackers(data, plan, resolvers)
        if plan.summary_path is None:  # a plan still to run
            yield from _unchecked(data, plan)
    yield from _plan_checks(data, phase)


def _plan_checks(data: LintInput, phase: Phase) -> Iterator[Finding]:
    """The plan checks a run holds its own planner's plans to (plans/plancheck.py): warned
    here, never refused (the user's plans). Unchecked tasks are `task-unchecked` (below)."""
    report = check_phase_plans(data.project, phase)
    for f in report.findings:
        fix = "add what is missing to the plan (docs/plans.md, Plan checks)"
        yield finding("plan-check", f.where, f.message, fix)


def _unchecked(data: LintInput, plan: Plan) -> Iterator[Finding]:
    """The plan's tasks that no `<automated>` command checks (docs/loop.md, "Verification")."""
    for checks in unchecked_tasks(plan):
        yield finding(
            "task-unchecked",
            _rel(plan.path, data.project),
            f"task {checks.task_id} has no automated check ({checks.reason}): a run reports it "
            "unverified (looprail.verify.unchecked: fail halts its plan)",
            "add <automated>COMMAND</automated> inside its <verify>",
        )


def _roles(data: LintInput) -> Iterator[Finding]:
    """The role agents the local runtime will call for each phase, from what is still to do:
    the orchestrator for discuss (no CONTEXT.md yet) and always for ship, the planner while
    there is no PLAN.md, the executor while a plan has no SUMMARY.md, the verifier until
    VERIFICATION.md says `status: passed`. `run` fails on the first one that is missing."""
    needed: dict[str, list[str]] = {}  # role -> why, in phase order
    for item in data.phases:
        phase = item.phase
        if phase is None:
            continue
        todo = {
            "discuss": not phase.has_context,
            "plan": not phase.plans,
            "execute": not phase.plans or bool(phase.incomplete),
            "verify": _verification_status(phase) != "passed",
            "ship": True,
        }
        for step in DEFAULT_LOOP.steps:
            why = f"phase {phase.number} {step.name}"
            if todo.get(step.name) and why not in needed.setdefault(step.role, []):
                needed[step.role].append(why)
    for role, whys in needed.items():
        why_missing = data.probe.executable("agents", role)
        if why_missing is not None:
            more = f" and {len(whys) - 3} more" if len(whys) > 3 else ""
            yield finding(
                "role-agent-missing",
                f"{LOOPRAIL_DIR}/agents/{role}",
                f"the {role} role agent is needed ({', '.join(whys[:3])}{more}) but "
                f"{why_missing}: `looprail run` halts there",
                f"add an executable {LOOPRAIL_DIR}/agents/{role} (docs/runtime.md)",
            )


def _verification_status(phase: Phase) -> str | None:
    if phase.verification_path is None:
        return None
    fm = file_frontmatter(phase.verification_path)
    return str(fm.get("status")) if isinstance(fm, dict) and fm.get("status") is not None else None


def _waves(item: PhaseInput, phase: Phase, waves: WavePlan, data: LintInput) -> Iterator[Finding]:
    for w in waves.warnings:
        fix = "drop the declared wave or make depends_on agree (the DAG wins)"
        yield finding("plan-warning", item.label, w, fix)
    plans = {p.id: p for p in phase.plans}
    for wave in waves.waves:
        if wave.parallel_safe:
            continue
        shared = set(wave.overlap_files)
        sharing = [
            pid
            for pid in wave.plan_ids
            if {normalize_path(f) for f in plans[pid].files_modified} & shared
        ]
        yield finding(
            "wave-sequential",
            _rel(plans[sharing[0] if sharing else wave.plan_ids[0]].path, data.project),
            f"wave {wave.number} runs sequentially: plans {', '.join(sharing)} all modify "
            f"{', '.join(wave.overlap_files)}",
            "make one plan depend on the other (a later wave), or split the files",
            path="files_modified",
        )


@dataclass(frozen=True)
class _Resolvers:
    active: dict[str, list[tuple[str, TaskContentResolver]]]  # prefix → [(cap id, resolver)]
    inactive: dict[str, list[str]]  # prefix → cap ids (loaded, not active)
    broken: dict[str, list[tuple[str, str]]]  # prefix → [(cap id, reason)] (failed to load)


def _resolvers(data: LintInput) -> _Resolvers:
    # As the run does (`task_content.runnable_resolvers`): every loaded resolver counts, whatever
    # its capability's activationKey (execute:task has no `when`), except one without consent.
    found = _Resolvers({}, {}, {})
    caps = data.compiled.capabilities
    runnable = runnable_resolvers(data.compiled)
    for cid, r in runnable:
        found.active.setdefault(r.trackerPrefix, []).append((cid, r))
    can_run = {cid for cid, _ in runnable}
    for cid, r in data.compiled.task_content_resolvers():
        if cid not in can_run:
            found.inactive.setdefault(r.trackerPrefix, []).append(cid)
    served = {prefix: caps[pairs[0][0]].origin for prefix, pairs in found.active.items()}
    for cid, prefix, reason in unloadable_resolvers(data.compiled.failed, served):
        found.broken.setdefault(prefix, []).append((cid, reason))
    return found


def _trackers(data: LintInput, plan: Plan, resolvers: _Resolvers) -> Iterator[Finding]:
    file = _rel(plan.path, data.project)
    for task in plan.tasks:
        tid = task.tracker_id
        if not tid or task.is_checkpoint:
            continue  # a checkpoint pauses: execute:task never resolves it
        where = f"line {task.line} (task {task.index} tracker-id)"
        split = split_tracker_id(tid)
        if split is None:
            yield finding(
                "tracker-id-malformed",
                file,
                f"tracker-id {tid!r} has no `prefix:id` form, so no resolver is asked and the "
                "task runs from the plan's inline content",
                "write it as prefix:ID (e.g. beads:GSD-42), or remove it",
                path=where,
            )
        else:
            yield from _tracker(data, resolvers, file, where, tid, split[0])


def _tracker(
    data: LintInput, resolvers: _Resolvers, file: str, where: str, tid: str, prefix: str
) -> Iterator[Finding]:
    matches = resolvers.active.get(prefix, [])
    if resolvers.broken.get(prefix):
        cid, reason = resolvers.broken[prefix][0]
        yield finding(
            "tracker-resolver-broken",
            file,
            f"tracker-id {tid!r}: capability {cid!r}, which resolves {prefix!r}, failed to load "
            f"({reason}); the task halts",
            f"fix capability {cid}",
            path=where,
        )
    elif len(matches) > 1:
        yield finding(
            "tracker-resolver-ambiguous",
            file,
            f"tracker-id {tid!r}: {len(matches)} capabilities resolve prefix {prefix!r} "
            f"({', '.join(c for c, _ in matches)}); the task halts",
            "keep one capability with this trackerPrefix",
            path=where,
        )
    elif not matches:
        yield _no_resolver(resolvers.inactive.get(prefix), file, where, tid, prefix)
    elif not data.probe.runnable(binary := matches[0][1].invoke.binary):
        cid = matches[0][0]
        yield finding(
            "tracker-resolver-missing",
            file,
            f"tracker-id {tid!r}: resolver binary {binary!r} of capability {cid!r} is not there "
            "(relative to the project, or on PATH); the task halts",
            f"install {binary} or fix {cid}'s taskContentResolver.invoke.binary",
            path=where,
        )


def _no_resolver(off: list[str] | None, file: str, where: str, tid: str, prefix: str) -> Finding:
    why = (
        f"capability {off[0]!r} declares it but has no consent"
        if off
        else "no capability declares that trackerPrefix"
    )
    return finding(
        "tracker-no-resolver",
        file,
        f"tracker-id {tid!r}: no resolver for prefix {prefix!r} ({why}); the task runs from "
        "the plan's inline content",
        f"review {off[0]} and run `looprail trust`"
        if off
        else f"add a capability whose taskContentResolver.trackerPrefix is {prefix!r}, or "
        "remove the tracker-id",
        path=where,
    )
