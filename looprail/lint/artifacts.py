"""Artifact findings: a `consumes` that nothing produces in time, one only inactive producers
make, two producers of one artifact at one point."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from looprail.lint.declarations import _Decl, _declarations, _point_order, _runs
from looprail.lint.findings import Finding, finding
from looprail.lint.inputs import LintInput

# Host artifacts and the point from which they exist (reference validateConsumesGlobal).
HOST_ARTIFACTS: dict[str, str] = {
    "CONTEXT.md": "discuss:post",
    "PLAN.md": "plan:post",
    "SUMMARY.md": "execute:post",
    "UAT.md": "verify:post",
    "VERIFICATION.md": "verify:post",
}


def _artifacts(data: LintInput) -> Iterator[Finding]:
    order = _point_order()
    decls = [d for d in _declarations(data) if d.group in ("steps", "contributions")]
    producers: dict[str, list[_Decl]] = {}
    by_point: dict[tuple[str, str], list[_Decl]] = {}
    for d in decls:
        for art in d.entry.get("produces") or ():
            producers.setdefault(art, []).append(d)
            by_point.setdefault((d.point, art), []).append(d)
    for d in decls:
        for j, art in enumerate(d.entry.get("consumes") or ()):
            where = f"{d.path}.consumes[{j}]"
            yield from _consumed(data, d, where, art, producers.get(art, []), order)
    for (point, art), ds in by_point.items():
        if len(ds) > 1:
            yield finding(
                "duplicate-producer",
                ds[1].file,
                f"{art!r} is produced twice at {point} "
                f"({', '.join(f'{x.cap_id} {x.path}' for x in ds)})",
                "let one hook produce it, or name the artifacts apart",
                path=f"{ds[1].path}.produces",
            )


def _consumed(
    data: LintInput,
    d: _Decl,
    where: str,
    art: str,
    producers: Sequence[_Decl],
    order: Mapping[str, int],
) -> Iterator[Finding]:
    at = order[d.point]
    host = HOST_ARTIFACTS.get(art)
    if host is not None and order[host] <= at:
        return
    earlier = [p for p in producers if p != d and order[p.point] <= at]
    if earlier:
        if _runs(data, d) and not any(_runs(data, p) for p in earlier):
            yield finding(
                "consumes-inactive",
                d.file,
                f"{d.name} consumes {art!r}, but its producer ({earlier[0].cap_id} at "
                f"{earlier[0].point}) does not run under the current config",
                f"activate {earlier[0].cap_id}'s hook, or switch this one off too",
                path=where,
            )
        return
    later = [p for p in producers if order[p.point] > at]
    if d in producers:
        why = "it is its own output (a hook cannot consume what it produces)"
    elif host is not None:
        why = f"the host writes {art} only at {host}"
    elif later:
        why = f"it is produced only later ({later[0].cap_id} at {later[0].point})"
    else:
        why = "no host artifact or other hook produces it"
    yield finding(
        "consumes-unsatisfied",
        d.file,
        f"{d.name} consumes {art!r}, but {why}",
        f"consume it at {host or 'a later point'}, add a hook that produces it earlier, or drop "
        "it from consumes",
        path=where,
    )
