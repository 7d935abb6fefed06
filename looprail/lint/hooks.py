"""Gate and step findings: `when` never true, query and command grammar, missing executables,
predicates."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from looprail.hooks.checks import (
    PREDICATE_KINDS,
    PREDICATES,
    CheckContext,
    Verdict,
    evaluate_predicate,
    validate_command,
    validate_query,
)
from looprail.layout import LOOPRAIL_DIR
from looprail.runtime.local import resolve_host_tool

if TYPE_CHECKING:
    pass


from looprail.lint.declarations import _cap_active, _Decl, _declarations, _when_true
from looprail.lint.findings import Finding, Severity
from looprail.lint.inputs import LintInput

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
    return validate_command(value)


def _query_grammar(value: Any) -> bool:
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
                        fix=f"add an executable {LOOPRAIL_DIR}/agents/{ref}",
                    )
                )
    return out


def _query_target(data: LintInput, d: _Decl, word: str, severe: Severity) -> list[Finding]:
    if data.host_tool is not None:
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
            fix=f"add an executable {LOOPRAIL_DIR}/checks/{word} that prints "
            '{"block": false, "message": ""}, or run with --host-tool',
        )
    ]


def _predicate(
    data: LintInput, d: _Decl, predicate: Any, blocking: bool, severe: Severity
) -> list[Finding]:
    path = f"{d.path}.check.predicate"
    if not isinstance(predicate, Mapping):
        return []  # manifest validation already refuses it

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
                fix=f"add an executable {LOOPRAIL_DIR}/{folder}/{name}",
            )
        )
    return out
