"""The text form of a report."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


from looprail.lint.findings import LintReport

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
