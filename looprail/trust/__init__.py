"""The trust layer: what a user has agreed to run, and what could run.

- `looprail.trust.store`: the consent store (content hashes of project capabilities and the
  project `hooks.json`); its public names are re-exported here.
- `looprail.trust.audit`: what a capability or hooks file can run (read before consenting).
- `looprail.trust.consent`: the consent workflow (`plan_consent` + `commit_consent`).
- `looprail.trust.reviewer`: the reviewer lanes.

This package is on the `loop render-hooks` hot path (`load_compiled`): it imports no trust module
at import time; `store` loads on first use of one of its names, or when a set has project
capabilities to apply consent to (a warm call without them never reads the consent store).
"""

from __future__ import annotations

import os

from looprail._lazy import lazy_exports
from looprail.hooks import compiled as hooks_compiled

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names, typed for checkers; at run time `__getattr__` loads them
    from collections.abc import Iterable, Mapping

    from looprail.hooks.capset import CapabilitySet
    from looprail.trust.store import CHANGED as CHANGED
    from looprail.trust.store import HOOKS_FILE as HOOKS_FILE
    from looprail.trust.store import MAX_FOLDER_BYTES as MAX_FOLDER_BYTES
    from looprail.trust.store import MAX_FOLDER_FILES as MAX_FOLDER_FILES
    from looprail.trust.store import MAX_HOOKS_FILE_BYTES as MAX_HOOKS_FILE_BYTES
    from looprail.trust.store import NO_CONSENT as NO_CONSENT
    from looprail.trust.store import PROJECT_ORIGIN as PROJECT_ORIGIN
    from looprail.trust.store import STORE_VERSION as STORE_VERSION
    from looprail.trust.store import TrustError as TrustError
    from looprail.trust.store import apply_consent as apply_consent
    from looprail.trust.store import consent_record as consent_record
    from looprail.trust.store import consent_state as consent_state
    from looprail.trust.store import consented as consented
    from looprail.trust.store import copy_folder as copy_folder
    from looprail.trust.store import folder_hash as folder_hash
    from looprail.trust.store import grant as grant
    from looprail.trust.store import hooks_bytes_consented as hooks_bytes_consented
    from looprail.trust.store import hooks_hash as hooks_hash
    from looprail.trust.store import hooks_path as hooks_path
    from looprail.trust.store import hooks_state as hooks_state
    from looprail.trust.store import is_trusted as is_trusted
    from looprail.trust.store import project_key as project_key
    from looprail.trust.store import revoke as revoke
    from looprail.trust.store import store_path as store_path

_EXPORTS = {
    "CHANGED": "looprail.trust.store",
    "HOOKS_FILE": "looprail.trust.store",
    "MAX_FOLDER_BYTES": "looprail.trust.store",
    "MAX_FOLDER_FILES": "looprail.trust.store",
    "MAX_HOOKS_FILE_BYTES": "looprail.trust.store",
    "NO_CONSENT": "looprail.trust.store",
    "PROJECT_ORIGIN": "looprail.trust.store",
    "STORE_VERSION": "looprail.trust.store",
    "TrustError": "looprail.trust.store",
    "apply_consent": "looprail.trust.store",
    "consent_record": "looprail.trust.store",
    "consent_state": "looprail.trust.store",
    "consented": "looprail.trust.store",
    "copy_folder": "looprail.trust.store",
    "folder_hash": "looprail.trust.store",
    "grant": "looprail.trust.store",
    "hooks_bytes_consented": "looprail.trust.store",
    "hooks_hash": "looprail.trust.store",
    "hooks_path": "looprail.trust.store",
    "hooks_state": "looprail.trust.store",
    "is_trusted": "looprail.trust.store",
    "project_key": "looprail.trust.store",
    "revoke": "looprail.trust.store",
    "store_path": "looprail.trust.store",
}

__all__ = sorted([*_EXPORTS, "load_compiled"])
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)


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
    # not at the top: called only for a set with project capabilities (the consent store)
    from looprail.trust.store import apply_consent

    return apply_consent(caps, home=home, env=env)
