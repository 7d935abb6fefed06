"""Native hooks files: the models, loading, merging, validation and the JSON Schema.

Two files, both optional:
- global `~/.looprail/hooks.json` (the folder is `$LOOPRAIL_HOME` when that is set);
- project `<project>/.looprail/hooks.json`, read only when the user trusts the project.

Each file holds Sections: `local` and `owner/repo` (in the project file every `owner/repo`
Section must be listed in that file's `repos`). A Section maps entry names to Hooks or Presets;
`section/name` is the entry's reference. The project file's entry replaces the global entry with
the same reference whole (no field merge) and keeps its place in the catalog order.

Loading never raises for a bad file: an invalid file activates none of its entries and yields
one warning; `looprail hooks validate` lists every problem with its file and JSON path.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeGuard, cast

from looprail import layout
from looprail.errors import Issue
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
from looprail.runtime.process import escape_untrusted

Scope = Literal["global", "project"]
FileStatus = Literal["missing", "valid", "invalid", "untrusted"]

DEFAULT_TIMEOUT_MS = 5000
MAX_TIMEOUT_MS = 3_600_000
MAX_FILE_BYTES = 1 << 20
MAX_JSON_DEPTH = 64

SECTION_RE = re.compile(r"^[^/]+/[^/]+$")
# A Preset member: `local/name` or `owner/repo/name` (HooKit's REF_RE).
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


# --------------------------------------------------------------------------- models


@dataclass(frozen=True)
class NativeHook:
    """One Hook as configured. `shell` omitted in the file is the canonical `"true"`."""

    kind: ClassVar[str] = "hook"
    section: str
    name: str
    description: str
    event: str
    shell: str = "true"
    when: str | None = None
    filter: Filter = ()
    action: OwnedAction | None = None
    default: bool = True
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_selections: int | None = None
    scope: Scope = "global"
    file: Path | None = None

    @property
    def ref(self) -> str:
        return f"{self.section}/{self.name}"


@dataclass(frozen=True)
class Preset:
    """A named list of Hook references enabled together."""

    kind: ClassVar[str] = "preset"
    section: str
    name: str
    description: str
    refs: tuple[str, ...]
    default: bool = True
    scope: Scope = "global"
    file: Path | None = None

    @property
    def ref(self) -> str:
        return f"{self.section}/{self.name}"


CatalogEntry = NativeHook | Preset


@dataclass(frozen=True)
class HooksFile:
    """One hooks file as loaded: its entries when valid, every problem when not."""

    path: Path
    scope: Scope
    status: FileStatus
    entries: tuple[CatalogEntry, ...] = ()
    issues: tuple[Issue, ...] = ()
    repos: tuple[str, ...] = ()

    @property
    def hooks(self) -> tuple[NativeHook, ...]:
        return tuple(e for e in self.entries if isinstance(e, NativeHook))

    @property
    def presets(self) -> tuple[Preset, ...]:
        return tuple(e for e in self.entries if isinstance(e, Preset))


@dataclass(frozen=True)
class NativeHookSet:
    """The effective native hooks of one project: the merged catalog and, in evaluation order,
    the Enabled Hook Set. `enabled_via` maps each enabled hook's ref to why it is enabled:
    `"default"`, `"enabled"` (named explicitly) or the ref of the Preset that enabled it."""

    project: Path
    files: tuple[HooksFile, ...] = ()
    catalog: tuple[CatalogEntry, ...] = ()
    hooks: tuple[NativeHook, ...] = ()
    enabled_via: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def for_event(self, event: str) -> tuple[NativeHook, ...]:
        return tuple(h for h in self.hooks if h.event == event)

    def entry(self, ref: str) -> CatalogEntry | None:
        return next((e for e in self.catalog if e.ref == ref), None)


# --------------------------------------------------------------------------- locations


def looprail_home() -> Path:
    """looprail's per-user folder (see `layout.looprail_home`)."""
    return Path(layout.looprail_home())


def global_hooks_path(home: Path | None = None) -> Path:
    return (Path(home) if home is not None else looprail_home()) / layout.HOOKS_FILE


def project_hooks_path(project: str | Path) -> Path:
    return Path(layout.project_path(project, layout.HOOKS_FILE))


# --------------------------------------------------------------------------- parsing


