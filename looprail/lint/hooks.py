"""Gate and step findings: `when` never true, query and command grammar, missing executables,
predicates."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping

from looprail.hooks.gates.checks import (
    PREDICATE_KINDS,
    PREDICATES,
    CheckContext,
    Verdict,
    evaluate_predicate,
    validate_command,
    validate_query,
)
from looprail.layout import LOOPRAIL_DIR
from looprail.lint.declarations import _cap_active, _Decl, _declarations, _when_true
from looprail.lint.findings import Finding, Severity, finding
from looprail.lint.inputs import LintInput
from looprail.runtime.local import resolve_host_tool


def _hooks(data: LintInput) -> Iterator[Finding]:
    for d in _declarations(data):
        if not _cap_active(data, d.cap_id):
            continue  # reported once as capability-inactive / untrusted
        when = d.entry.get("when")
        if when is not None and not _when_true(data, when):
            gate = d.group == "gates"
            yield finding(
                "gate-never-runs" if gate else "hook-never-runs",
                d.file,
                f"{d.name} never runs: `when` key {when!r} is not true under the current "
                "config (nor by its default)",
                f"set {when!r} to true in .planning/config.json, or remove the {d.kind}",
                path=f"{d.path}.when",
            )
            continue  # nothing else about it matters while it cannot run
        if d.group == "gates":
            yield from _gate(data, d)
        elif d.group == "steps":
            yield from _step(data, d)


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
    return fixed if fixed != value and validate_query(fixed) else ""


def _gate(data: LintInput, d: _Decl) -> Iterator[Finding]:
    check = d.entry.get("check") or {}
    blocking = d.entry.get("blocking") is True
    # A check error stops the loop only when the gate blocks or halts on one.
    severe: Severity = (
        "error" if blocking or d.entry.get("onError") in ("halt", "fail") else "warning"
    )
    if "query" in check:
        yield from _query(data, d, check["query"], severe)
    elif "predicate" in check:
        yield from _predicate(data, d, check["predicate"], blocking, severe)
    elif "agentVerdict" in check:
        ref = (check.get("agentVerdict") or {}).get("ref")
        why = data.probe.executable("agents", ref) if isinstance(ref, str) else None
        if why is not None:
            yield finding(
                "agent-missing",
                d.file,
                f"{d.name}: {why}, so this advisory gate can never deliver a verdict",
                f"add an executable {LOOPRAIL_DIR}/agents/{ref}",
                path=f"{d.path}.check.agentVerdict.ref",
            )


def _query(data: LintInput, d: _Decl, query: str, severe: Severity) -> Iterator[Finding]:
    path = f"{d.path}.check.query"
    if not validate_query(query):
        better = _query_fix(str(query))
        yield finding(
            "query-grammar",
            d.file,
            f"{d.name}: query {query!r} fails the grammar (lowercase words [a-z][a-z0-9-]* "
            "joined by single dots, separated by single spaces), so it is never run (a check "
            f"error routed by onError {d.entry.get('onError')})",
            f"write it as `{better}`"
            if better
            else "use lowercase dotted words separated by single spaces",
            path=path,
            severity=severe,
        )
    elif data.host_tool is not None:
        found = resolve_host_tool(data.host_tool)
        if isinstance(found, str):
            yield finding(
                "check-missing",
                d.file,
                f"{d.name}: {found}, so the query can never run",
                f"install {data.host_tool} (a name on PATH or an absolute path) or run without "
                "--host-tool",
                path=path,
                severity=severe,
            )
    elif (why := data.probe.executable("checks", word := query.split(" ")[0])) is not None:
        effect = (
            "the loop halts here every time"
            if severe == "error"
            else "the gate is skipped every time (onError skip)"
        )
        yield finding(
            "check-missing",
            d.file,
            f"{d.name}: {why}, so the gate can never pass: {effect}",
            f"add an executable {LOOPRAIL_DIR}/checks/{word} that prints "
            '{"block": false, "message": ""}, or run with --host-tool',
            path=path,
            severity=severe,
        )


def _predicate(
    data: LintInput, d: _Decl, predicate: object, blocking: bool, severe: Severity
) -> list[Finding]:
    path = f"{d.path}.check.predicate"
    if not isinstance(predicate, Mapping):
        return []  # manifest validation already refuses it
    kind = predicate.get("kind")
    spec = PREDICATES.get(kind) if isinstance(kind, str) else None
    if spec is None:
        message = f"{d.name}: unknown predicate kind {kind!r}: the check always errors"
        fix = f"use one of {', '.join(PREDICATE_KINDS)}"
        return [finding("predicate-invalid", d.file, message, fix, path=f"{path}.kind")]
    missing = [
        f
        for f in (*spec.fields, *spec.values)
        if f not in predicate
        or (f in spec.fields and (not isinstance(predicate[f], str) or not predicate[f].strip()))
    ]
    if missing:
        message = (
            f"{d.name}: predicate {kind} needs {', '.join(map(repr, missing))}: the check always "
            "errors"
        )
        fix = f"add {', '.join(missing)} to the predicate"
        return [finding("predicate-invalid", d.file, message, fix, path=f"{path}.{missing[0]}")]
    if spec.shell:
        return _command_predicate(data, d, predicate[spec.fields[0]], blocking, severe)
    if not (spec.pure and blocking):
        return []
    # config-equals is pure: its verdict under the current config is known now.
    verdict = evaluate_predicate(predicate, CheckContext(data.project, config=data.config))
    if not (isinstance(verdict, Verdict) and verdict.block):
        return []
    message = f"{d.name} refuses under the current config: {verdict.message}"
    fix = f"set {predicate['key']} in .planning/config.json when the loop may pass this point"
    return [finding("gate-blocks", d.file, message, fix, path=path)]


def _command_predicate(
    data: LintInput, d: _Decl, command: str, blocking: bool, severe: Severity
) -> list[Finding]:
    path = f"{d.path}.check.predicate.command"
    try:
        first = _first_program(command)
    except ValueError as exc:
        message = f"{d.name}: the command is not valid shell ({exc})"
        fix = "fix the quoting of the command"
        return [finding("command-invalid", d.file, message, fix, path=path, severity=severe)]
    if first is None or any(c in first for c in "$`"):
        return []  # decided at run time
    if data.probe.runnable(first) if "/" in first else data.probe.on_path(first):
        return []
    gate = "blocking gate always refuses" if blocking else "advisory gate always complains"
    return [
        finding(
            "predicate-command-missing",
            d.file,
            f"{d.name}: {first!r} is not on PATH nor a shell builtin: the command exits 127, "
            f"so this {gate}",
            f"install {first}, or change the predicate's command",
            path=path,
            severity="error" if blocking else "warning",
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


def _step(data: LintInput, d: _Decl) -> Iterator[Finding]:
    ref = d.entry.get("ref") or {}
    if ref.get("skill"):
        folder, name, path = "skills", f"{data.flavor}-{ref['skill']}", f"{d.path}.ref.skill"
    elif ref.get("agent"):
        folder, name, path = "agents", ref["agent"], f"{d.path}.ref.agent"
    elif isinstance(command := ref.get("command"), str):
        path = f"{d.path}.ref.command"
        if not validate_command(command):
            better = _words_fix(command)
            yield finding(
                "command-grammar",
                d.file,
                f"{d.name}: command {command!r} fails the grammar "
                "^[a-z][a-z0-9-]*( [a-z][a-z0-9-]*)*$, so it is never run",
                f"use spaces: `{better}`" if better else "use lowercase words",
                path=path,
            )
            return
        if data.host_tool is not None:
            return
        folder, name = "commands", command.split(" ")[0]
    else:
        return
    why = data.probe.executable(folder, name)
    if why is not None:
        on_error = d.entry.get("onError") or "skip"
        effect = "the loop halts here" if on_error in ("halt", "fail") else "it is skipped"
        yield finding(
            f"{folder[:-1]}-missing",
            d.file,
            f"{d.name}: {why}; when it runs, {effect} (onError {on_error})",
            f"add an executable {LOOPRAIL_DIR}/{folder}/{name}",
            path=path,
        )
