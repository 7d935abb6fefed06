"""Native hooks files: reading one file and validating it into a `HooksFile`, every problem
with its file and JSON path."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeGuard, cast

from looprail.errors import Issue
from looprail.fsutil import read_bounded
from looprail.hooks.native._jsonpath import item, member
from looprail.hooks.native.actions import OwnedAction, parse_action
from looprail.hooks.native.events import (
    EVENT_NAMES,
    EVENTS,
    HOOK_RESULT_EXACT_KEYS,
    HOOK_RESULT_FILTER_KEYS,
    OUTCOMES,
    EventSpec,
    unknown_event_message,
)
from looprail.hooks.native.filters import Filter, FilterValue, compile_pattern
from looprail.hooks.native.models import (
    DEFAULT_TIMEOUT_MS,
    MAX_FILE_BYTES,
    MAX_JSON_DEPTH,
    MAX_TIMEOUT_MS,
    CatalogEntry,
    HooksFile,
    NativeHook,
    Preset,
    Scope,
)
from looprail.jsonload import loads_strict

SECTION_RE = re.compile(r"^[^/]+/[^/]+$")
# A Preset member: `local/name` or `owner/repo/name` (docs/native-hooks.md, Presets).
REF_RE = re.compile(r"^local/[^/\x00]+$|^(?!local/)[A-Za-z0-9._-]+/[A-Za-z0-9._-]+/[^/\x00]+$")

HOOK_KEYS = (
    "description",
    "event",
    "filter",
    "when",
    "shell",
    "action",
    "default",
    "timeoutMs",
    "maxSelections",
)
PRESET_KEYS = ("description", "preset", "default")
_KEY_HINTS = {"timeout": "timeoutMs", "hook": "event", "command": "shell"}

# --------------------------------------------------------------------------- parsing


def _parse_json(raw: bytes, file: str) -> tuple[Any, list[Issue]]:
    if len(raw) > MAX_FILE_BYTES:
        return None, [Issue(file, "$", f"file is larger than {MAX_FILE_BYTES} bytes")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Issue(file, "$", f"not UTF-8 (byte {exc.start})")]
    text = text.removeprefix("\ufeff")

    try:
        value, duplicates = loads_strict(text)
    except json.JSONDecodeError as exc:
        return None, [
            Issue(file, "$", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        ]
    except ValueError as exc:
        return None, [Issue(file, "$", f"not valid JSON: {exc}")]
    except RecursionError:
        return None, [Issue(file, "$", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")]
    if duplicates:
        return None, [
            Issue(file, "$", f"duplicate key {json.dumps(k)}") for k in dict.fromkeys(duplicates)
        ]
    return value, []


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
    data, issues = _parse_json(raw, file)
    if issues:
        return HooksFile(path, scope, "invalid", issues=tuple(issues))
    return validate_hooks_document(data, file=path, scope=scope)


def validate_hooks_document(data: Any, *, file: str | Path, scope: Scope) -> HooksFile:
    """Validate a parsed hooks document; every problem is reported with its JSON path.
    `scope="project"` adds the project-only rule (owner/repo Sections listed in `repos`)."""
    path = Path(file)
    issues: list[Issue] = []

    def add(where: str, reason: str) -> None:
        issues.append(Issue(str(path), where, reason))

    if not isinstance(data, dict):
        add("$", "top level is not a JSON object")
        return HooksFile(path, scope, "invalid", issues=tuple(issues))

    if "$schema" in data and not isinstance(data["$schema"], str):
        add("$.$schema", "must be a string")
    repos = _check_repos(data.get("repos"), "repos" in data, add)

    entries: list[CatalogEntry] = []
    for section, body in data.items():
        if section in ("$schema", "repos"):
            continue
        where = member("$", section)
        if section != "local" and not SECTION_RE.fullmatch(section):
            add(
                where,
                f"section {json.dumps(section)} is not a valid source; "
                'expected "local" or owner/repo',
            )
            continue
        if scope == "project" and section != "local" and section not in repos:
            add(
                where,
                f'repository section {json.dumps(section)} is not declared in this file\'s "repos"',
            )
        if not isinstance(body, dict):
            add(where, f"section {json.dumps(section)} must be an object of named entries")
            continue
        for name, entry in body.items():
            entry_where = member(where, name)
            if not name or "/" in name or "\x00" in name:
                add(
                    entry_where,
                    f"invalid entry name {json.dumps(name)}; names must be non-empty and "
                    "contain neither / nor NUL",
                )
                continue
            if name in ("__proto__", "constructor", "prototype"):
                add(entry_where, f"forbidden entry name {json.dumps(name)}")
                continue
            parsed = _parse_entry(entry, section, name, entry_where, add)
            if parsed is not None:
                entries.append(replace(parsed, scope=scope, file=path))

    if not issues:
        issues += _nesting_issues(tuple(entries))
    if issues:
        return HooksFile(path, scope, "invalid", issues=tuple(issues), repos=repos)
    return HooksFile(path, scope, "valid", entries=tuple(entries), repos=repos)


def _check_repos(value: Any, present: bool, add: Callable[[str, str], None]) -> tuple[str, ...]:
    if not present:
        return ()
    if not isinstance(value, list):
        add("$.repos", "must be an array of unique owner/repo strings")
        return ()
    seen: list[str] = []
    for i, repo in enumerate(value):
        if not isinstance(repo, str) or not SECTION_RE.fullmatch(repo):
            add(item("$.repos", i), f"{json.dumps(repo)} is not an owner/repo string")
        elif repo in seen:
            add(item("$.repos", i), f"duplicate repository {json.dumps(repo)}")
        else:
            seen.append(repo)
    return tuple(seen)


def _parse_entry(
    entry: Any, section: str, name: str, where: str, add: Callable[[str, str], None]
) -> CatalogEntry | None:
    if not isinstance(entry, dict):
        add(where, "must be an object (a Hook or a Preset)")
        return None
    if "preset" in entry:
        return _parse_preset(entry, section, name, where, add)
    return _parse_hook(entry, section, name, where, add)


def _parse_preset(
    entry: dict[str, Any], section: str, name: str, where: str, add: Callable[[str, str], None]
) -> Preset | None:
    ok = True
    for key in entry:
        if key not in PRESET_KEYS:
            add(
                member(where, key),
                "not allowed on a Preset (a Preset has only "
                "description, preset and default; a Hook cannot have preset)",
            )
            ok = False
    description = entry.get("description")
    if not isinstance(description, str):
        add(member(where, "description"), "is required and must be a string")
        ok = False
    refs = entry["preset"]
    if not isinstance(refs, list):
        add(member(where, "preset"), "must be an array of hook references")
        ok = False
        refs = []
    for i, ref in enumerate(refs):
        ref_where = item(member(where, "preset"), i)
        if not isinstance(ref, str) or not REF_RE.fullmatch(ref):
            add(
                ref_where,
                f"{json.dumps(ref)} is not a hook reference (local/name or owner/repo/name)",
            )
            ok = False
        elif ref in refs[:i]:
            add(ref_where, f"duplicate reference {json.dumps(ref)}")
            ok = False
    default = entry.get("default", True)
    if not isinstance(default, bool):
        add(member(where, "default"), "must be true or false")
        ok = False
    if not ok:
        return None
    return Preset(section, name, cast(str, description), tuple(refs), default)  # ok: a str


def _parse_hook(
    entry: dict[str, Any], section: str, name: str, where: str, report: Callable[[str, str], None]
) -> NativeHook | None:
    failures = 0

    def add(path: str, reason: str) -> None:
        nonlocal failures
        failures += 1
        report(path, reason)

    for key in entry:
        if key not in HOOK_KEYS:
            hint = f'; did you mean "{_KEY_HINTS[key]}"?' if key in _KEY_HINTS else ""
            add(member(where, key), f"unknown field (allowed: {', '.join(HOOK_KEYS)}){hint}")

    description = entry.get("description")
    if not isinstance(description, str):
        add(member(where, "description"), "is required and must be a string")

    spec: EventSpec | None = None
    event = entry.get("event")
    if "event" not in entry:
        add(member(where, "event"), f"is required; supported events: {', '.join(EVENT_NAMES)}")
    elif not isinstance(event, str) or event not in EVENTS:
        add(member(where, "event"), unknown_event_message(event))
    else:
        spec = EVENTS[event]

    for key in ("when", "shell"):
        if key in entry and not isinstance(entry[key], str):
            add(member(where, key), "must be a string (a /bin/sh command)")
    if "shell" not in entry and "action" not in entry:
        add(where, 'needs "shell" or "action" (a Hook without shell runs the canonical "true")')

    parsed_filter: Filter = ()
    if "filter" in entry:
        parsed_filter = _parse_filter(entry["filter"], spec, member(where, "filter"), add)

    action: OwnedAction | None = None
    if "action" in entry:
        action, problems = parse_action(entry["action"], spec, member(where, "action"))
        for problem_where, reason in problems:
            add(problem_where, reason)

    default = entry.get("default", True)
    if not isinstance(default, bool):
        add(member(where, "default"), "must be true or false")

    timeout_ms = entry.get("timeoutMs", DEFAULT_TIMEOUT_MS)
    if not _is_int(timeout_ms) or not 1 <= timeout_ms <= MAX_TIMEOUT_MS:
        add(member(where, "timeoutMs"), f"must be an integer from 1 to {MAX_TIMEOUT_MS}")

    max_selections = entry.get("maxSelections")
    if "maxSelections" in entry:
        if not _is_int(max_selections) or max_selections < 1:
            add(member(where, "maxSelections"), "must be a positive integer")
        elif "action" not in entry:
            add(member(where, "maxSelections"), 'guards an Action; this Hook has no "action"')

    if failures:
        return None
    return NativeHook(
        section=section,
        name=name,
        description=cast(str, description),  # no failures: both are checked strings
        event=cast(str, event),
        shell=entry.get("shell", "true"),
        when=entry.get("when"),
        filter=parsed_filter,
        action=action,
        default=default,
        timeout_ms=timeout_ms,
        max_selections=max_selections,
    )


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _parse_filter(
    value: Any, spec: EventSpec | None, where: str, add: Callable[[str, str], None]
) -> Filter:
    if not isinstance(value, dict):
        add(where, "must be an object of field → pattern or value")
        return ()
    hook_result = spec is not None and spec.name == "hook_result"
    out: list[tuple[str, FilterValue]] = []
    for key, expected in value.items():
        key_where = member(where, key)
        if hook_result and key not in HOOK_RESULT_FILTER_KEYS:
            add(
                key_where,
                f"not a hook_result filter field (allowed: {', '.join(HOOK_RESULT_FILTER_KEYS)})",
            )
            continue
        members = expected if isinstance(expected, list) else [expected]
        good = True
        for i, value_ in enumerate(members):
            value_where = item(key_where, i) if isinstance(expected, list) else key_where
            if hook_result and key in HOOK_RESULT_EXACT_KEYS:
                good &= _check_exact_selector(key, value_, value_where, add)
            elif hook_result and not isinstance(value_, str):
                add(value_where, "must be a regular expression string (or an array of them)")
                good = False
            elif not _is_scalar(value_):
                add(value_where, "must be a string, number, boolean or null (or an array of them)")
                good = False
            elif isinstance(value_, str):
                try:
                    compile_pattern(value_)
                except re.error as exc:
                    add(value_where, f"invalid regular expression {json.dumps(value_)}: {exc}")
                    good = False
        if good:
            out.append((key, tuple(expected) if isinstance(expected, list) else expected))
    return tuple(out)


def _check_exact_selector(
    key: str, value: Any, where: str, add: Callable[[str, str], None]
) -> bool:
    if key == "outcome":
        if value in OUTCOMES:
            return True
        add(where, f"{json.dumps(value)} is not an outcome (one of {', '.join(OUTCOMES)})")
        return False
    if value is None or (_is_scalar(value) and not isinstance(value, (str, bool))):
        return True
    add(where, f"{json.dumps(value)} is not an exit code (a number or null)")
    return False


def _nesting_issues(catalog: tuple[CatalogEntry, ...]) -> list[Issue]:
    """A Preset member that is itself a Preset is an error (nested Presets are not supported);
    a member that names nothing is fine (dangling, ignored at run time)."""
    by_ref = {e.ref: e for e in catalog}
    issues = []
    for entry in catalog:
        if not isinstance(entry, Preset):
            continue
        for i, ref in enumerate(entry.refs):
            if isinstance(by_ref.get(ref), Preset):
                where = item(member(member(member("$", entry.section), entry.name), "preset"), i)
                issues.append(
                    Issue(
                        str(entry.file),
                        where,
                        f"references Preset {json.dumps(ref)}; nested Presets are not supported",
                    )
                )
    return issues
