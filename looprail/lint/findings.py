"""The rule table, a finding and the report (and its text form)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from looprail.layout import LOOPRAIL_DIR

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(frozen=True)
class Rule:
    """One kind of finding: its code, the severities a finding of it can have (some depend on
    the hook, e.g. a blocking gate's is an error), and what it means. docs/lint.md's table is
    tested against `RULES`."""

    code: str
    severities: tuple[Severity, ...]
    summary: str


_E: tuple[Severity, ...] = ("error",)
_W: tuple[Severity, ...] = ("warning",)
_I: tuple[Severity, ...] = ("info",)
_EW: tuple[Severity, ...] = ("error", "warning")

RULES: dict[str, Rule] = {
    r.code: r
    for r in (
        # capabilities
        Rule("manifest-invalid", _E, "a capability failed validation"),
        Rule("capability-folder-missing", _E, "a named first-party folder does not exist"),
        Rule("capability-gates-untrusted", _E, "a project capability with gates has no consent"),
        Rule("shadowed-capability", _W, "a copy of a capability loaded earlier has no effect"),
        Rule("registry-warning", _W, "another registry note"),
        Rule("capability-inactive", _I, "its activationKey is not true: none of its hooks run"),
        Rule("capability-untrusted", _I, "a project capability without consent, no gates"),
        # config
        Rule("no-planning", _I, "no .planning/: only capabilities were checked"),
        Rule("run-refused", _E, "`looprail run` refuses to start (its agent CLI, its settings)"),
        # artifacts
        Rule("consumes-unsatisfied", _E, "nothing produces a consumed artifact in time"),
        Rule("consumes-inactive", _W, "the only earlier producers do not run"),
        Rule("duplicate-producer", _E, "two hooks produce one artifact at one point"),
        # gates and steps
        Rule("gate-never-runs", _W, "a gate whose `when` is never true"),
        Rule("hook-never-runs", _I, "a step or contribution whose `when` is never true"),
        Rule("query-grammar", _EW, "a query fails the query grammar: never run"),
        Rule("check-missing", _EW, "no check executable (or host tool) for a query"),
        Rule("predicate-invalid", _E, "an unknown predicate kind or a missing field"),
        Rule("predicate-command-missing", _EW, "a command-exit-zero program is not there"),
        Rule("command-invalid", _EW, "a command-exit-zero command is not valid shell"),
        Rule("gate-blocks", _W, "a blocking config-equals gate refuses under the config"),
        Rule("agent-missing", _W, f"no executable {LOOPRAIL_DIR}/agents/<name>"),
        Rule("skill-missing", _W, f"no executable {LOOPRAIL_DIR}/skills/<flavor>-<skill>"),
        Rule("command-missing", _W, f"no executable {LOOPRAIL_DIR}/commands/<first word>"),
        Rule("command-grammar", _E, "a step command fails the grammar: never run"),
        # plans
        Rule("plan-invalid", _E, "a PLAN.md cannot be read or names what is not there"),
        Rule("plan-dag", _E, "plans whose depends_on form a cycle"),
        Rule("plan-dependency-missing", _E, "a depends_on entry names no plan: it halts"),
        Rule("plan-dependency-unfinished", _W, "a plan of another phase it needs is not done"),
        Rule("plan-warning", _W, "a plan layout the DAG or the format disagrees with"),
        Rule(
            "plan-check",
            _W,
            "a plan fails a plan check (a task without action/files/done, "
            "a requirement id or must_haves artifact not covered)",
        ),
        Rule("task-unchecked", _I, "a task no automated check verifies: only prose does"),
        Rule("role-agent-missing", _E, "a role agent the local runtime needs is not there"),
        Rule("wave-sequential", _W, "plans of one wave modify one file: they run in turn"),
        Rule("tracker-id-malformed", _W, "a tracker-id without prefix:id"),
        Rule("tracker-no-resolver", _W, "no active capability resolves the prefix"),
        Rule("tracker-resolver-ambiguous", _E, "several capabilities resolve the prefix"),
        Rule("tracker-resolver-broken", _E, "the resolving capability failed to load"),
        Rule("tracker-resolver-missing", _E, "the resolver's binary is not there"),
    )
}


class Finding(BaseModel):
    """One thing lint found. The JSON form (`--json`) is this model, field for field. Its code
    is one of `RULES`, with one of that rule's severities."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    severity: Severity
    code: str
    file: str
    path: str = ""
    message: str
    fix: str = ""

    @model_validator(mode="after")
    def _follows_its_rule(self) -> Finding:
        rule = RULES.get(self.code)
        if rule is None:
            raise ValueError(f"lint finding code {self.code!r} is not in lint.RULES")
        if self.severity not in rule.severities:
            raise ValueError(f"lint finding {self.code!r} cannot be {self.severity!r}")
        return self


def finding(
    code: str, file: str, message: str, fix: str, path: str = "", severity: Severity | None = None
) -> Finding:
    """A finding of rule `code`, with the rule's first severity unless `severity` is given."""
    level = severity or RULES[code].severities[0]
    return Finding(severity=level, code=code, file=file, path=path, message=message, fix=fix)


class LintReport(BaseModel):
    """The findings of one lint run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    findings: list[Finding]

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def errors(self) -> int:
        return self.count("error")

    @property
    def warnings(self) -> int:
        return self.count("warning")

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0

    def to_json(self) -> dict[str, object]:
        """The stable `--json` shape."""
        return {
            "findings": [f.model_dump() for f in self.findings],
            "errors": self.errors,
            "warnings": self.warnings,
        }


def render_text(report: LintReport, *, quiet: bool = False) -> str:
    """The human form: one block per finding, then a count. `quiet` (`lint -q`): the errors
    and warnings alone, without notes or the count, and nothing at all when there are none."""
    lines = []
    for f in report.findings:
        if quiet and f.severity == "info":
            continue
        where = f.file + (f": {f.path}" if f.path else "")
        lines.append(f"{where}: {f.severity} [{f.code}] {f.message}")
        if f.fix:
            lines.append(f"    fix: {f.fix}")
    if quiet:
        return "".join(line + "\n" for line in lines)
    if not report.findings:
        return "no problems found\n"
    counts = [
        (report.errors, "error"),
        (report.warnings, "warning"),
        (report.count("info"), "note"),
    ]
    lines.append(", ".join(f"{n} {word}{'s' * (n != 1)}" for n, word in counts))
    return "\n".join(lines) + "\n"
