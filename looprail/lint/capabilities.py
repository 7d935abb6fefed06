"""Config and capability findings: failed manifests, registry warnings, inactive or unconsented
capabilities."""

from __future__ import annotations

import os
from collections.abc import Iterator

from looprail.hooks.startup import blockers
from looprail.layout import PLANNING_DIR, PROJECT_CONFIG_FILE
from looprail.lint.declarations import _cap_active, _cap_file
from looprail.lint.findings import Finding, finding
from looprail.lint.inputs import LintInput, _rel


def _config(data: LintInput) -> Iterator[Finding]:
    for refused in data.refusals:  # the rule `run` and `doctor` apply
        yield finding(
            "run-refused",
            refused.path or PROJECT_CONFIG_FILE,
            f"{refused}; `looprail run` refuses to start",
            "`looprail doctor` says what to do",
            refused.field or "looprail.agent",
        )
    if not data.has_planning:
        yield finding(
            "no-planning",
            f"{PLANNING_DIR}/",
            "no .planning/ folder: only capabilities were linted",
            "create .planning/ (config.json, phases/NN-name/) to lint config and plans",
        )


def _capabilities(data: LintInput) -> Iterator[Finding]:
    yield from _failed(data)
    untrusted_gates = set()
    for b in blockers(data.compiled):  # what `looprail run` refuses to start on
        if b.code == "capability-not-loaded":
            continue  # each issue is its own manifest-invalid finding
        if b.code == "capability-gates-untrusted":
            untrusted_gates.add(b.file)
        message = b.message + "; `looprail run` refuses to start"
        yield finding(b.code, _rel(b.file, data.project), message, b.fix, b.path, "error")
    yield from _registry_warnings(data)
    for cid, lc in data.compiled.capabilities.items():
        file = _cap_file(data, lc)
        if lc.consent is False:
            if lc.manifest_file not in untrusted_gates:
                message = f"capability {cid!r} is not used: {lc.inactive_reason}"
                fix = "review it and run `looprail trust`"
                yield finding("capability-untrusted", file, message, fix)
        elif not _cap_active(data, cid):
            key = lc.activation_key
            yield finding(
                "capability-inactive",
                file,
                f"capability {cid!r} is inactive: activationKey {key!r} is not true under the "
                "current config, so none of its hooks run",
                f"set {key!r} to true in .planning/config.json to use it",
                path="$.activationKey",
            )


def _failed(data: LintInput) -> Iterator[Finding]:
    for failed in data.compiled.failed:
        gates = (
            f"; its gates at {', '.join(failed.gate_points)} are not evaluated"
            if failed.gate_points
            else ""
        )
        remove = " (or remove the capability)" if failed.origin != "first-party" else ""
        for issue in failed.issues:
            file = _rel(issue.file, data.project)
            yield finding(
                "manifest-invalid",
                file,
                f"capability {failed.id!r} ({failed.origin}) not loaded: {issue.reason}{gates}",
                f"fix {issue.path} in {file}{remove}",
                path=issue.path,
            )


def _registry_warnings(data: LintInput) -> Iterator[Finding]:
    reg = data.compiled
    shadowed = {str(sh.source) for sh in reg.shadowed}
    for sh in reg.shadowed:
        yield finding(
            "shadowed-capability",
            _rel(os.path.join(sh.source, "capability.json"), data.project),
            sh.reason,
            f"give your copy its own id (not {sh.id!r}) to run it beside the "
            f"{sh.winner_origin} one, or remove it; a fix to {sh.id!r} itself belongs in the "
            f"{sh.winner_origin} set",
        )
    missing = {str(r.path) for r in reg.missing_roots}
    for w in reg.warnings:
        file = w.split(": ", 1)[0] if ": " in w else ""
        if (file in shadowed and " is shadowed by " in w) or file in missing:
            continue  # said above, plainly (or as capability-folder-missing)
        yield finding(
            "registry-warning",
            _rel(file, data.project) if file else "",
            w.split(": ", 1)[-1] if file else w,
            "remove or rename one of them, or drop the missing --capabilities folder",
        )
