"""`looprail lint`: everything that can be known about a project before running it.

Each finding has a severity (`error`: the run would fail or a hook can never do its job;
`warning`: it will run, probably not as meant; `info`: worth knowing), the file and JSON path (or
line) it is about, what is wrong and how to fix it.

    report = lint_project("path/to/project", ["caps/"])
    report.errors, report.findings[0].fix

The checks (`lint`) are pure functions of a `LintInput`: the loaded registry, compiled registry,
config and phases, plus a `Probe` that answers the only questions about the machine (is this
executable under `.looprail/`? is this command on PATH?). `load_input` does the loading.

What is checked:

- capabilities: manifests that failed validation (every issue), registry warnings (shadowed
  ids), capabilities that are inactive or have no consent;
- artifacts: a `consumes` that nothing produces at that point or earlier (host artifacts become
  available at their step's `:post`), one only inactive producers make, two producers of one
  artifact at one point;
- gates: never run (`when` false under the config), a query failing the grammar (dotted words
  such as `ui.plan-gate` pass; a fix keeps the dots), a query with no
  `.looprail/checks/<first word>` (or a `--host-tool` that cannot be found), a
  predicate of an unknown kind or missing fields, a `command-exit-zero` whose command is not
  there (a blocking gate that always blocks), a `config-equals` gate that refuses under the
  current config, an agentVerdict agent that is missing;
- steps: a skill, agent or command with no executable under `.looprail/`, a command failing the
  grammar, a step whose `when` is never true;
- plans (every phase, or one): invalid PLAN.md, dangling `depends_on`, cycles, waves that run
  sequentially because plans share `files_modified`, a task `tracker-id` whose prefix has no
  resolver, several, or one that failed to load, a resolver binary that is not there.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from looprail.errors import LooprailError, PlanError

if TYPE_CHECKING:
    from looprail.hooks.registry import CompiledRegistry, Registry

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")

# Host artifacts and the point from which they exist (reference validateConsumesGlobal).
HOST_ARTIFACTS: dict[str, str] = {
    "CONTEXT.md": "discuss:post",
    "PLAN.md": "plan:post",
    "SUMMARY.md": "execute:post",
    "UAT.md": "verify:post",
    "VERIFICATION.md": "verify:post",
}

# Words `sh -c` understands without a program on PATH.
# fmt: off
SHELL_BUILTINS = frozenset((
    "!", ".", ":", "[", "[[", "alias", "bg", "break", "builtin", "case", "cd", "command",
    "continue", "declare", "echo", "eval", "exec", "exit", "export", "false", "fc", "fg",
    "for", "getopts", "hash", "if", "jobs", "kill", "let", "local", "printf", "pwd", "read",
    "readonly", "return", "set", "shift", "test", "times", "trap", "true", "type", "ulimit",
    "umask", "unalias", "unset", "until", "wait", "while", "{", "(",
))
# fmt: on


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
        Rule("config-invalid", _W, "the config is not usable: `when` keys use their defaults"),
        Rule("no-planning", _I, "no .planning/: only capabilities were checked"),
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
        Rule("agent-missing", _W, "no executable .looprail/agents/<name>"),
        Rule("skill-missing", _W, "no executable .looprail/skills/<flavor>-<skill>"),
        Rule("command-missing", _W, "no executable .looprail/commands/<first word>"),
        Rule("command-grammar", _E, "a step command fails the grammar: never run"),
        # plans
        Rule("plan-invalid", _E, "a PLAN.md cannot be read or names what is not there"),
        Rule("plan-dag", _E, "plans whose depends_on form a cycle"),
        Rule("plan-warning", _W, "a plan layout the DAG or the format disagrees with"),
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


class LintReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    findings: list[Finding]

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.severity == "warning")

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0

    def to_json(self) -> dict[str, Any]:
        """The stable `--json` shape."""
        return {
            "findings": [f.model_dump() for f in self.findings],
            "errors": self.errors,
            "warnings": self.warnings,
        }


# --------------------------------------------------------------------------- input


@dataclass
class PhaseInput:
    """One phase: loaded (`phase`, `waves`) or the PlanError that stopped loading it."""

    label: str  # the phase folder, relative to the project
    phase: Any = None  # looprail.plans.Phase
    waves: Any = None  # looprail.plans.WavePlan
    error: PlanError | None = None
    wave_error: PlanError | None = None


@dataclass
class Probe:
    """The questions lint asks the machine. `executable(folder, name)` returns None when
    `.looprail/<folder>/<name>` is a usable executable, else why not; `on_path(word)` says
    whether a command word would be found by the shell; `file(path)` whether a resolver binary
    is runnable."""

    executable: Callable[[str, str], str | None]
    on_path: Callable[[str], bool]
    runnable: Callable[[str], bool]


@dataclass
class LintInput:
    project: Path
    registry: Registry
    compiled: CompiledRegistry
    config: dict[str, Any] | None
    probe: Probe
    config_warnings: list[str] = field(default_factory=list)
    phases: list[PhaseInput] = field(default_factory=list)
    has_planning: bool = True
    flavor: str = "gsd"
    host_tool: str | None = None


def local_probe(project: Path, runtime_name: str = "local") -> Probe:
    """The probe of a runtime (from the registry): what it would find, e.g. for `local` the
    executables under `.looprail/`. A runtime that resolves names itself finds everything."""
    from looprail.runtime.process import find_program
    from looprail.runtime.registry import RuntimeSettings, create_runtime

    runtime = create_runtime(runtime_name, RuntimeSettings(project=project))
    missing = getattr(runtime, "missing", None)

    def executable(folder: str, name: str) -> str | None:
        return missing(folder, name) if missing is not None else None

    def on_path(word: str) -> bool:
        return word in SHELL_BUILTINS or find_program(word) is not None

    def runnable(binary: str) -> bool:
        if "/" in binary:
            path = Path(binary) if os.path.isabs(binary) else project / binary
            return path.is_file() and os.access(path, os.X_OK)
        return find_program(binary) is not None

    return Probe(executable, on_path, runnable)


def _runtime_name(config: dict[str, Any] | None) -> str:
    from looprail.errors import LooprailError
    from looprail.runtime.registry import agent_name, available

    try:
        name = agent_name(config)
    except LooprailError:
        return "local"
    return name if name in available() else "local"


def load_input(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    *,
    phase: str | None = None,
    flavor: str = "gsd",
    host_tool: str | None = None,
    probe: Probe | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> LintInput:
    """Load everything lint looks at. Raises only for a missing project folder or an unknown
    `phase`; everything else that is wrong becomes a finding."""
    from looprail.config import load_project_config_strict
    from looprail.errors import UsageError
    from looprail.hooks.registry import load_registry
    from looprail.trust import load_compiled

    root = Path(project)
    if not root.is_dir():
        raise UsageError(f"{project}: no such project folder")
    root = root.resolve()
    has_planning = (root / ".planning").is_dir()
    config = load_project_config_strict(root)  # a malformed config stops lint: file:line:col
    config_warnings: list[str] = []
    registry = load_registry(root, capability_dirs, config=config, env=env, home=home)
    compiled = load_compiled(root, capability_dirs, env=env, home=home)
    phases = _load_phases(root, phase) if has_planning else []
    if phase is not None and not has_planning:
        raise PlanError(f"{project}: no .planning/ folder, so no phase {phase}")
    return LintInput(
        project=root,
        registry=registry,
        compiled=compiled,
        config=config,
        probe=probe or local_probe(root, _runtime_name(config)),
        config_warnings=config_warnings,
        phases=phases,
        has_planning=has_planning,
        flavor=flavor,
        host_tool=host_tool,
    )


def _load_phases(root: Path, only: str | None) -> list[PhaseInput]:
    from looprail.plans import compute_waves, find_phase, list_phases, load_phase

    dirs = [find_phase(root, only)] if only is not None else list_phases(root)
    out = []
    for ph in dirs:
        item = PhaseInput(label=_rel(ph.dir, root))
        try:
            item.phase = load_phase(root, ph.number)
        except PlanError as exc:
            item.error = exc
            out.append(item)
            continue
        try:
            item.waves = compute_waves(item.phase.plans, root=root)
        except PlanError as exc:
            item.wave_error = exc
        out.append(item)
    return out


def lint_project(
    project: str | Path,
    capability_dirs: Sequence[str | Path] = (),
    **options: Any,
) -> LintReport:
    """Load `project` and lint it (see `load_input` for the options)."""
    return LintReport(findings=lint(load_input(project, capability_dirs, **options)))


# --------------------------------------------------------------------------- the checks


def lint(data: LintInput) -> list[Finding]:
    """Every finding about `data`, errors first, then by file and path (deterministic)."""
    found: list[Finding] = []
    for check in (_config, _capabilities, _artifacts, _hooks, _plans, _roles):
        found += check(data)
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    unique = list(dict.fromkeys(found))
    return sorted(unique, key=lambda f: (rank[f.severity], f.file, f.path, f.code, f.message))


def _rel(path: str | Path, project: Path) -> str:
    """A path for people and tools: relative to the project, else to the current folder."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    for base in (project, Path.cwd()):
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            continue
    return p.as_posix()


