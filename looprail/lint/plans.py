"""Plan findings: invalid PLAN.md, dangling dependencies, cycles, serialised waves, roles."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Any

from looprail.errors import LooprailError
from looprail.frontmatter import file_frontmatter
from looprail.layout import LOOPRAIL_DIR
from looprail.lint.findings import Finding
from looprail.lint.inputs import LintInput, PhaseInput, _rel
from looprail.lint.trackers import _resolvers, _trackers
from looprail.machine.spec import DEFAULT_LOOP

if TYPE_CHECKING:
    from looprail.plans.phase import Phase
    from looprail.plans.waves import WavePlan

# --------------------------------------------------------------------------- plans


_WHERE = re.compile(r"^(?P<file>[^:\s][^:]*?)(?::(?P<line>\d+))?: (?P<message>.+)$")


def _plan_error(exc: LooprailError, code: str, fallback: str, fix: str) -> Finding:
    text = str(exc)
    match = _WHERE.match(text)
    file, path, message = fallback, "", text
    if match and ("/" in match["file"] or match["file"].endswith(".md")):
        file = match["file"]
        path = f"line {match['line']}" if match["line"] else ""
        message = match["message"]
    return Finding(severity="error", code=code, file=file, path=path, message=message, fix=fix)


def _plans(data: LintInput) -> list[Finding]:
    out = []
    resolvers = _resolvers(data)
    said: set[str] = set()
    for item in data.phases:
        if item.error is not None:
            if str(item.error) in said:
                continue  # two folders for one phase: one finding names both
            said.add(str(item.error))
            out.append(
                _plan_error(
                    item.error,
                    "plan-invalid",
                    item.label,
                    "fix the PLAN.md (see docs/plans.md); the phase cannot run until then",
                )
            )
            continue
        phase = item.phase
        if phase is None:  # no error means loaded; nothing to lint otherwise
            continue
        for plan in phase.plans:
            for reason in plan.unmet:
                missing = "not finished" not in reason and "halted" not in reason
                out.append(
                    Finding(
                        severity="error" if missing else "warning",
                        code="plan-dependency-missing" if missing else "plan-dependency-unfinished",
                        file=_rel(plan.path, data.project),
                        path="depends_on",
                        message=f"plan {plan.id}: {reason}: the run halts this plan",
                        fix="fix the depends_on entry (docs/plans.md)"
                        if missing
                        else "run the phase it depends on first (its plan needs a SUMMARY)",
                    )
                )
        for w in phase.warnings:
            if w in data.config_warnings:
                continue  # the config's own finding (config-invalid) says it once
            if "the run halts plan" in w:
                continue  # said above, as its own finding
            file = w.split(": ", 1)[0] if ": " in w else item.label
            out.append(
                Finding(
                    severity="warning",
                    code="plan-warning",
                    file=_rel(file, data.project),
                    message=w.split(": ", 1)[-1],
                    fix=_plan_warning_fix(w),
                )
            )
        if item.wave_error is not None:
            out.append(
                _plan_error(
                    item.wave_error,
                    "plan-dag",
                    item.label,
                    "break the cycle: a plan may only depend on plans of earlier waves",
                )
            )
        elif item.waves is not None:
            out += _waves(item, phase, item.waves, data)
        for plan in phase.plans:
            out += _trackers(data, plan, resolvers)
    return out


def _roles(data: LintInput) -> list[Finding]:
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
            if todo.get(step.name):
                why = f"phase {phase.number} {step.name}"
                needed.setdefault(step.role, [])
                if why not in needed[step.role]:
                    needed[step.role].append(why)
    out = []
    for role, whys in needed.items():
        why_missing = data.probe.executable("agents", role)
        if why_missing is None:
            continue
        shown = ", ".join(whys[:3]) + (f" and {len(whys) - 3} more" if len(whys) > 3 else "")
        out.append(
            Finding(
                severity="error",
                code="role-agent-missing",
                file=f"{LOOPRAIL_DIR}/agents/{role}",
                message=f"the {role} role agent is needed ({shown}) but {why_missing}: "
                "`looprail run` halts there",
                fix=f"add an executable {LOOPRAIL_DIR}/agents/{role} (docs/runtime.md)",
            )
        )
    return out


def _verification_status(phase: Any) -> str | None:
    if phase.verification_path is None:
        return None
    fm = file_frontmatter(phase.verification_path)
    return str(fm.get("status")) if isinstance(fm, dict) and fm.get("status") is not None else None


def _plan_warning_fix(warning: str) -> str:
    if "looks like a plan" in warning:
        return "name it {phase}-{plan}-PLAN.md, or move it out of the phase folder"
    if "disagrees with the file name" in warning:
        return "make the frontmatter `plan:` match the file name"
    if "did you mean" in warning:
        return "rename the key to the one suggested"
    if "is unknown and ignored" in warning:
        return "remove the key, or rename it to one of the known keys (docs/plans.md)"
    if "autonomous" in warning:
        return "set `autonomous: false` in the plan's frontmatter"
    return "see docs/plans.md"


def _waves(item: PhaseInput, phase: Phase, waves: WavePlan, data: LintInput) -> list[Finding]:
    out = []
    for w in waves.warnings:
        out.append(
            Finding(
                severity="warning",
                code="plan-warning",
                file=item.label,
                message=w,
                fix="drop the declared wave or make depends_on agree (the DAG wins)",
            )
        )
    plans = {p.id: p for p in phase.plans}
    for wave in waves.waves:
        if wave.parallel_safe:
            continue
        shared = set(wave.overlap_files)
        sharing = [
            pid
            for pid in wave.plan_ids
            if {posixpath.normpath(f.strip().replace("\\", "/")) for f in plans[pid].files_modified}
            & shared
        ]
        out.append(
            Finding(
                severity="warning",
                code="wave-sequential",
                file=_rel(plans[sharing[0] if sharing else wave.plan_ids[0]].path, data.project),
                path="files_modified",
                message=f"wave {wave.number} runs sequentially: plans {', '.join(sharing)} all "
                f"modify {', '.join(wave.overlap_files)}",
                fix="make one plan depend on the other (a later wave), or split the files",
            )
        )
    return out
