"""Config and capability findings: failed manifests, registry warnings, inactive or unconsented
capabilities."""

from __future__ import annotations

from typing import TYPE_CHECKING

from looprail.hooks.startup import blockers
from looprail.layout import PLANNING_DIR

if TYPE_CHECKING:
    pass


from looprail.lint.declarations import _cap_active, _cap_file
from looprail.lint.findings import Finding
from looprail.lint.inputs import LintInput, _rel


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
                file=f"{PLANNING_DIR}/",
                message="no .planning/ folder: only capabilities were linted",
                fix="create .planning/ (config.json, phases/NN-name/) to lint config and plans",
            )
        )
    return out


def _capabilities(data: LintInput) -> list[Finding]:
    out = []
    reg = data.compiled
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

    missing = {str(r.path) for r in reg.missing_roots}
    untrusted_gates = set()
    for b in blockers(reg):
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
    for sh in reg.shadowed:
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
        if lc.consent is False and str(lc.manifest_file) in untrusted_gates:
            continue
        if lc.consent is False:
            out.append(
                Finding(
                    severity="info",
                    code="capability-untrusted",
                    file=file,
                    message=f"capability {cid!r} is not used: {lc.inactive_reason}",
                    fix="review it and run `looprail trust`",
                )
            )
        elif not _cap_active(data, cid):
            key = lc.activation_key
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