def _config(data: LintInput) -> list[Finding]:
    out = []
    config_file = ".planning/config.json"
    for w in data.config_warnings:
        out.append(
            Finding(
                severity="warning",
                code="config-invalid",
                file=config_file,
                message=w.split(": ", 1)[-1],
                fix="make .planning/config.json a valid JSON object; until then every `when` "
                "key falls back to its declared default",
            )
        )
    if not data.has_planning:
        out.append(
            Finding(
                severity="info",
                code="no-planning",
                file=".planning/",
                message="no .planning/ folder: only capabilities were linted",
                fix="create .planning/ (config.json, phases/NN-name/) to lint config and plans",
            )
        )
    return out


def _capabilities(data: LintInput) -> list[Finding]:
    out = []
    reg = data.registry
    for failed in reg.failed:
        gates = (
            f"; its gates at {', '.join(failed.gate_points)} are not evaluated"
            if failed.gate_points
            else ""
        )
        for issue in failed.issues:
            out.append(
                Finding(
                    severity="error",
                    code="manifest-invalid",
                    file=_rel(issue.file, data.project),
                    path=issue.path,
                    message=f"capability {failed.id!r} ({failed.origin}) not loaded: "
                    f"{issue.reason}{gates}",
                    fix=f"fix {issue.path} in {_rel(issue.file, data.project)}"
                    + (" (or remove the capability)" if failed.origin != "first-party" else ""),
                )
            )
    # What `looprail run` refuses to start on (besides failed manifests, reported above).
    from looprail.hooks.startup import blockers

    missing = {str(r.path) for r in getattr(reg, "missing_roots", ())}
    untrusted_gates = set()
    for b in blockers(reg, data.compiled):
        if b.code == "capability-not-loaded":
            continue
        if b.code == "capability-gates-untrusted":
            untrusted_gates.add(b.file)
        out.append(
            Finding(
                severity="error",
                code=b.code,
                file=_rel(b.file, data.project),
                path=b.path,
                message=b.message + "; `looprail run` refuses to start",
                fix=b.fix,
            )
        )
    shadow_warnings = set()
    for sh in getattr(reg, "shadowed", ()):
        shadow_warnings.add(str(sh.source))
        out.append(
            Finding(
                severity="warning",
                code="shadowed-capability",
                file=_rel(str(sh.source / "capability.json"), data.project),
                message=sh.reason,
                fix=f"give your copy its own id (not {sh.id!r}) to run it beside the "
                f"{sh.winner_origin} one, or remove it; a fix to {sh.id!r} itself belongs in "
                f"the {sh.winner_origin} set",
            )
        )
    for w in reg.warnings:
        if w.split(": ", 1)[0] in shadow_warnings and " is shadowed by " in w:
            continue  # said above, plainly
        file = w.split(": ", 1)[0] if ": " in w else ""
        if file in missing:
            continue
        out.append(
            Finding(
                severity="warning",
                code="registry-warning",
                file=_rel(file, data.project) if file else "",
                message=w.split(": ", 1)[-1] if file else w,
                fix="remove or rename one of them, or drop the missing --capabilities folder",
            )
        )
    for cid, lc in reg.capabilities.items():
        file = _cap_file(data, lc)
        cap = data.compiled.get("caps", {}).get(cid, {})
        if cap.get("consent") is False and str(lc.source / "capability.json") in untrusted_gates:
            continue
        if cap.get("consent") is False:
            out.append(
                Finding(
                    severity="info",
                    code="capability-untrusted",
                    file=file,
                    message=f"capability {cid!r} is not used: {cap.get('inactiveReason')}",
                    fix="review it and run `looprail trust`",
                )
            )
        elif not _cap_active(data, cid):
            key = lc.manifest.activationKey
            out.append(
                Finding(
                    severity="info",
                    code="capability-inactive",
                    file=file,
                    path="$.activationKey",
                    message=f"capability {cid!r} is inactive: activationKey {key!r} is not true "
                    "under the current config, so none of its hooks run",
                    fix=f"set {key!r} to true in .planning/config.json to use it",
                )
            )
    return out


