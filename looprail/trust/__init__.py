"""The trust layer: what a user has agreed to run, and what could run.

- `looprail.trust.store`: the consent store (content hashes of project capabilities and the
  project `hooks.json`); its public names are re-exported here.
- `looprail.trust.audit`: what a capability or hooks file can run (read before consenting).
- `looprail.trust.consent`: the consent workflow (`plan_consent` + `commit_consent`).
- `looprail.trust.reviewer`: the reviewer lanes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from looprail.hooks import compiled as hooks_compiled
from looprail.hooks.capset import CapabilitySet
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


def load_compiled(
    project: str | os.PathLike[str],
    capability_dirs: Iterable[str | os.PathLike[str]] = (),
    *,
    env: Mapping[str, str] | None = None,
    home: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
) -> CapabilitySet:
    """The capability set with the user's consent applied: `hooks.compiled.load_compiled`
    given `store.apply_consent`. This is `looprail.load_compiled` and what every caller uses."""
    return hooks_compiled.load_compiled(
        os.fspath(project),
        tuple(os.fspath(d) for d in capability_dirs),
        env=env,
        home=None if home is None else os.fspath(home),
        use_cache=use_cache,
        consent=_consent,
    )


def _consent(caps: CapabilitySet, home: str | None, env: Mapping[str, str]) -> CapabilitySet:
    return apply_consent(caps, home=home, env=env)