def _parse_json(raw: bytes, file: str) -> tuple[Any, list[Issue]]:
    if len(raw) > MAX_FILE_BYTES:
        return None, [Issue(file, "$", f"file is larger than {MAX_FILE_BYTES} bytes")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Issue(file, "$", f"not UTF-8 (byte {exc.start})")]
    text = text.removeprefix("\ufeff")
    from looprail.jsonload import loads_strict

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
        raw = _read_regular_file(path, MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return HooksFile(path, scope, "missing")
    except OSError as exc:
        reason = f"cannot read ({exc.strerror or exc})"
        return HooksFile(path, scope, "invalid", issues=(Issue(file, "$", reason),))
    if accept is not None and not accept(raw):
        return HooksFile(path, scope, "untrusted")
    data, issues = _parse_json(raw, file)
    if issues:
        return HooksFile(path, scope, "invalid", issues=tuple(issues))
    return validate_hooks_document(data, file=path, scope=scope)


def _read_regular_file(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of a regular file. A FIFO or a device (a cloned project can link
    hooks.json to /dev/zero) is refused before it is read: reading it could never end."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file")
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit)


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


# --------------------------------------------------------------------------- merging + loading


def merge_catalog(files: Collection[HooksFile]) -> tuple[CatalogEntry, ...]:
    """Valid files in order (global first): a later entry with the same reference replaces the
    earlier one whole and keeps its position."""
    merged: dict[str, CatalogEntry] = {}
    for hooks_file in files:
        if hooks_file.status == "valid":
            for entry in hooks_file.entries:
                merged[entry.ref] = entry
    return tuple(merged.values())


def check_across_files(files: tuple[HooksFile, ...]) -> tuple[HooksFile, ...]:
    """Problems only the merged catalog shows (a Preset naming another file's Preset) make the
    file holding the referencing Preset invalid; repeated until the merge is clean."""
    files = tuple(files)
    while True:
        issues = _nesting_issues(merge_catalog(files))
        if not issues:
            return files
        bad = {issue.file for issue in issues}
        files = tuple(
            replace(
                f,
                status="invalid",
                entries=(),
                issues=(*f.issues, *(i for i in issues if i.file == str(f.path))),
            )
            if str(f.path) in bad and f.status == "valid"
            else f
            for f in files
        )


def enabled_hook_set(
    catalog: tuple[CatalogEntry, ...], enabled: Collection[str] | None = None
) -> tuple[tuple[NativeHook, ...], dict[str, str]]:
    """The hooks that run, in catalog order with Presets expanded in reference order, each once
    (first occurrence wins). Without `enabled`, entries whose `default` is true are enabled;
    with it (a collection of refs), exactly those entries are, whatever their `default`."""
    by_ref = {e.ref: e for e in catalog}
    chosen = set(enabled) if enabled is not None else None
    hooks: dict[str, NativeHook] = {}
    via: dict[str, str] = {}
    for entry in catalog:
        on = entry.default if chosen is None else entry.ref in chosen
        if not on:
            continue
        if isinstance(entry, NativeHook):
            if entry.ref not in hooks:
                hooks[entry.ref] = entry
                via[entry.ref] = "default" if chosen is None else "enabled"
            continue
        for ref in entry.refs:
            target = by_ref.get(ref)
            if isinstance(target, NativeHook) and ref not in hooks:
                hooks[ref] = target
                via[ref] = entry.ref
    return tuple(hooks.values()), via


def invalid_file_warning(hooks_file: HooksFile) -> str:
    first = hooks_file.issues[0]
    more = len(hooks_file.issues) - 1
    extra = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    where = f"{first.path}: " if first.path else ""
    return (
        f"{hooks_file.path}: invalid native hooks file, none of its hooks are active: "
        f"{where}{first.reason}{extra}; run `looprail hooks validate` for every problem"
    )