# --------------------------------------------------------------------------- declarations


@dataclass(frozen=True)
class _Decl:
    """One step, contribution or gate of a loaded capability."""

    cap_id: str
    group: str  # steps | contributions | gates
    index: int
    entry: dict[str, Any]
    file: str

    @property
    def path(self) -> str:
        return f"$.{self.group}[{self.index}]"

    @property
    def point(self) -> str:
        return self.entry["point"]

    @property
    def kind(self) -> str:
        return {"steps": "step", "contributions": "contribution", "gates": "gate"}[self.group]

    @property
    def name(self) -> str:
        return f"{self.kind} {self.path} of {self.cap_id!r} at {self.point}"


def _cap_file(data: LintInput, lc: Any) -> str:
    return _rel(lc.source / "capability.json", data.project)


def _declarations(data: LintInput) -> list[_Decl]:
    out = []
    for cid, lc in data.registry.capabilities.items():
        for group in ("steps", "contributions", "gates"):
            for i, entry in enumerate(lc.data.get(group) or ()):
                out.append(_Decl(cid, group, i, entry, _cap_file(data, lc)))
    return out


def _cap_active(data: LintInput, cap_id: str) -> bool:
    from looprail.hooks.resolve import cap_active

    return cap_active(data.compiled, cap_id, data.config)


