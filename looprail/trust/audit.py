"""Audit: every surface through which a capability or a native hooks file can make something run.

This is what a user reads before consenting (`looprail trust`, `capability install`) and what
`looprail capability audit` prints. The rule is that nothing that can run is left out, so it
lists more than the loop's own hooks:

- steps (the skill, agent or command each dispatches, and the exact command line), gates (the
  query's check executable, each predicate kind and, for `command-exit-zero`, the `/bin/sh`
  command it runs), contributions (text, no process, but it reaches an agent's context);
- the task-content resolver invocation, reviewer lanes (probe and invoke);
- what a capability declares for hosts that looprail itself never runs: host lifecycle hooks
  (`hooks[]` scripts), command families/modules, commands named in a runtime body;
- for native hooks files, every `when` and `shell` string (both run under `/bin/sh`) and every
  Action.

Strings that fail the command grammar are listed as *refused*: looprail never runs them.

Pure: the functions take manifest data (plain JSON, as `capset.LoadedCapability.data` holds it) or
loaded native hooks and return values; rendering returns text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from looprail.hooks.checks import (
    COMMAND_GRAMMAR,
    GRAMMAR_TEXT,
    PREDICATE_KINDS,
    PREDICATES,
    QUERY_GRAMMAR,
    QUERY_GRAMMAR_TEXT,
)
from looprail.hooks.native._jsonpath import member
from looprail.hostcall import query_args
from looprail.layout import LOOPRAIL_DIR
from looprail.runtime.process import escape_untrusted

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet, LoadedCapability
    from looprail.hooks.native.config import HooksFile

_SHOWN_AS_IS = frozenset({"<N>", "{{id}}", "{{model}}", "{{effort}}", "{{output}}", "{{prompt}}"})
# Shell syntax in a refused string (shown escaped: a newline appears as `\\n`).
_SUSPECT = re.compile(r"""[;&|$`'"<>(){}\\*?!#~]|^(?:command|query) -|\s-""")
_GRAMMAR_REFUSAL = f"fails the command grammar {GRAMMAR_TEXT}; looprail never runs it"
_SHOWN_ARGS = {"phase_number": "<N>", "phase_dir": "<phase dir>", "phase_req_ids": "<req ids>"}
_QUERY_REFUSAL = f"fails the query grammar ({QUERY_GRAMMAR_TEXT}); looprail never runs it"


@dataclass(frozen=True)
class Surface:
    """One thing that can run (or, for `contribution`, reach an agent) and where it is declared.

    `runs` is one line saying what happens, with untrusted text escaped; `shell` marks strings
    that reach `/bin/sh`; `refused` says why looprail will never run it; `host_only` marks
    declarations for a host installer that looprail itself does not execute."""

    kind: str
    where: str  # JSON path inside its file
    runs: str
    point: str | None = None
    shell: bool = False
    timeout_s: float | None = None
    refused: str | None = None
    host_only: bool = False
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "where": self.where, "runs": self.runs}
        if self.point is not None:
            out["point"] = self.point
        out["shell"] = self.shell
        if self.timeout_s is not None:
            out["timeoutS"] = self.timeout_s
        if self.refused is not None:
            out["refused"] = self.refused
        if self.host_only:
            out["hostOnly"] = True
        if self.note is not None:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class CapabilityAudit:
    id: str
    origin: str
    source: str
    role: str
    active: bool
    reason: str | None
    surfaces: tuple[Surface, ...]

    @property
    def refused(self) -> tuple[Surface, ...]:
        return tuple(s for s in self.surfaces if s.refused)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "origin": self.origin,
            "source": self.source,
            "file": f"{self.source}/capability.json",
            "role": self.role,
            "active": self.active,
            "reason": self.reason,
            "surfaces": [s.to_json() for s in self.surfaces],
        }


@dataclass(frozen=True)
class HooksFileAudit:
    file: str
    scope: str
    status: str  # valid | invalid | missing | untrusted (read anyway for the audit)
    trusted: bool | None
    surfaces: tuple[Surface, ...]
    issues: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.file,
            "scope": self.scope,
            "status": self.status,
            "surfaces": [s.to_json() for s in self.surfaces],
        }
        if self.trusted is not None:
            out["trusted"] = self.trusted
        if self.issues:
            out["issues"] = list(self.issues)
        return out


@dataclass(frozen=True)
class FailedAudit:
    id: str
    origin: str
    file: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "origin": self.origin, "file": self.file, "reason": self.reason}


@dataclass(frozen=True)
class Audit:
    capabilities: tuple[CapabilityAudit, ...] = ()
    hooks_files: tuple[HooksFileAudit, ...] = ()
    failed: tuple[FailedAudit, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "capabilities": [c.to_json() for c in self.capabilities],
            "nativeHooks": [h.to_json() for h in self.hooks_files],
            "failed": [f.to_json() for f in self.failed],
        }


# --------------------------------------------------------------------------- capabilities


def _q(text: Any) -> str:
    """Untrusted text shown on one line."""
    return escape_untrusted(str(text))


def _argv(parts: Sequence[Any]) -> str:
    """A command line as a shell would read it (display only: nothing here is ever run by a
    shell); placeholders such as `<N>` and `{{id}}` are shown as written."""
    return escape_untrusted(
        " ".join(p if p in _SHOWN_AS_IS else shlex.quote(p) for p in map(str, parts))
    )


# Programs that run their arguments as code: an argv surface that starts one is a shell (or
# a script interpreter) in all but name, whatever "no shell" means for looprail's own spawn.
_SHELLS = frozenset(
    ("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish", "csh", "tcsh", "rbash")
)
_INTERPRETERS = frozenset(
    (
        "python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun",
        "perl", "ruby", "php", "lua", "luajit", "tclsh", "wish", "Rscript", "osascript",
        "pwsh", "powershell", "awk", "gawk", "mawk", "busybox", "expect",
    )
)  # fmt: skip
# Wrappers that run their first non-option argument as a program.
_WRAPPERS = frozenset(("env", "nice", "nohup", "timeout", "stdbuf", "setsid", "command", "exec"))
_PY_VERSION = re.compile(r"^(python|pypy)[0-9.]*\Z")


def interpreter_of(binary: Any, args: Sequence[Any]) -> str | None:
    """`"sh -c"`-like label when `binary args…` starts a shell or a code interpreter (through
    `env`, `nice`, `timeout`… too), else None. Only the program names matter: `/bin/bash`,
    `bash5.2` and `python3.12` all count."""
    words = [str(binary), *(str(a) for a in args)]
    i = 0
    while i < len(words):
        name = words[i].rsplit("/", 1)[-1]
        base = re.sub(r"[0-9.]+\Z", "", name) or name
        if name in _WRAPPERS or base in _WRAPPERS:
            i += 1
            # skip the wrapper's options, VAR=value assignments and (timeout, nice) numbers
            while i < len(words) and (
                words[i].startswith("-")
                or "=" in words[i]
                or re.fullmatch(r"[0-9.]+[smhd]?", words[i])
            ):
                i += 1
            continue
        if base in _SHELLS or name in _SHELLS:
            flag = next((w for w in words[i + 1 :] if w.startswith("-") and "c" in w[1:]), None)
            return f"{name} {flag}" if flag else name
        if base in _INTERPRETERS or name in _INTERPRETERS or _PY_VERSION.match(name):
            flag = next(
                (w for w in words[i + 1 :] if w in ("-c", "-e", "-E", "--eval", "-p", "-r")),
                None,
            )
            return f"{name} {flag}" if flag else name
        return None
    return None


def _spawn_note(binary: Any, args: Sequence[Any]) -> str:
    """ "no shell", or the loud truth when the program is itself a shell or interpreter."""
    found = interpreter_of(binary, args)
    if found is None:
        return "no shell"
    return f"SHELL: runs {_q(found)}, an interpreter that executes its arguments as code"


def capability_surfaces(data: Mapping[str, Any], *, flavor: str = "gsd") -> list[Surface]:
    """Every surface of one manifest (its JSON, fragments materialised or not)."""
    out: list[Surface] = []
    for i, step in enumerate(_items(data.get("steps"))):
        out += _step_surfaces(step, f"$.steps[{i}]", flavor)
    for i, con in enumerate(_items(data.get("contributions"))):
        into = con.get("into")
        out.append(
            Surface(
                "contribution",
                f"$.contributions[{i}].fragment",
                f"injects text into the {_q(into)} role's context (no process)",
                point=_point(con),
                note="text from the capability reaches an agent's prompt",
            )
        )
    for i, gate in enumerate(_items(data.get("gates"))):
        out += _gate_surfaces(gate, f"$.gates[{i}]")
    tcr = data.get("taskContentResolver")
    if isinstance(tcr, Mapping):
        invoke = _mapping(tcr.get("invoke"))
        args = _list(invoke.get("args"))
        timeout = invoke.get("timeoutMs")
        binary = invoke.get("binary", "?")
        out.append(
            Surface(
                "taskContentResolver",
                "$.taskContentResolver.invoke",
                f"{_argv([binary, *args])} ({_spawn_note(binary, args)}; cwd = the project; "
                f'"{{{{id}}}}" = the task\'s tracker id)',
                point="execute:task",
                shell=interpreter_of(binary, args) is not None,
                timeout_s=timeout / 1000 if isinstance(timeout, (int, float)) else None,
                note=f"tracker-ids with prefix {_q(tcr.get('trackerPrefix'))}",
            )
        )
    reviewer = data.get("reviewer")
    if isinstance(reviewer, Mapping):
        out += _reviewer_surfaces(reviewer)
    for i, hook in enumerate(_items(data.get("hooks"))):
        matcher = f" matching {_q(hook['matcher'])}" if hook.get("matcher") else ""
        out.append(
            Surface(
                "host-hook",
                f"$.hooks[{i}].script",
                f"script {_q(hook.get('script'))} on host event {_q(hook.get('event'))}{matcher}",
                host_only=True,
                note="a host lifecycle hook: installed into an agent host's settings; "
                "looprail itself never runs it",
            )
        )
    for i, cmd in enumerate(_items(data.get("commands"))):
        subs = cmd.get("subcommands")
        subs_text = f" ({', '.join(_q(s) for s in subs)})" if isinstance(subs, list) else ""
        out.append(
            Surface(
                "command-family",
                f"$.commands[{i}]",
                f"module {_q(cmd.get('module'))} (router {_q(cmd.get('router'))}) serving "
                f"`<tool> {_q(cmd.get('family'))} …`{subs_text}",
                host_only=True,
                note="loaded by a host tool; looprail itself never loads it",
            )
        )
    runtime = data.get("runtime")
    if isinstance(runtime, Mapping):
        out += _runtime_surfaces(runtime, "$.runtime")
    return out


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _point(entry: Mapping[str, Any]) -> str | None:
    point = entry.get("point")
    return point if isinstance(point, str) else None


def _step_surfaces(step: Mapping[str, Any], base: str, flavor: str) -> list[Surface]:
    ref = _mapping(step.get("ref"))
    point = _point(step)
    note = None
    if step.get("supportsReviewerLanes") is True:
        note = "opts into reviewer lanes (`review-lane dispatch-step` may run its lanes)"
    if isinstance(ref.get("skill"), str):
        skill = f"{flavor}-{ref['skill']}"
        return [
            Surface(
                "step.skill",
                f"{base}.ref.skill",
                f"skill {_q(skill)}: {LOOPRAIL_DIR}/skills/{_q(skill)} (or the host's skill)",
                point=point,
                note=note,
            )
        ]
    if isinstance(ref.get("agent"), str):
        agent = ref["agent"]
        return [
            Surface(
                "step.agent",
                f"{base}.ref.agent",
                f"agent {_q(agent)}: {LOOPRAIL_DIR}/agents/{_q(agent)} (or the host's subagent)",
                point=point,
                note=note,
            )
        ]
    command = ref.get("command")
    if command is not None:
        if isinstance(command, str) and COMMAND_GRAMMAR.match(command):
            words = command.split(" ")
            runs = (
                f"{LOOPRAIL_DIR}/commands/{_argv([words[0]])} "
                f"{_argv([*words[1:], '--phase', '<N>', '--raw'])} "
                f"(or `<host tool> {command} --phase <N> --raw`); no shell"
            )
            return [Surface("step.command", f"{base}.ref.command", runs, point=point, note=note)]
        return [
            Surface(
                "step.command",
                f"{base}.ref.command",
                f"command {_q(command)!s}",
                point=point,
                refused=_GRAMMAR_REFUSAL,
            )
        ]
    return [
        Surface("step", f"{base}.ref", "no skill, agent or command", point=point, refused="no ref")
    ]


def _gate_surfaces(gate: Mapping[str, Any], base: str) -> list[Surface]:
    check = _mapping(gate.get("check"))
    point = _point(gate)
    blocking = "blocking" if gate.get("blocking") is True else "advisory"
    out: list[Surface] = []
    if "query" in check:
        query = check["query"]
        if isinstance(query, str) and QUERY_GRAMMAR.match(query):
            words = query.split(" ")
            args = [_SHOWN_ARGS[n] for n in query_args(point)]
            runs = (
                " ".join(
                    filter(None, [f"{LOOPRAIL_DIR}/checks/{_argv([words[0]])}", _argv(words[1:])])
                )
                + f" {' '.join(args)} "
                f"(or `<host tool> check {query} {' '.join(args)} --raw`); no shell; {blocking}"
            )
            out.append(Surface("gate.query", f"{base}.check.query", runs, point=point))
        else:
            out.append(
                Surface(
                    "gate.query",
                    f"{base}.check.query",
                    f"query {_q(query)}",
                    point=point,
                    refused=_QUERY_REFUSAL,
                )
            )
    if "predicate" in check:
        out.append(_predicate_surface(check["predicate"], f"{base}.check.predicate", point))
    if "agentVerdict" in check:
        verdict = check["agentVerdict"] if isinstance(check["agentVerdict"], Mapping) else {}
        ref = verdict.get("ref")
        out.append(
            Surface(
                "gate.agentVerdict",
                f"{base}.check.agentVerdict",
                f"agent {_q(ref)}: {LOOPRAIL_DIR}/agents/{_q(ref)} asked for a verdict (advisory)",
                point=point,
            )
        )
    return out


def _predicate_surface(predicate: Any, where: str, point: str | None) -> Surface:
    if not isinstance(predicate, Mapping):
        return Surface("gate.predicate", where, "malformed predicate", point, refused="not run")
    kind = predicate.get("kind")
    label = f"gate.predicate.{kind}" if isinstance(kind, str) else "gate.predicate"
    spec = PREDICATES.get(kind) if isinstance(kind, str) else None
    if spec is None:
        return Surface(
            label,
            where,
            f"predicate kind {_q(kind)}",
            point=point,
            refused=f"unknown predicate kind (known: {', '.join(PREDICATE_KINDS)}); never run",
        )
    shown = {f: _q(predicate.get(f)) for f in spec.fields}
    if not spec.shell:
        return Surface(label, where, spec.audit.format(**shown), point=point)
    command_field = spec.fields[0]
    command = predicate.get(command_field)
    shown[command_field] = _argv([str(command)])
    timeout = predicate.get("timeout", 30)
    return Surface(
        label,
        f"{where}.{command_field}",
        spec.audit.format(**shown),
        point=point,
        shell=True,
        timeout_s=float(timeout) if isinstance(timeout, (int, float)) else None,
        refused=None if isinstance(command, str) and command.strip() else f"no {command_field}",
    )


def _reviewer_surfaces(reviewer: Mapping[str, Any]) -> list[Surface]:
    slug = _q(reviewer.get("slug"))
    out: list[Surface] = []
    probe = _mapping(reviewer.get("probe"))
    kind = probe.get("kind")
    if kind == "command-exists":
        runs = f"looks up {_q(probe.get('binary'))} on PATH (no process)"
        out.append(Surface("reviewer.probe", "$.reviewer.probe", runs, note=f"lane {slug}"))
    elif kind == "command-capability":
        timeout = probe.get("timeoutMs")
        out.append(
            Surface(
                "reviewer.probe",
                "$.reviewer.probe",
                f"{_argv([probe.get('binary', '?'), '--help'])} (no shell; looks for "
                f"{_q(probe.get('needle'))} in its output)",
                timeout_s=timeout / 1000 if isinstance(timeout, (int, float)) else None,
                note=f"lane {slug}",
            )
        )
    else:
        out.append(
            Surface(
                "reviewer.probe",
                "$.reviewer.probe",
                f"{_q(kind)} probe: looprail makes no network requests; the lane is unavailable",
                refused="never run",
                note=f"lane {slug}",
            )
        )
    invoke = _mapping(reviewer.get("invoke"))
    if reviewer.get("transport") == "spawn":
        args = _list(invoke.get("args"))
        channel = invoke.get("promptChannel")
        out.append(
            Surface(
                "reviewer.invoke",
                "$.reviewer.invoke",
                f"{_argv([invoke.get('binary', '?'), *args])} "
                f"({_spawn_note(invoke.get('binary', '?'), args)}; prompt via "
                f"{_q(channel)}; output via {_q(invoke.get('outputChannel'))})",
                shell=interpreter_of(invoke.get("binary", "?"), args) is not None,
                timeout_s=_lane_timeout_s(reviewer),
                refused="promptChannel 'none' cannot take the scoped prompt; never run"
                if channel == "none"
                else None,
                note=f"lane {slug}, flags {', '.join(_q(f) for f in reviewer.get('flags') or ())}",
            )
        )
    else:
        out.append(
            Surface(
                "reviewer.invoke",
                "$.reviewer.invoke",
                f"{_q(reviewer.get('transport'))} transport to "
                f"{_q(invoke.get('defaultHost'))}{_q(invoke.get('path') or '')}",
                refused="unsupported transport; never run",
                note=f"lane {slug}",
            )
        )
    for i, binary in enumerate(reviewer.get("requiresBinaries") or ()):
        out.append(
            Surface(
                "reviewer.requires",
                f"$.reviewer.requiresBinaries[{i}]",
                f"looks up {_q(binary)} on PATH (no process)",
                note=f"lane {slug}",
            )
        )
    return out


def _lane_timeout_s(reviewer: Mapping[str, Any]) -> float | None:
    floor = reviewer.get("timeoutFloorMs")
    return floor / 1000 if isinstance(floor, (int, float)) and floor > 0 else None


def _runtime_surfaces(value: Any, where: str, depth: int = 0) -> list[Surface]:
    """Commands named anywhere in a runtime body (`orchestratorExec`, …): host metadata."""
    if depth > 16:
        return []
    out: list[Surface] = []
    if isinstance(value, Mapping):
        exe = value.get("command") if isinstance(value.get("command"), str) else None
        exe = exe or (value.get("binary") if isinstance(value.get("binary"), str) else None)
        if exe:
            args = _list(value.get("args"))
            out.append(
                Surface(
                    "runtime.exec",
                    where,
                    _argv([exe, *args]),
                    host_only=True,
                    note="declared for agent hosts; looprail itself never runs it",
                )
            )
        for key, sub in value.items():
            out += _runtime_surfaces(sub, f"{where}.{key}", depth + 1)
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            out += _runtime_surfaces(sub, f"{where}[{i}]", depth + 1)
    return out


def suspect_surfaces(surfaces: Sequence[Surface]) -> list[Surface]:
    """Refused commands and queries that carry shell syntax (quotes, `;`, backticks, `$(`,
    redirections, control characters, a leading `-`): never run, and a sign of an injection
    attempt, so `install` and `trust` will not consent to a capability carrying one. (A dotted
    query such as the reference's `verify.schema-drift` is refused too, but is not suspect.)"""
    refusals = (_GRAMMAR_REFUSAL, _QUERY_REFUSAL)
    return [s for s in surfaces if s.refused in refusals and _SUSPECT.search(s.runs)]


def audit_capability(
    lc: LoadedCapability, *, flavor: str = "gsd", reason: str | None = None
) -> CapabilityAudit:
    """The audit of one loaded capability; `reason`: why it is inactive (default: consent's,
    `lc.inactive_reason`; `CapabilitySet.why_inactive` adds its `activationKey`)."""
    reason = reason if reason is not None else lc.inactive_reason
    return CapabilityAudit(
        id=lc.id,
        origin=lc.origin,
        source=str(lc.source),
        role=lc.role,
        active=reason is None,
        reason=reason,
        surfaces=tuple(capability_surfaces(lc.data, flavor=flavor)),
    )


# --------------------------------------------------------------------------- native hooks


def native_surfaces(hooks: Sequence[Any]) -> list[Surface]:
    """Every `when`, `shell` and Action of native hooks (`NativeHook` values)."""
    out: list[Surface] = []
    for hook in hooks:
        base = json_path("$", hook.section, hook.name)
        label = f"hook {_q(hook.ref)} on {_q(hook.event)}" + (
            "" if hook.default else " (off unless enabled)"
        )
        timeout_s = hook.timeout_ms / 1000
        if hook.when is not None:
            out.append(_shell_surface("native.when", f"{base}.when", hook.when, hook, timeout_s))
        out.append(_shell_surface("native.shell", f"{base}.shell", hook.shell, hook, timeout_s))
        if hook.action is not None:
            out.append(
                Surface(
                    "native.action",
                    f"{base}.action",
                    f"Action {hook.action.type} (no process)",
                    point=hook.event,
                    note=label,
                )
            )
    return out


def _shell_surface(kind: str, where: str, command: str, hook: Any, timeout_s: float) -> Surface:
    label = f"hook {_q(hook.ref)}" + ("" if hook.default else " (off unless enabled)")
    if command in ("true", "false"):
        return Surface(
            kind, where, f"{command} (answered without a process)", point=hook.event, note=label
        )
    return Surface(
        kind,
        where,
        f"/bin/sh -c {_argv([command])}",
        point=hook.event,
        shell=True,
        timeout_s=timeout_s,
        note=label,
    )


def json_path(path: str, *keys: str) -> str:
    """`$.local["my-hook"]`: JSON paths spelled as the native hooks loader spells them."""
    for key in keys:
        path = member(path, key)
    return path


def audit_hooks_file(hooks_file: HooksFile, *, trusted: bool | None = None) -> HooksFileAudit:
    """The audit of one `native.config.HooksFile` (read with `read_hooks_file`)."""
    return HooksFileAudit(
        file=str(hooks_file.path),
        scope=hooks_file.scope,
        status=hooks_file.status,
        trusted=trusted,
        surfaces=tuple(native_surfaces(hooks_file.hooks)),
        issues=tuple(str(i) for i in hooks_file.issues),
    )


# --------------------------------------------------------------------------- whole audits


def audit_registry(
    registry: CapabilitySet,
    ids: Sequence[str] = (),
    *,
    hooks_files: Sequence[HooksFileAudit] = (),
    flavor: str = "gsd",
    config: Mapping[str, Any] | None = None,
) -> Audit:
    """The audit of a loaded capability set (all capabilities, or those in `ids`) plus native
    hooks files, each capability active or not under `config`. Failed capabilities are
    listed: nothing from them runs."""
    wanted = set(ids)
    caps = tuple(
        audit_capability(
            registry.capabilities[cid], flavor=flavor, reason=registry.why_inactive(cid, config)
        )
        for cid in sorted(registry.capabilities)
        if not wanted or cid in wanted
    )
    failed = tuple(
        FailedAudit(f.id, f.origin, f.file, str(f.issues[0]) if f.issues else "invalid")
        for f in registry.failed
        if not wanted or f.id in wanted
    )
    return Audit(caps, tuple(hooks_files), failed)


def render_text(audit: Audit) -> str:
    """The audit as people read it: one block per capability and hooks file."""
    lines: list[str] = []
    for cap in audit.capabilities:
        state = "active" if cap.active else f"INACTIVE: {cap.reason}"
        lines.append(f"capability {cap.id} ({cap.role}, {cap.origin}) — {state}")
        lines.append(f"  {cap.source}/capability.json")
        lines += _surface_lines(cap.surfaces, "  nothing that runs")
        lines.append("")
    for f in audit.failed:
        lines.append(f"capability {f.id} ({f.origin}) — FAILED TO LOAD, nothing from it runs")
        lines.append(f"  {f.reason}")
        lines.append("")
    for hf in audit.hooks_files:
        trust = ""
        if hf.trusted is not None:
            trust = ", trusted" if hf.trusted else ", NOT TRUSTED (run `looprail trust`)"
        lines.append(f"native hooks {hf.file} ({hf.scope}, {hf.status}{trust})")
        for issue in hf.issues:
            lines.append(f"  invalid, none of its hooks run: {issue}")
        lines += _surface_lines(hf.surfaces, "  no hooks")
        lines.append("")
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) if lines else "nothing to audit"


def _surface_lines(surfaces: Sequence[Surface], empty: str) -> list[str]:
    if not surfaces:
        return [empty]
    out = []
    for s in surfaces:
        tags = []
        if s.point:
            tags.append(s.point)
        if s.shell:
            tags.append("SHELL")
        if s.timeout_s is not None:
            tags.append(f"timeout {s.timeout_s:g}s")
        if s.host_only:
            tags.append("host only")
        head = f"  - {s.kind} [{', '.join(tags)}]" if tags else f"  - {s.kind}"
        out.append(f"{head} {s.where}")
        out.append(f"      {s.runs}")
        if s.refused:
            out.append(f"      REFUSED: {s.refused}")
        if s.note:
            out.append(f"      ({s.note})")
    return out


__all__ = [
    "Audit",
    "CapabilityAudit",
    "FailedAudit",
    "HooksFileAudit",
    "Surface",
    "audit_capability",
    "audit_hooks_file",
    "audit_registry",
    "capability_surfaces",
    "native_surfaces",
    "render_text",
    "suspect_surfaces",
]