def load_native_hooks(
    project: str | Path,
    *,
    trusted: bool | Callable[[Path], bool],
    home: str | Path | None = None,
    enabled: Collection[str] | None = None,
    accept_project_bytes: Callable[[bytes], bool] | None = None,
) -> NativeHookSet:
    """Load the effective native hooks of `project`. Never raises for a bad file.

    `trusted` is a bool or a predicate called with the project folder; the project file is read
    only when it says yes. `home` is looprail's per-user folder (default `$LOOPRAIL_HOME` or
    `~/.looprail`). `enabled` (refs) replaces the entries' `default` flags when given.
    Every invalid file contributes no entries and exactly one line to `.warnings`."""
    project = Path(project)
    global_path = global_hooks_path(Path(home) if home is not None else None)
    project_path = project_hooks_path(project)
    warnings: list[str] = []

    files: list[HooksFile] = [read_hooks_file(global_path, scope="global")]
    if _same_file(global_path, project_path):
        pass  # the project folder is the home folder: one file, read once as the global one
    elif project_path.exists():
        read = (
            read_hooks_file(project_path, scope="project", accept=accept_project_bytes)
            if _is_trusted(trusted, project, warnings)
            else None
        )
        if read is not None and read.status != "untrusted":
            files.append(read)
        else:
            files.append(HooksFile(project_path, "project", "untrusted"))
            warnings.append(
                f"{project_path}: not read because the project is not trusted; "
                "its native hooks are inactive"
            )

    checked = check_across_files(tuple(files))
    warnings[:0] = [invalid_file_warning(f) for f in checked if f.status == "invalid"]
    catalog = merge_catalog(checked)
    hooks, via = enabled_hook_set(catalog, enabled)
    return NativeHookSet(
        project=project,
        files=checked,
        catalog=catalog,
        hooks=hooks,
        enabled_via=via,
        warnings=tuple(warnings),
    )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _is_trusted(trusted: bool | Callable[[Path], bool], project: Path, warnings: list[str]) -> bool:
    if isinstance(trusted, bool):
        return trusted
    try:
        return bool(trusted(project))
    except Exception as exc:  # a broken trust store must not open the door
        warnings.append(
            f"{project}: could not check project trust ({escape_untrusted(str(exc))}); "
            "treating it as untrusted"
        )
        return False


# --------------------------------------------------------------------------- JSON Schema