def _when_true(data: LintInput, key: str) -> bool:
    from looprail.config import is_active
    from looprail.hooks.registry import config_types_of

    return is_active(key, data.config, config_types_of(data.registry))


def _runs(data: LintInput, decl: _Decl) -> bool:
    """Would this declaration be dispatched under the current config?"""
    from looprail.config import MISSING

    if not _cap_active(data, decl.cap_id):
        return False
    when = decl.entry.get("when")
    if when is not None and not _when_true(data, when):
        return False
    point_from = decl.entry.get("pointFrom")
    if point_from is not None:
        from looprail.config import effective_value
        from looprail.hooks.registry import config_types_of

        value = effective_value(point_from, data.config, config_types_of(data.registry))
        return value is not MISSING and value == decl.point
    return True


def _point_order() -> dict[str, int]:
    """Each point's position in the loop (the order the default loop first crosses them)."""
    from looprail.machine.spec import DEFAULT_LOOP

    order: dict[str, int] = {}
    for t in DEFAULT_LOOP.transitions():
        for p in t.points:
            order.setdefault(p, len(order))
    return order


def _artifacts(data: LintInput) -> list[Finding]:
    order = _point_order()
    decls = [d for d in _declarations(data) if d.group in ("steps", "contributions")]
    producers: dict[str, list[_Decl]] = {}
    for d in decls:
        for art in d.entry.get("produces") or ():
            producers.setdefault(art, []).append(d)
    out = []
    for d in decls:
        for j, art in enumerate(d.entry.get("consumes") or ()):
            at = order[d.point]
            host = HOST_ARTIFACTS.get(art)
            if host is not None and order[host] <= at:
                continue
            earlier = [p for p in producers.get(art, ()) if p != d and order[p.point] <= at]
            where = f"{d.path}.consumes[{j}]"
            if not earlier:
                mine = any(p == d for p in producers.get(art, ()))
                later = [p for p in producers.get(art, ()) if order[p.point] > at]
                if mine:
                    why = "it is its own output (a hook cannot consume what it produces)"
                elif host is not None:
                    why = f"the host writes {art} only at {host}"
                elif later:
                    why = f"it is produced only later ({later[0].cap_id} at {later[0].point})"
                else:
                    why = "no host artifact or other hook produces it"
                out.append(
                    Finding(
                        severity="error",
                        code="consumes-unsatisfied",
                        file=d.file,
                        path=where,
                        message=f"{d.name} consumes {art!r}, but {why}",
                        fix=f"consume it at {host or 'a later point'}, add a hook that produces "
                        "it earlier, or drop it from consumes",
                    )
                )
            elif _runs(data, d) and not any(_runs(data, p) for p in earlier):
                out.append(
                    Finding(
                        severity="warning",
                        code="consumes-inactive",
                        file=d.file,
                        path=where,
                        message=f"{d.name} consumes {art!r}, but its producer "
                        f"({earlier[0].cap_id} at {earlier[0].point}) does not run under the "
                        "current config",
                        fix=f"activate {earlier[0].cap_id}'s hook, or switch this one off too",
                    )
                )
    by_point: dict[tuple[str, str], list[_Decl]] = {}
    for d in decls:
        for art in d.entry.get("produces") or ():
            by_point.setdefault((d.point, art), []).append(d)
    for (point, art), ds in by_point.items():
        if len(ds) > 1:
            names = ", ".join(f"{x.cap_id} {x.path}" for x in ds)
            out.append(
                Finding(
                    severity="error",
                    code="duplicate-producer",
                    file=ds[1].file,
                    path=f"{ds[1].path}.produces",
                    message=f"{art!r} is produced twice at {point} ({names})",
                    fix="let one hook produce it, or name the artifacts apart",
                )
            )
    return out


