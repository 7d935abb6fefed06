"""The trust layer: what a user has agreed to run, and what could run.

- `looprail.trust.store`: the consent store (content hashes of project capabilities and the
  project `hooks.json`); its public names are re-exported here.
- `looprail.trust.audit`: what a capability or hooks file can run (read before consenting).
- `looprail.trust.consent`: the consent workflow (`plan_consent` + `commit_consent`).
- `looprail.trust.reviewer`: the reviewer lanes.

This package is on the `loop render-hooks` hot path (`apply_consent`, `load_compiled`): it
imports only `store` (itself light: `os` and `json`); the other modules load when imported.
"""

from __future__ import annotations

from looprail.trust.store import (
    CHANGED,
    HOOKS_FILE,
    MAX_FOLDER_BYTES,
    MAX_FOLDER_FILES,
    MAX_HOOKS_FILE_BYTES,
    NO_CONSENT,
    PROJECT_ORIGIN,
    STORE_VERSION,
    TrustError,
    apply_consent,
    consent_record,
    consent_state,
    consented,
    copy_folder,
    folder_hash,
    grant,
    hooks_bytes_consented,
    hooks_hash,
    hooks_path,
    hooks_state,
    is_trusted,
    load_compiled,
    project_key,
    revoke,
    store_path,
)

__all__ = [
    "CHANGED",
    "HOOKS_FILE",
    "MAX_FOLDER_BYTES",
    "MAX_FOLDER_FILES",
    "MAX_HOOKS_FILE_BYTES",
    "NO_CONSENT",
    "PROJECT_ORIGIN",
    "STORE_VERSION",
    "TrustError",
    "apply_consent",
    "consent_record",
    "consent_state",
    "consented",
    "copy_folder",
    "folder_hash",
    "grant",
    "hooks_bytes_consented",
    "hooks_hash",
    "hooks_path",
    "hooks_state",
    "is_trusted",
    "load_compiled",
    "project_key",
    "revoke",
    "store_path",
]
