"""Native hooks files: reading one file and validating it (`document.HooksDocument`) into a
`HooksFile`, every problem with its file and JSON path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from looprail.errors import Issue, json_path
from looprail.fsutil import read_bounded
from looprail.hooks.native.document import (
    NESTED,
    HookEntry,
    HooksDocument,
    PresetEntry,
    hooks_words,
    nested_presets,
)
from looprail.hooks.native.models import (
    MAX_FILE_BYTES,
    MAX_JSON_DEPTH,
    CatalogEntry,
    HooksFile,
    NativeHook,
    Preset,
    Scope,
)
from looprail.jsonload import loads_file


def read_hooks_file(
    path: str | Path, *, scope: Scope, accept: Callable[[bytes], bool] | None = None
) -> HooksFile:
    """Read and validate one hooks file. Never raises: a missing file is `missing`, any problem
    makes it `invalid` with every issue listed. `accept`, when given, sees the exact bytes
    read before anything is parsed; False makes the file `untrusted` (consent is checked
    against what runs, not against an earlier look at the file)."""
    path = Path(path)
    file = str(path)
    try:
        raw = read_bounded(path, MAX_FILE_BYTES)
    except OSError as exc:
        reason = f"cannot read ({exc.strerror or exc})"
        return HooksFile(path, scope, "invalid", issues=(Issue(file, "$", reason),))
    if raw is None:
        return HooksFile(path, scope, "missing")
    if accept is not None and not accept(raw):
        return HooksFile(path, scope, "untrusted")
    data, problems = loads_file(raw, MAX_FILE_BYTES, MAX_JSON_DEPTH, column=True)
    if problems:
        issues = tuple(Issue(file, "$", why) for why in problems)
        return HooksFile(path, scope, "invalid", issues=issues)
    return validate_hooks_document(data, file=path, scope=scope)


def validate_hooks_document(data: object, *, file: str | Path, scope: Scope) -> HooksFile:
    """Validate a parsed hooks document (`document.HooksDocument`); every problem is reported
    with its JSON path. `scope="project"` adds the project-only rule (owner/repo Sections
    listed in `repos`)."""
    path = Path(file)
    try:
        document = HooksDocument.model_validate(data, context={"scope": scope})
    except ValidationError as exc:
        from looprail.hooks.manifest import pydantic_issues  # only for a bad file: it is heavy

        issues = tuple(pydantic_issues(exc, str(path), hooks_words(data)))
        return HooksFile(path, scope, "invalid", issues=issues)
    entries = tuple(
        _entry(section, name, entry, scope, path)
        for section, body in document.sections().items()
        for name, entry in body.items()
    )
    return HooksFile(path, scope, "valid", entries=entries)


def _entry(
    section: str, name: str, entry: HookEntry | PresetEntry, scope: Scope, path: Path
) -> CatalogEntry:
    if isinstance(entry, PresetEntry):
        return Preset(section, name, entry, scope, path)
    return NativeHook(section, name, entry, scope, path)


def _nesting_issues(catalog: tuple[CatalogEntry, ...]) -> list[Issue]:
    """A Preset member that is itself a Preset (`document.nested_presets`), across files."""
    presets = {e.ref: e for e in catalog if isinstance(e, Preset)}
    issues = []
    for ref, i, member in nested_presets({r: p.entry.preset for r, p in presets.items()}):
        preset = presets[ref]
        where = json_path((preset.section, preset.name, "preset", i))
        issues.append(Issue(str(preset.file), where, NESTED.format(json.dumps(member))))
    return issues