# --------------------------------------------------------------------------- hooks


def _hooks(data: LintInput) -> list[Finding]:
    out = []
    for d in _declarations(data):
        if not _cap_active(data, d.cap_id):
            continue  # reported once as capability-inactive / untrusted
        when = d.entry.get("when")
        if when is not None and not _when_true(data, when):
            gate = d.group == "gates"
            out.append(
                Finding(
                    severity="warning" if gate else "info",
                    code="gate-never-runs" if gate else "hook-never-runs",
                    file=d.file,
                    path=f"{d.path}.when",
                    message=f"{d.name} never runs: `when` key {when!r} is not true under the "
                    "current config (nor by its default)",
                    fix=f"set {when!r} to true in .planning/config.json, or remove the {d.kind}",
                )
            )
            continue  # nothing else about it matters while it cannot run
        if d.group == "gates":
            out += _gate(data, d)
        elif d.group == "steps":
            out += _step(data, d)
    return out


def _grammar(value: Any) -> bool:
    from looprail.hooks.checks import validate_command

    return validate_command(value)


def _query_grammar(value: Any) -> bool:
    from looprail.hooks.checks import validate_query

    return validate_query(value)


def _words_fix(value: str) -> str:
    """A grammar-passing spelling of a step command, when there is an obvious one."""
    words = re.split(r"[.\s_/:]+", value.strip().lower())
    words = [re.sub(r"[^a-z0-9-]", "", w) for w in words]
    return " ".join(w for w in words if w and w[0].isalpha())


def _query_fix(value: str) -> str:
    """A grammar-passing spelling of a query that keeps its dotted handler names (the host's
    router reads `ui.plan-gate` and would refuse `ui plan-gate`), or "" when none is obvious."""
    if not re.fullmatch(r"[A-Za-z0-9._\- ]+", value):
        return ""  # a quote, `$(`, a newline…: no spelling of that is what the author meant
    words = []
    for word in value.strip().lower().replace("_", "-").split():
        parts = [re.sub(r"[^a-z0-9-]", "", p) for p in word.split(".")]
        parts = [p for p in parts if p and p[0].isalpha()]
        if parts:
            words.append(".".join(parts))
    fixed = " ".join(words)
    return fixed if fixed != value and _query_grammar(fixed) else ""


def _gate(data: LintInput, d: _Decl) -> list[Finding]:
    check = d.entry.get("check") or {}
    blocking = d.entry.get("blocking") is True
    halting = d.entry.get("onError") in ("halt", "fail")
    severe: Severity = "error" if blocking or halting else "warning"
    out = []
    if "query" in check:
        query = check["query"]
        if not _query_grammar(query):
            better = _query_fix(str(query))
            out.append(
                Finding(
                    # the loop refuses to run it; that stops the loop only when the gate
                    # blocks or halts on a check error, else it is a warning at run time
                    severity=severe,
                    code="query-grammar",
                    file=d.file,
                    path=f"{d.path}.check.query",
                    message=f"{d.name}: query {query!r} fails the grammar (lowercase words "
                    "[a-z][a-z0-9-]* joined by single dots, separated by single spaces), so "
                    f"it is never run (a check error routed by onError {d.entry.get('onError')})",
                    fix=f"write it as `{better}`"
                    if better
                    else "use lowercase dotted words separated by single spaces",
                )
            )
        else:
            out += _query_target(data, d, query.split(" ")[0], severe)
    elif "predicate" in check:
        out += _predicate(data, d, check["predicate"], blocking, severe)
    elif "agentVerdict" in check:
        ref = (check.get("agentVerdict") or {}).get("ref")
        if isinstance(ref, str):
            why = data.probe.executable("agents", ref)
            if why is not None:
                out.append(
                    Finding(
                        severity="warning",
                        code="agent-missing",
                        file=d.file,
                        path=f"{d.path}.check.agentVerdict.ref",
                        message=f"{d.name}: {why}, so this advisory gate can never deliver a "
                        "verdict",
                        fix=f"add an executable .looprail/agents/{ref}",
                    )
                )
    return out