def hooks_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of hooks.json, for editors. `looprail hooks validate` is the
    authority: it also checks what a schema cannot say well (regular expressions compile, an
    Action's `code` can pair with its `outcome`, Preset members are not Presets)."""
    block_events = [name for name, spec in EVENTS.items() if spec.failure == "block"]
    scalar = {"type": ["string", "number", "boolean", "null"]}
    filter_value = {"anyOf": [scalar, {"type": "array", "items": scalar}]}
    regex_value = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    outcome_or_list = {
        "anyOf": [
            {"$ref": "#/$defs/outcome"},
            {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/outcome"}},
        ]
    }
    code = {"type": ["number", "null"]}

    def variant(kind: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        props = {
            "type": {"const": kind},
            "outcome": {
                **outcome_or_list,
                "description": "The owner's Hook Outcome(s) that select this Action.",
            },
            "code": {
                "anyOf": [code, {"type": "array", "minItems": 1, "items": code}],
                "description": "Narrows selection to the owner's exit code: pass has 0, a "
                "failure a non-zero code or null (timeout, could not start).",
            },
            **properties,
        }
        return {
            "type": "object",
            "required": ["type", "outcome", *required],
            "properties": props,
            "additionalProperties": False,
        }

    non_blank = {"type": "string", "pattern": r"\S"}
    message = variant(
        "message",
        {
            "message": {**non_blank, "description": "Static text, never interpolated."},
            "sendAs": {"enum": ["custom", "user"], "default": "custom"},
            "delivery": {"enum": ["steer", "followUp", "nextTurn"]},
            "triggerTurn": {"type": "boolean", "default": False},
        },
        ["message", "delivery"],
    )
    message["allOf"] = [
        {
            "if": {"required": ["sendAs"], "properties": {"sendAs": {"const": "user"}}},
            "then": {
                "properties": {"delivery": {"enum": ["steer", "followUp"]}},
                "not": {"required": ["triggerTurn"]},
            },
        },
        {
            "if": {"properties": {"delivery": {"const": "nextTurn"}}},
            "then": {"properties": {"triggerTurn": {"const": False}}},
        },
    ]
    hook = {
        "type": "object",
        "description": "A Hook: runs `when` then `shell` at `event` when `filter` matches.",
        "required": ["description", "event"],
        "anyOf": [{"required": ["shell"]}, {"required": ["action"]}],
        "properties": {
            "description": {"type": "string"},
            "event": {"enum": list(EVENT_NAMES)},
            "filter": {
                "type": "object",
                "description": "ANDed fields of the event candidate; strings are regular "
                "expressions, other scalars match exactly, arrays are any-of.",
                "additionalProperties": filter_value,
            },
            "when": {"type": "string", "description": "Precondition /bin/sh command."},
            "shell": {
                "type": "string",
                "description": "/bin/sh command: exit 0 passes, anything else is the event's "
                'failure kind. Omitted: the canonical "true".',
            },
            "action": {"$ref": "#/$defs/action"},
            "default": {"type": "boolean", "default": True},
            "timeoutMs": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_MS,
                "default": DEFAULT_TIMEOUT_MS,
            },
            "maxSelections": {
                "type": "integer",
                "minimum": 1,
                "description": "Loop guard: the Action is selected at most this many times per "
                "run.",
            },
        },
        "additionalProperties": False,
        "allOf": [
            {
                "if": {"properties": {"event": {"enum": block_events}}, "required": ["event"]},
                "then": {"properties": {"action": {"$ref": "#/$defs/blockEventAction"}}},
                "else": {"properties": {"action": {"$ref": "#/$defs/reportEventAction"}}},
            },
            {
                "if": {"properties": {"event": {"const": "hook_result"}}, "required": ["event"]},
                "then": {"properties": {"filter": {"$ref": "#/$defs/hookResultFilter"}}},
            },
            {"if": {"required": ["maxSelections"]}, "then": {"required": ["action"]}},
        ],
    }

    def outcomes_only(allowed: list[str]) -> dict[str, Any]:
        return {
            "properties": {
                "outcome": {
                    "anyOf": [
                        {"enum": allowed},
                        {"type": "array", "minItems": 1, "items": {"enum": allowed}},
                    ]
                }
            }
        }

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "looprail native hooks (hooks.json)",
        "description": "Global ~/.looprail/hooks.json and project .looprail/hooks.json: "
        "Sections `local` and `owner/repo` of named Hooks and Presets.",
        "type": "object",
        "properties": {
            "$schema": {"type": "string"},
            "repos": {
                "type": "array",
                "uniqueItems": True,
                "items": {"type": "string", "pattern": SECTION_RE.pattern},
                "description": "owner/repo Sections this (project) file may hold.",
            },
        },
        "patternProperties": {
            "^local$": {"$ref": "#/$defs/section"},
            SECTION_RE.pattern: {"$ref": "#/$defs/section"},
        },
        "additionalProperties": False,
        "$defs": {
            "outcome": {"enum": list(OUTCOMES)},
            "section": {
                "type": "object",
                "propertyNames": {"pattern": "^[^/\\u0000]+$"},
                "additionalProperties": {
                    "oneOf": [{"$ref": "#/$defs/hook"}, {"$ref": "#/$defs/preset"}]
                },
            },
            "hook": hook,
            "preset": {
                "type": "object",
                "description": "A Preset: enables the listed Hooks together.",
                "required": ["description", "preset"],
                "properties": {
                    "description": {"type": "string"},
                    "preset": {
                        "type": "array",
                        "uniqueItems": True,
                        "items": {"type": "string", "pattern": REF_RE.pattern},
                    },
                    "default": {"type": "boolean", "default": True},
                },
                "additionalProperties": False,
            },
            "action": {
                "description": "The owned Action; selected against the owner's own outcome and "
                "code, delivered best-effort as an Effect.",
                "oneOf": [
                    variant("interrupt", {}, []),
                    variant("shutdown", {"interrupt": {"type": "boolean", "default": False}}, []),
                    variant("compact", {"instructions": {"type": "string"}}, []),
                    message,
                    variant("emit-custom-event", {"name": non_blank, "data": {}}, ["name"]),
                ],
            },
            "blockEventAction": outcomes_only(["pass", "block"]),
            "reportEventAction": outcomes_only(["pass", "report"]),
            "hookResultFilter": {
                "type": "object",
                "properties": {
                    "event": regex_value,
                    "hookRef": regex_value,
                    "invocationId": regex_value,
                    "originEvent": regex_value,
                    "outcome": {
                        "anyOf": [
                            {"$ref": "#/$defs/outcome"},
                            {"type": "array", "items": {"$ref": "#/$defs/outcome"}},
                        ]
                    },
                    "code": {"anyOf": [code, {"type": "array", "items": code}]},
                },
                "additionalProperties": False,
            },
        },
    }
