"""The trust layer: what a user has agreed to run (`store`, the consent store, re-exported
here), what could run (`audit`), the consent workflow (`consent`) and the reviewer lanes."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from looprail.hooks import compiled as hooks_compiled
from looprail.hooks.capset import CapabilitySet
from looprail.trust.store import (
    CHANGED,
    NO_CONSENT,
    TrustError,
    apply_consent,
    consent_state,
    copy_folder,
    folder_hash,
    grant,
    hooks_bytes_consented,
    hooks_hash,
    hooks_state,
    is_trusted,
    revoke,
)

__all__ = [
    "CHANGED",
    "NO_CONSENT",
    "TrustError",
    "apply_consent",
    "consent_state",
    "copy_folder",
    "folder_hash",
    "grant",
    "hooks_bytes_consented",
    "hooks_hash",
    "hooks_state",
    "is_trusted",
    "load_compiled",
    "revoke",
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
        consent=apply_consent,
    )
