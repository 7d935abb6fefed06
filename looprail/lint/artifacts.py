"""Artifact findings: a `consumes` that nothing produces in time, one only inactive producers
make, two producers of one artifact at one point."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


from looprail.lint.declarations import _Decl, _declarations, _point_order, _runs
from looprail.lint.findings import Finding
from looprail.lint.inputs import LintInput

# Host artifacts and the point from which they exist (reference validateConsumesGlobal).
HOST_ARTIFACTS: dict[str, str] = {
    "CONTEXT.md": "discuss:post",
    "PLAN.md": "plan:post",
    "SUMMARY.md": "execute:post",
    "UAT.md": "verify:post",
    "VERIFICATION.md": "verify:post",
}


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