def _query_target(data: LintInput, d: _Decl, word: str, severe: Severity) -> list[Finding]:
    if data.host_tool is not None:
        from looprail.runtime.local import resolve_host_tool

        found = resolve_host_tool(data.host_tool)
        if not isinstance(found, str):
            return []
        return [
            Finding(
                severity=severe,
                code="check-missing",
                file=d.file,
                path=f"{d.path}.check.query",
                message=f"{d.name}: {found}, so the query can never run",
                fix=f"install {data.host_tool} (a name on PATH or an absolute path) or run "
                "without --host-tool",
            )
        ]
    why = data.probe.executable("checks", word)
    if why is None:
        return []
    effect = (
        "the loop halts here every time"
        if severe == "error"
        else "the gate is skipped every time (onError skip)"
    )
    return [
        Finding(
            severity=severe,
            code="check-missing",
            file=d.file,
            path=f"{d.path}.check.query",
            message=f"{d.name}: {why}, so the gate can never pass: {effect}",
            fix=f"add an executable .looprail/checks/{word} that prints "
            '{"block": false, "message": ""}, or run with --host-tool',
        )
    ]


def _predicate(
    data: LintInput, d: _Decl, predicate: Any, blocking: bool, severe: Severity
) -> list[Finding]:
    path = f"{d.path}.check.predicate"
    if not isinstance(predicate, Mapping):
        return []  # manifest validation already refuses it
    from looprail.hooks.checks import PREDICATE_KINDS, PREDICATES

    kind = predicate.get("kind")
    spec = PREDICATES.get(kind) if isinstance(kind, str) else None
    if spec is None:
        return [
            Finding(
                severity="error",
                code="predicate-invalid",
                file=d.file,
                path=f"{path}.kind",
                message=f"{d.name}: unknown predicate kind {kind!r}: the check always errors",
                fix=f"use one of {', '.join(PREDICATE_KINDS)}",
            )
        ]
    missing = [
        f
        for f in (*spec.fields, *spec.values)
        if f not in predicate
        or (f in spec.fields and (not isinstance(predicate[f], str) or not predicate[f].strip()))
    ]
    if missing:
        return [
            Finding(
                severity="error",
                code="predicate-invalid",
                file=d.file,
                path=f"{path}.{missing[0]}",
                message=f"{d.name}: predicate {kind} needs {', '.join(map(repr, missing))}: the "
                "check always errors",
                fix=f"add {', '.join(missing)} to the predicate",
            )
        ]
    if spec.shell:
        return _command_predicate(data, d, predicate[spec.fields[0]], blocking, severe)
    if spec.pure and blocking:
        from looprail.hooks.checks import CheckContext, Verdict, evaluate_predicate

        # config-equals is pure: its verdict under the current config is known now.
        verdict = evaluate_predicate(predicate, CheckContext(data.project, config=data.config))
        if isinstance(verdict, Verdict) and verdict.block:
            return [
                Finding(
                    severity="warning",
                    code="gate-blocks",
                    file=d.file,
                    path=path,
                    message=f"{d.name} refuses under the current config: {verdict.message}",
                    fix=f"set {predicate['key']} in .planning/config.json when the loop may "
                    "pass this point",
                )
            ]
    return []


def _command_predicate(
    data: LintInput, d: _Decl, command: str, blocking: bool, severe: Severity
) -> list[Finding]:
    path = f"{d.path}.check.predicate.command"
    try:
        first = _first_program(command)
    except ValueError as exc:
        return [
            Finding(
                severity=severe,
                code="command-invalid",
                file=d.file,
                path=path,
                message=f"{d.name}: the command is not valid shell ({exc})",
                fix="fix the quoting of the command",
            )
        ]
    if first is None or any(c in first for c in "$`"):
        return []  # decided at run time
    found = data.probe.runnable(first) if "/" in first else data.probe.on_path(first)
    if found:
        return []
    effect = (
        "the command exits 127, so this blocking gate always refuses"
        if blocking
        else "the command exits 127, so this advisory gate always complains"
    )
    return [
        Finding(
            severity="error" if blocking else "warning",
            code="predicate-command-missing",
            file=d.file,
            path=path,
            message=f"{d.name}: {first!r} is not on PATH nor a shell builtin: {effect}",
            fix=f"install {first}, or change the predicate's command",
        )
    ]


