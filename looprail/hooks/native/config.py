"""Native hooks files (`~/.looprail/hooks.json`, and a trusted project's `.looprail/hooks.json`):
the public names of `models`, `document`, `parsing` and `loading`, re-exported. Loading never
raises for a bad file (docs/native-hooks.md)."""

from __future__ import annotations

from looprail.hooks.native.document import (
    DEFAULT_TIMEOUT_MS,
    HOOK_KEYS,
    MAX_TIMEOUT_MS,
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
    MAX_FILE_BYTES,
    MAX_JSON_DEPTH,
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
