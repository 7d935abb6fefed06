"""Native hooks files: the models, loading, merging, validation and the JSON Schema.

This module re-exports the public names of `models`, `document`, `parsing` and `loading`.

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

from looprail.hooks.native.document import (
    HOOK_KEYS,
    PRESET_KEYS,
    REF_RE,
    SECTION_RE,
    hooks_json_schema,
)
from looprail.hooks.native.loading import (
    check_across_files,
    enabled_hook_set,
    global_hooks_path,
    invalid_file_warning,
    load_native_hooks,
    merge_catalog,
    project_hooks_path,
)
from looprail.hooks.native.models import (
    DEFAULT_TIMEOUT_MS,
    MAX_FILE_BYTES,
    MAX_JSON_DEPTH,
    MAX_TIMEOUT_MS,
    CatalogEntry,
    FileStatus,
    HooksFile,
    NativeHook,
    NativeHookSet,
    Preset,
    Scope,
)
from looprail.hooks.native.parsing import read_hooks_file, validate_hooks_document

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "HOOK_KEYS",
    "MAX_FILE_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_TIMEOUT_MS",
    "PRESET_KEYS",
    "REF_RE",
    "SECTION_RE",
    "CatalogEntry",
    "FileStatus",
    "HooksFile",
    "NativeHook",
    "NativeHookSet",
    "Preset",
    "Scope",
    "check_across_files",
    "enabled_hook_set",
    "global_hooks_path",
    "hooks_json_schema",
    "invalid_file_warning",
    "load_native_hooks",
    "merge_catalog",
    "project_hooks_path",
    "read_hooks_file",
    "validate_hooks_document",
]