def _first_program(command: str) -> str | None:
    """The program `sh -c command` starts first, or None when it starts none that is known
    before running. Shell punctuation is split off (`(cd x && make)` starts `cd`, not `(cd`), and
    subshell/group openers, `!`, `VAR=value` assignments and redirections are stepped over.
    Raises ValueError on unbalanced quotes."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token[0] in "<>":  # a redirection and its target
            i += 2
        elif token.isdigit() and i + 1 < len(tokens) and tokens[i + 1][0] in "<>":
            i += 3  # `2>/dev/null`
        elif set(token) <= set("();&|{}!") or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):
            i += 1
        else:
            return token
    return None


def _step(data: LintInput, d: _Decl) -> list[Finding]:
    ref = d.entry.get("ref") or {}
    out = []
    if ref.get("skill"):
        skill = f"{data.flavor}-{ref['skill']}"
        folder, name, path = "skills", skill, f"{d.path}.ref.skill"
    elif ref.get("agent"):
        folder, name, path = "agents", ref["agent"], f"{d.path}.ref.agent"
    elif isinstance(ref.get("command"), str):
        command = ref["command"]
        path = f"{d.path}.ref.command"
        if not _grammar(command):
            better = _words_fix(command)
            return [
                Finding(
                    severity="error",
                    code="command-grammar",
                    file=d.file,
                    path=path,
                    message=f"{d.name}: command {command!r} fails the grammar "
                    "^[a-z][a-z0-9-]*( [a-z][a-z0-9-]*)*$, so it is never run",
                    fix=f"use spaces: `{better}`" if better else "use lowercase words",
                )
            ]
        if data.host_tool is not None:
            return []
        folder, name = "commands", command.split(" ")[0]
    else:
        return []
    why = data.probe.executable(folder, name)
    if why is not None:
        on_error = d.entry.get("onError") or "skip"
        effect = "the loop halts here" if on_error in ("halt", "fail") else "it is skipped"
        out.append(
            Finding(
                severity="warning",
                code=f"{folder[:-1]}-missing",
                file=d.file,
                path=path,
                message=f"{d.name}: {why}; when it runs, {effect} (onError {on_error})",
                fix=f"add an executable .looprail/{folder}/{name}",
            )
        )
    return out


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
    for item in data.phases:
        if item.error is not None:
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
        for w in phase.warnings:
            if w in data.config_warnings:
                continue  # the config's own finding (config-invalid) says it once
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
            out += _waves(item, data)
        for plan in phase.plans:
            out += _trackers(data, plan, resolvers)
    return out


def _roles(data: LintInput) -> list[Finding]:
    """The role agents the local runtime will call for each phase, from what is still to do:
    the orchestrator for discuss (no CONTEXT.md yet) and always for ship, the planner while
    there is no PLAN.md, the executor while a plan has no SUMMARY.md, the verifier until
    VERIFICATION.md says `status: passed`. `run` fails on the first one that is missing."""
    from looprail.machine.spec import DEFAULT_LOOP

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
                file=f".looprail/agents/{role}",
                message=f"the {role} role agent is needed ({shown}) but {why_missing}: "
                "`looprail run` halts there",
                fix=f"add an executable .looprail/agents/{role} (docs/runtime.md)",
            )
        )
    return out


def _verification_status(phase: Any) -> str | None:
    from looprail.hooks.checks import read_frontmatter

    if phase.verification_path is None:
        return None
    try:
        fm = read_frontmatter(phase.verification_path.read_text(errors="replace"))
    except OSError:
        return None
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


def _waves(item: PhaseInput, data: LintInput) -> list[Finding]:
    out = []
    for w in item.waves.warnings:
        out.append(
            Finding(
                severity="warning",
                code="plan-warning",
                file=item.label,
                message=w,
                fix="drop the declared wave or make depends_on agree (the DAG wins)",
            )
        )
    plans = {p.id: p for p in item.phase.plans}
    for wave in item.waves.waves:
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


@dataclass(frozen=True)
class _Resolvers:
    active: dict[str, list[tuple[str, Any]]]  # prefix → [(cap id, resolver)]
    inactive: dict[str, list[str]]  # prefix → cap ids (loaded, not active)
    broken: dict[str, list[tuple[str, str]]]  # prefix → [(cap id, reason)] (failed to load)


def _resolvers(data: LintInput) -> _Resolvers:
    from looprail.hooks.task_content import unloadable_resolvers

    # As the run does (`session.Loaded.resolvers`): every loaded resolver counts, whatever its
    # capability's activationKey (execute:task has no `when`), except one without consent.
    active: dict[str, list[tuple[str, Any]]] = {}
    inactive: dict[str, list[str]] = {}
    caps = data.compiled.get("caps", {})
    for cid, r in data.registry.task_content_resolvers():
        if cid in caps and caps[cid].get("consent") is not False:
            active.setdefault(r.trackerPrefix, []).append((cid, r))
        else:
            inactive.setdefault(r.trackerPrefix, []).append(cid)
    broken: dict[str, list[tuple[str, str]]] = {}
    caps_by_id = data.registry.capabilities
    served = {
        prefix: getattr(caps_by_id.get(pairs[0][0]), "origin", "project")
        for prefix, pairs in active.items()
    }
    for cid, prefix, reason in unloadable_resolvers(data.registry.failed, served):
        broken.setdefault(prefix, []).append((cid, reason))
    return _Resolvers(active, inactive, broken)


def _trackers(data: LintInput, plan: Any, resolvers: _Resolvers) -> Iterable[Finding]:
    from looprail.hooks.task_content import split_tracker_id

    file = _rel(plan.path, data.project)
    for task in plan.tasks:
        tid = task.tracker_id
        if not tid or task.is_checkpoint:
            continue  # a checkpoint pauses: execute:task never resolves it
        where = f"line {task.line} (task {task.index} tracker-id)"
        split = split_tracker_id(tid)
        if split is None:
            yield Finding(
                severity="warning",
                code="tracker-id-malformed",
                file=file,
                path=where,
                message=f"tracker-id {tid!r} has no `prefix:id` form, so no resolver is asked "
                "and the task runs from the plan's inline content",
                fix="write it as prefix:ID (e.g. beads:GSD-42), or remove it",
            )
            continue
        prefix = split[0]
        if resolvers.broken.get(prefix):
            cid, reason = resolvers.broken[prefix][0]
            yield Finding(
                severity="error",
                code="tracker-resolver-broken",
                file=file,
                path=where,
                message=f"tracker-id {tid!r}: capability {cid!r}, which resolves {prefix!r}, "
                f"failed to load ({reason}); the task halts",
                fix=f"fix capability {cid}",
            )
            continue
        matches = resolvers.active.get(prefix, [])
        if len(matches) > 1:
            yield Finding(
                severity="error",
                code="tracker-resolver-ambiguous",
                file=file,
                path=where,
                message=f"tracker-id {tid!r}: {len(matches)} capabilities resolve prefix "
                f"{prefix!r} ({', '.join(c for c, _ in matches)}); the task halts",
                fix="keep one capability with this trackerPrefix",
            )
        elif not matches:
            off = resolvers.inactive.get(prefix)
            why = (
                f"capability {off[0]!r} declares it but has no consent"
                if off
                else "no capability declares that trackerPrefix"
            )
            yield Finding(
                severity="warning",
                code="tracker-no-resolver",
                file=file,
                path=where,
                message=f"tracker-id {tid!r}: no resolver for prefix {prefix!r} ({why}); the "
                "task runs from the plan's inline content",
                fix=f"review {off[0]} and run `looprail trust`"
                if off
                else f"add a capability whose "
                f"taskContentResolver.trackerPrefix is {prefix!r}, or remove the tracker-id",
            )
        else:
            cid, resolver = matches[0]
            binary = resolver.invoke.binary
            if not data.probe.runnable(binary):
                yield Finding(
                    severity="error",
                    code="tracker-resolver-missing",
                    file=file,
                    path=where,
                    message=f"tracker-id {tid!r}: resolver binary {binary!r} of capability "
                    f"{cid!r} is not there (relative to the project, or on PATH); the task "
                    "halts",
                    fix=f"install {binary} or fix {cid}'s taskContentResolver.invoke.binary",
                )


# --------------------------------------------------------------------------- text form


def render_text(report: LintReport) -> str:
    """The human form: one block per finding, then a count."""
    lines = []
    for f in report.findings:
        where = f.file + (f": {f.path}" if f.path else "")
        lines.append(f"{where}: {f.severity} [{f.code}] {f.message}")
        if f.fix:
            lines.append(f"    fix: {f.fix}")
    infos = sum(1 for f in report.findings if f.severity == "info")
    if not report.findings:
        lines.append("no problems found")
    else:
        lines.append(
            f"{report.errors} error{'s' * (report.errors != 1)}, "
            f"{report.warnings} warning{'s' * (report.warnings != 1)}, "
            f"{infos} note{'s' * (infos != 1)}"
        )
    return "\n".join(lines) + "\n"
