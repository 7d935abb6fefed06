"""Native hooks files: where they live, merging the global and project catalogs, and loading
the enabled set (an invalid file activates none of its entries and yields one warning)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path

from looprail import layout
from looprail.hooks.native.models import CatalogEntry, HooksFile, NativeHook, NativeHookSet
from looprail.hooks.native.parsing import _nesting_issues, read_hooks_file
from looprail.runtime.process import escape_untrusted


def global_hooks_path(home: Path | None = None) -> Path:
    """The user's own `hooks.json`, in looprail's home folder."""
    return Path(home if home is not None else layout.looprail_home()) / layout.HOOKS_FILE


def project_hooks_path(project: str | Path) -> Path:
    """The project's `.looprail/hooks.json`."""
    return Path(layout.project_path(project, layout.HOOKS_FILE))


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
    for item in catalog:
        on = item.entry.default if chosen is None else item.ref in chosen
        if not on:
            continue
        if isinstance(item, NativeHook):
            if item.ref not in hooks:
                hooks[item.ref] = item
                via[item.ref] = "default" if chosen is None else "enabled"
            continue
        for ref in item.entry.preset:
            target = by_ref.get(ref)
            if isinstance(target, NativeHook) and ref not in hooks:
                hooks[ref] = target
                via[ref] = item.ref
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
    """Load the effective native hooks of `project`; an invalid file contributes no entries and
    exactly one line to `.warnings`, never an exception. The project file is read only when
    `trusted` (a bool, or a predicate of the project folder) says yes. `home` is looprail's
    per-user folder; `enabled` (refs) replaces the entries' `default` flags when given."""
    project = Path(project)
    global_path = global_hooks_path(Path(home) if home is not None else None)
    project_path = project_hooks_path(project)
    warnings: list[str] = []

    files: list[HooksFile] = [read_hooks_file(global_path, scope="global")]
    # A project folder that is the home folder has one file, read once as the global one.
    if not _same_file(global_path, project_path) and project_path.exists():
        read = HooksFile(project_path, "project", "untrusted")
        if _is_trusted(trusted, project, warnings):
            read = read_hooks_file(project_path, scope="project", accept=accept_project_bytes)
        if read.status == "untrusted":
            warnings.append(
                f"{project_path}: not read because the project is not trusted; "
                "its native hooks are inactive"
            )
        files.append(read)

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
