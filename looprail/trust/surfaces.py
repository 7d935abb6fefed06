"""Surfaces: every thing a capability manifest or a native hooks file can make run (or, for a
contribution, put before an agent), each a `Surface`: what runs, where it is declared, whether
it reaches a shell or an interpreter, and why looprail refuses it. Pure: data in, values out.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from looprail.errors import json_path
from looprail.hooks.gates.checks import (
    COMMAND_GRAMMAR,
    GRAMMAR_TEXT,
    PREDICATE_KINDS,
    PREDICATES,
    QUERY_GRAMMAR,
    QUERY_GRAMMAR_TEXT,
)
from looprail.layout import LOOPRAIL_DIR
from looprail.runtime.hostcall import query_args
from looprail.runtime.process import escape_untrusted

if TYPE_CHECKING:
    from looprail.hooks.native.document import HookEntry
    from looprail.hooks.native.models import NativeHook

_SHOWN_AS_IS = frozenset({"<N>", "{{id}}", "{{model}}", "{{effort}}", "{{output}}", "{{prompt}}"})
# Shell syntax in a refused string (shown escaped: a newline appears as `\\n`).
_SUSPECT = re.compile(r"""[;&|$`'"<>(){}\\*?!#~]|^(?:command|query) -|\s-""")
_GRAMMAR_REFUSAL = f"fails the command grammar {GRAMMAR_TEXT}; looprail never runs it"
_SHOWN_ARGS = {"phase_number": "<N>", "phase_dir": "<phase dir>", "phase_req_ids": "<req ids>"}
_QUERY_REFUSAL = f"fails the query grammar ({QUERY_GRAMMAR_TEXT}); looprail never runs it"


@dataclass(frozen=True)
class Surface:
    """One thing that can run (or, for `contribution`, reach an agent) and where it is declared:
    `runs` says what happens on one line (untrusted text escaped), `shell` marks what reaches
    `/bin/sh`, `refused` why looprail never runs it, `host_only` a declaration for a host
    installer that looprail itself does not execute."""

    kind: str
    where: str  # JSON path inside its file
    runs: str
    point: str | None = None
    shell: bool = False
    timeout_s: float | None = None
    refused: str | None = None
    host_only: bool = False
    note: str | None = None

    def to_json(self) -> dict[str, object]:
        """Absent fields (and `hostOnly` false) are left out."""
        out = {
            "kind": self.kind,
            "where": self.where,
            "runs": self.runs,
            "point": self.point,
            "shell": self.shell,
            "timeoutS": self.timeout_s,
            "refused": self.refused,
            "hostOnly": self.host_only or None,
            "note": self.note,
        }
        return {k: v for k, v in out.items() if v is not None}


def _q(text: object) -> str:
    """Untrusted text shown on one line."""
    return escape_untrusted(str(text))


def _argv(parts: Sequence[object]) -> str:
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
_CODE_FLAGS = ("-c", "-e", "-E", "--eval", "-p", "-r")
# Wrappers that run their first non-option argument as a program.
_WRAPPERS = frozenset(("env", "nice", "nohup", "timeout", "stdbuf", "setsid", "command", "exec"))
_PY_VERSION = re.compile(r"^(python|pypy)[0-9.]*\Z")
# A wrapper's options, VAR=value assignments and (timeout, nice) numbers.
_WRAPPER_ARG = re.compile(r"-.*|.*=.*|[0-9.]+[smhd]?", re.DOTALL)


def interpreter_of(binary: object, args: Sequence[object]) -> str | None:
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
            while i < len(words) and _WRAPPER_ARG.fullmatch(words[i]):
                i += 1
            continue
        rest = words[i + 1 :]
        if base in _SHELLS or name in _SHELLS:
            flag = next((w for w in rest if w.startswith("-") and "c" in w[1:]), None)
        elif base in _INTERPRETERS or name in _INTERPRETERS or _PY_VERSION.match(name):
            flag = next((w for w in rest if w in _CODE_FLAGS), None)
        else:
            return None
        return f"{name} {flag}" if flag else name
    return None


def _spawn(kind: str, where: str, invoke: Mapping[str, Any], how: str) -> Surface:
    """A surface that spawns `invoke`'s `binary args…` with no shell, or says loudly that the
    program is itself a shell or interpreter."""
    binary, args = invoke.get("binary", "?"), _list(invoke.get("args"))
    found = interpreter_of(binary, args)
    note = (
        "no shell"
        if found is None
        else f"SHELL: runs {_q(found)}, an interpreter that executes its arguments as code"
    )
    runs = f"{_argv([binary, *args])} ({note}; {how})"
    return Surface(kind, where, runs, shell=found is not None)


def capability_surfaces(data: Mapping[str, object], *, flavor: str = "gsd") -> list[Surface]:
    """Every surface of one manifest (its JSON, fragments materialised or not), in the order
    of its sections."""
    sections: tuple[tuple[str, bool, Callable[[Mapping[str, Any], str], list[Surface]]], ...] = (
        ("steps", True, lambda step, where: _step_surfaces(step, where, flavor)),
        ("contributions", True, _contribution_surfaces),
        ("gates", True, _gate_surfaces),
        ("taskContentResolver", False, _resolver_surfaces),
        ("reviewer", False, _reviewer_surfaces),
        ("hooks", True, _host_hook_surfaces),
        ("commands", True, _command_surfaces),
        ("runtime", False, _runtime_surfaces),
    )
    out: list[Surface] = []
    for key, listed, surfaces in sections:
        value = data.get(key)
        if listed:
            for i, entry in enumerate(_items(value)):
                out += surfaces(entry, f"$.{key}[{i}]")
        elif isinstance(value, Mapping):
            out += surfaces(value, f"$.{key}")
    return out


def _items(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _point(entry: Mapping[str, Any]) -> str | None:
    point = entry.get("point")
    return point if isinstance(point, str) else None


def _seconds(ms: object) -> float | None:
    return ms / 1000 if isinstance(ms, (int, float)) else None


def _contribution_surfaces(con: Mapping[str, Any], where: str) -> list[Surface]:
    runs = f"injects text into the {_q(con.get('into'))} role's context (no process)"
    note = "text from the capability reaches an agent's prompt"
    return [Surface("contribution", f"{where}.fragment", runs, point=_point(con), note=note)]


def _resolver_surfaces(tcr: Mapping[str, Any], where: str) -> list[Surface]:
    invoke = _mapping(tcr.get("invoke"))
    how = 'cwd = the project; "{{id}}" = the task\'s tracker id'
    spawn = _spawn("taskContentResolver", f"{where}.invoke", invoke, how)
    return [
        replace(
            spawn,
            point="execute:task",
            timeout_s=_seconds(invoke.get("timeoutMs")),
            note=f"tracker-ids with prefix {_q(tcr.get('trackerPrefix'))}",
        )
    ]


def _host_hook_surfaces(hook: Mapping[str, Any], where: str) -> list[Surface]:
    matcher = f" matching {_q(hook['matcher'])}" if hook.get("matcher") else ""
    runs = f"script {_q(hook.get('script'))} on host event {_q(hook.get('event'))}{matcher}"
    note = (
        "a host lifecycle hook: installed into an agent host's settings; looprail itself never "
        "runs it"
    )
    return [Surface("host-hook", f"{where}.script", runs, host_only=True, note=note)]


def _command_surfaces(cmd: Mapping[str, Any], where: str) -> list[Surface]:
    subs = cmd.get("subcommands")
    subs_text = f" ({', '.join(_q(s) for s in subs)})" if isinstance(subs, list) else ""
    runs = (
        f"module {_q(cmd.get('module'))} (router {_q(cmd.get('router'))}) serving "
        f"`<tool> {_q(cmd.get('family'))} …`{subs_text}"
    )
    note = "loaded by a host tool; looprail itself never loads it"
    return [Surface("command-family", where, runs, host_only=True, note=note)]


def _step_surfaces(step: Mapping[str, Any], base: str, flavor: str) -> list[Surface]:
    ref = _mapping(step.get("ref"))
    point = _point(step)
    note = None
    if step.get("supportsReviewerLanes") is True:
        note = "opts into reviewer lanes (`review-lane dispatch-step` may run its lanes)"
    if isinstance(ref.get("skill"), str):
        skill = _q(f"{flavor}-{ref['skill']}")
        runs = f"skill {skill}: {LOOPRAIL_DIR}/skills/{skill} (or the host's skill)"
        return [Surface("step.skill", f"{base}.ref.skill", runs, point=point, note=note)]
    if isinstance(ref.get("agent"), str):
        agent = _q(ref["agent"])
        runs = f"agent {agent}: {LOOPRAIL_DIR}/agents/{agent} (or the host's subagent)"
        return [Surface("step.agent", f"{base}.ref.agent", runs, point=point, note=note)]
    command = ref.get("command")
    if command is None:
        runs = "no skill, agent or command"
        return [Surface("step", f"{base}.ref", runs, point, refused="no ref")]
    where = f"{base}.ref.command"
    if not (isinstance(command, str) and COMMAND_GRAMMAR.match(command)):
        runs = f"command {_q(command)!s}"
        return [Surface("step.command", where, runs, point=point, refused=_GRAMMAR_REFUSAL)]
    words = command.split(" ")
    runs = (
        f"{LOOPRAIL_DIR}/commands/{_argv([words[0]])} "
        f"{_argv([*words[1:], '--phase', '<N>', '--raw'])} "
        f"(or `<host tool> {command} --phase <N> --raw`); no shell"
    )
    return [Surface("step.command", where, runs, point=point, note=note)]


def _gate_surfaces(gate: Mapping[str, Any], base: str) -> list[Surface]:
    check = _mapping(gate.get("check"))
    point = _point(gate)
    out: list[Surface] = []
    if "query" in check:
        out.append(_query_surface(check["query"], f"{base}.check.query", point, gate))
    if "predicate" in check:
        out.append(_predicate_surface(check["predicate"], f"{base}.check.predicate", point))
    if "agentVerdict" in check:
        ref = _q(_mapping(check["agentVerdict"]).get("ref"))
        runs = f"agent {ref}: {LOOPRAIL_DIR}/agents/{ref} asked for a verdict (advisory)"
        out.append(Surface("gate.agentVerdict", f"{base}.check.agentVerdict", runs, point))
    return out


def _query_surface(
    query: object, where: str, point: str | None, gate: Mapping[str, Any]
) -> Surface:
    if not (isinstance(query, str) and QUERY_GRAMMAR.match(query)):
        return Surface("gate.query", where, f"query {_q(query)}", point, refused=_QUERY_REFUSAL)
    words = query.split(" ")
    args = " ".join(_SHOWN_ARGS[n] for n in query_args(point))
    check = " ".join(filter(None, [f"{LOOPRAIL_DIR}/checks/{_argv([words[0]])}", _argv(words[1:])]))
    blocking = "blocking" if gate.get("blocking") is True else "advisory"
    runs = f"{check} {args} (or `<host tool> check {query} {args} --raw`); no shell; {blocking}"
    return Surface("gate.query", where, runs, point)


def _predicate_surface(predicate: object, where: str, point: str | None) -> Surface:
    if not isinstance(predicate, Mapping):
        return Surface("gate.predicate", where, "malformed predicate", point, refused="not run")
    kind = predicate.get("kind")
    label = f"gate.predicate.{kind}" if isinstance(kind, str) else "gate.predicate"
    spec = PREDICATES.get(kind) if isinstance(kind, str) else None
    if spec is None:
        known = ", ".join(PREDICATE_KINDS)
        refused = f"unknown predicate kind (known: {known}); never run"
        return Surface(label, where, f"predicate kind {_q(kind)}", point, refused=refused)
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


def _reviewer_surfaces(reviewer: Mapping[str, Any], where: str) -> list[Surface]:
    lane = f"lane {_q(reviewer.get('slug'))}"
    out = [replace(_probe_surface(_mapping(reviewer.get("probe")), f"{where}.probe"), note=lane)]
    invoke = _mapping(reviewer.get("invoke"))
    if reviewer.get("transport") == "spawn":
        channel = invoke.get("promptChannel")
        how = f"prompt via {_q(channel)}; output via {_q(invoke.get('outputChannel'))}"
        flags = ", ".join(_q(f) for f in reviewer.get("flags") or ())
        floor = reviewer.get("timeoutFloorMs")
        timeout_s = floor / 1000 if isinstance(floor, (int, float)) and floor > 0 else None
        spawn = _spawn("reviewer.invoke", f"{where}.invoke", invoke, how)
        spawn = replace(spawn, timeout_s=timeout_s, note=f"{lane}, flags {flags}")
        refused = "promptChannel 'none' cannot take the scoped prompt; never run"
        out.append(replace(spawn, refused=refused) if channel == "none" else spawn)
    else:
        runs = (
            f"{_q(reviewer.get('transport'))} transport to "
            f"{_q(invoke.get('defaultHost'))}{_q(invoke.get('path') or '')}"
        )
        refused = "unsupported transport; never run"
        out.append(Surface("reviewer.invoke", f"{where}.invoke", runs, refused=refused, note=lane))
    for i, binary in enumerate(reviewer.get("requiresBinaries") or ()):
        runs = f"looks up {_q(binary)} on PATH (no process)"
        out.append(Surface("reviewer.requires", f"{where}.requiresBinaries[{i}]", runs, note=lane))
    return out


def _probe_surface(probe: Mapping[str, Any], where: str) -> Surface:
    kind = probe.get("kind")
    if kind == "command-exists":
        runs = f"looks up {_q(probe.get('binary'))} on PATH (no process)"
        return Surface("reviewer.probe", where, runs)
    if kind == "command-capability":
        runs = (
            f"{_argv([probe.get('binary', '?'), '--help'])} (no shell; looks for "
            f"{_q(probe.get('needle'))} in its output)"
        )
        return Surface("reviewer.probe", where, runs, timeout_s=_seconds(probe.get("timeoutMs")))
    runs = f"{_q(kind)} probe: looprail makes no network requests; the lane is unavailable"
    return Surface("reviewer.probe", where, runs, refused="never run")


def _runtime_surfaces(value: object, where: str, depth: int = 0) -> list[Surface]:
    """Commands named anywhere in a runtime body (`orchestratorExec`, …): host metadata."""
    if depth > 16:
        return []
    out: list[Surface] = []
    if isinstance(value, Mapping):
        exe = value.get("command") if isinstance(value.get("command"), str) else None
        exe = exe or (value.get("binary") if isinstance(value.get("binary"), str) else None)
        if exe:
            runs = _argv([exe, *_list(value.get("args"))])
            note = "declared for agent hosts; looprail itself never runs it"
            out.append(Surface("runtime.exec", where, runs, host_only=True, note=note))
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


def native_surfaces(hooks: Sequence[NativeHook]) -> list[Surface]:
    """Every `when`, `shell` and Action of native hooks."""
    out: list[Surface] = []
    for hook in hooks:
        base, entry = json_path((hook.section, hook.name)), hook.entry
        off = "" if entry.default else " (off unless enabled)"
        label = f"hook {_q(hook.ref)}{off}"
        for kind, command in (("when", entry.when), ("shell", entry.shell)):
            if command is not None:
                where = f"{base}.{kind}"
                out.append(_shell_surface(f"native.{kind}", where, command, entry, label))
        if entry.action is not None:
            runs = f"Action {entry.action.type} (no process)"
            note = f"hook {_q(hook.ref)} on {_q(entry.event)}{off}"
            out.append(Surface("native.action", f"{base}.action", runs, entry.event, note=note))
    return out


def _shell_surface(kind: str, where: str, command: str, hook: HookEntry, label: str) -> Surface:
    if command in ("true", "false"):
        runs = f"{command} (answered without a process)"
        return Surface(kind, where, runs, point=hook.event, note=label)
    runs = f"/bin/sh -c {_argv([command])}"
    timeout_s = hook.timeout_ms / 1000
    return Surface(kind, where, runs, hook.event, shell=True, timeout_s=timeout_s, note=label)
