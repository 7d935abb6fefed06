"""Consent: which capabilities, hooks file and agent settings of a project (all arrive with a
`git clone`) the user has seen audited and agreed to run, bound to their SHA-256: one changed
byte withdraws it. The store, `$LOOPRAIL_HOME/consent.json`, fails closed (docs/security.md,
"Consent").
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Mapping

from looprail import layout
from looprail.errors import TrustError
from looprail.fsutil import atomic_write, read_bounded
from looprail.hooks.capset import CapabilitySet
from looprail.hooks.sources import PROJECT as PROJECT_ORIGIN
from looprail.layout import CONSENT_FILE, looprail_home

STORE_VERSION = 1
HOOKS_FILE = os.path.join(layout.LOOPRAIL_DIR, layout.HOOKS_FILE)  # relative to the project
# Hashing is bounded like everything else: a capability is a handful of small files.
MAX_FOLDER_FILES = 10_000
MAX_FOLDER_BYTES = 256 * 1024 * 1024
MAX_HOOKS_FILE_BYTES = 1 << 20  # the native hooks loader's own limit
_CHUNK = 1 << 16

NO_CONSENT = "no consent (run `looprail trust`)"
CHANGED = "changed since consent (run `looprail trust`)"


def folder_hash(path: str | os.PathLike[str]) -> str:
    """The SHA-256 (hex) of a capability folder: every file's relative name and bytes, sorted.
    A symlink counts by its target's content and must point at a regular file inside the
    folder; anything else (a symlink to a folder or out of it, a FIFO, a socket, a device)
    raises `TrustError`, so such a folder can never be consented to."""
    top = os.fspath(path)
    root = os.path.realpath(top)
    if not os.path.isdir(root):
        raise TrustError(f"{top}: not a folder")
    files = sorted(_folder_files(top, root))
    outer = hashlib.sha256(b"looprail-folder-v1\0")
    total = 0
    for name, real in files:
        inner = hashlib.sha256()
        try:
            with open(real, "rb") as fh:
                while chunk := fh.read(_CHUNK):
                    total += len(chunk)
                    if total > MAX_FOLDER_BYTES:
                        raise TrustError(f"{top}: larger than {MAX_FOLDER_BYTES} bytes")
                    inner.update(chunk)
        except OSError as exc:
            raise TrustError(f"{top}: cannot read {_shown(name)}: {exc.strerror or exc}") from None
        outer.update(len(name).to_bytes(4, "big") + name + inner.digest())
    return outer.hexdigest()


def copy_folder(source: str | os.PathLike[str], dest: str | os.PathLike[str]) -> None:
    """Copy a capability folder as `folder_hash` sees it: regular files and folders only; a
    symlink is copied as its target's content and must point at a regular file inside the
    folder. Bounded like the hash (`MAX_FOLDER_FILES`); raises `TrustError`."""
    top = os.fspath(source)
    files = _folder_files(top, os.path.realpath(top))
    os.mkdir(dest)
    for name, real in files:
        out = os.path.join(os.fspath(dest), os.fsdecode(name))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.copyfile(real, out, follow_symlinks=True)
        shutil.copymode(real, out)


def _folder_files(top: str, root: str) -> list[tuple[bytes, str]]:
    """(relative name as bytes, real path) of every file under `root`."""
    out: list[tuple[bytes, str]] = []
    pending = [""]
    while pending:
        rel = pending.pop()
        try:
            with os.scandir(os.path.join(root, rel) if rel else root) as it:
                entries = list(it)
        except OSError as exc:
            raise TrustError(f"{top}: cannot list {rel or '.'}: {exc.strerror or exc}") from None
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            shown = os.path.join(top, name)
            if entry.is_symlink():
                target = os.path.realpath(entry.path)
                if not is_inside(target, root):
                    raise TrustError(f"{shown}: symlink points outside the capability folder")
                try:
                    st = os.stat(target)
                except OSError:
                    raise TrustError(f"{shown}: dangling symlink") from None
                if not stat.S_ISREG(st.st_mode):
                    raise TrustError(f"{shown}: symlink to something other than a regular file")
                out.append((os.fsencode(name), target))
            elif entry.is_dir(follow_symlinks=False):
                pending.append(name)
            elif entry.is_file(follow_symlinks=False):
                out.append((os.fsencode(name), entry.path))
            else:
                raise TrustError(f"{shown}: not a regular file, folder or symlink")
            if len(out) > MAX_FOLDER_FILES:
                raise TrustError(f"{top}: more than {MAX_FOLDER_FILES} files")
    return out


def is_inside(path: str, root: str) -> bool:
    """Is `path` `root` or below it (both absolute and normalised)?"""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _shown(name: bytes) -> str:
    return os.fsdecode(name).encode("unicode_escape").decode("ascii")


def hooks_hash(project: str | os.PathLike[str]) -> str | None:
    """The SHA-256 (hex) of the project's `.looprail/hooks.json`, or None when there is none.
    Raises `TrustError` for something that is not a regular file or is too large."""
    path = os.path.join(os.fspath(project), HOOKS_FILE)
    try:
        data = read_bounded(path, MAX_HOOKS_FILE_BYTES)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            raise TrustError(f"{path}: not a regular file") from None
        if exc.errno == errno.EFBIG:
            raise TrustError(f"{path}: larger than {MAX_HOOKS_FILE_BYTES} bytes") from None
        raise TrustError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if data is None:
        return None
    return hashlib.sha256(data).hexdigest()


def store_path(
    home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> str:
    """Where consent is kept: `$LOOPRAIL_HOME/consent.json` or `~/.looprail/consent.json`."""
    return os.path.join(looprail_home(env) if home is None else os.fspath(home), CONSENT_FILE)


def project_key(project: str | os.PathLike[str]) -> str:
    """How the store names a project: its real absolute path."""
    return os.path.realpath(os.fspath(project))


def _read_store(path: str) -> dict[str, object] | None:
    """The store, `{}` when absent, None when it exists but is unusable."""
    try:  # bounded, and a FIFO or device put there is refused, not waited on
        raw = read_bounded(path, 16 << 20)
    except OSError:
        return None
    if raw is None:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("projects", {}), dict):
        return None
    return data


def _entry(
    project: str | os.PathLike[str],
    home: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    store: Mapping[str, object] | None = None,
) -> Mapping[str, object]:
    """What the store (read now unless given) holds for `project`, `{}` when nothing."""
    if store is None:
        store = _read_store(store_path(home, env))
    projects = store.get("projects") if isinstance(store, dict) else None
    entry = projects.get(project_key(project)) if isinstance(projects, dict) else None
    return entry if isinstance(entry, dict) else {}


def _strings(value: object) -> dict[str, str]:
    """The string values of a stored object (`{}` for anything else)."""
    items = value.items() if isinstance(value, dict) else ()
    return {k: v for k, v in items if isinstance(v, str)}


def agents_consent(
    project: str | os.PathLike[str],
    *,
    home: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Agent name -> the digest of the project agent settings the user consented to."""
    return _strings(_entry(project, home, env).get("agents"))


def _update_store(
    home: str | os.PathLike[str] | None, change: Callable[[dict[str, object]], None]
) -> None:
    """Read-modify-write the store under an exclusive lock; written atomically."""
    path = store_path(home)
    lock_fd = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lock_fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        store = _read_store(path)
        if store is None:
            raise TrustError(
                f"{path}: the consent store is not valid JSON of the expected shape; "
                "fix or delete it (deleting it withdraws every consent)"
            )
        store.setdefault("version", STORE_VERSION)
        projects = store.setdefault("projects", {})
        assert isinstance(projects, dict)  # `_read_store` refuses any other
        change(projects)
        text = json.dumps(store, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        atomic_write(path, text, mode=0o600, fsync=True)
    except OSError as exc:
        raise TrustError(
            f"{path}: cannot write the consent store ({exc.strerror or exc})"
        ) from None
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def grant(
    project: str | os.PathLike[str],
    capabilities: Mapping[str, str] | None = None,
    *,
    hooks: str | None = None,
    agents: Mapping[str, str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> None:
    """Record consent: `capabilities` maps capability id → the folder hash the user reviewed
    (`folder_hash`), `hooks` the reviewed `hooks_hash` of the project's hooks.json. Pass the
    hashes computed *before* showing the audit, so consent covers exactly what was seen."""
    key = project_key(project)

    def change(projects: dict[str, object]) -> None:
        entry = _object(projects, key)
        _object(entry, "capabilities").update(capabilities or {})
        if hooks is not None:
            entry["hooks"] = hooks
        if agents:
            _object(entry, "agents").update(agents)

    _update_store(home, change)


def _object(parent: dict[str, object], key: str) -> dict[str, object]:
    """`parent[key]`, made an empty object first when it is not one."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = parent[key] = {}
    return value


def revoke(
    project: str | os.PathLike[str],
    cap_ids: Iterable[str] | None = None,
    *,
    hooks: bool = False,
    agent_settings: bool = False,
    home: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Withdraw consent to the named capabilities, the `hooks` file and the `agent_settings`
    (none named: everything for `project`). Returns what was withdrawn, one line each."""
    key = project_key(project)
    wanted = None if cap_ids is None else list(cap_ids)
    everything = wanted is None and not hooks and not agent_settings
    removed: list[str] = []

    def change(projects: dict[str, object]) -> None:
        entry = projects.get(key)
        if not isinstance(entry, dict):
            return
        caps = entry.get("capabilities")
        caps = caps if isinstance(caps, dict) else {}
        for cid in sorted(caps) if everything else wanted or ():
            if caps.pop(cid, None) is not None:
                removed.append(f"capability {cid}")
        if (everything or hooks) and entry.pop("hooks", None) is not None:
            removed.append("hooks.json")
        agents = entry.get("agents")
        if (everything or agent_settings) and isinstance(agents, dict):
            removed.extend(f"agent settings of {name}" for name in sorted(agents))
            entry.pop("agents", None)
        if not caps and "hooks" not in entry and "agents" not in entry:
            projects.pop(key, None)

    _update_store(home, change)
    return removed


def consent_state(
    project: str | os.PathLike[str],
    cap_id: str,
    folder: str | os.PathLike[str],
    *,
    home: str | os.PathLike[str] | None = None,
    store: Mapping[str, object] | None = None,
) -> str | None:
    """None when `cap_id` (in `folder`) of `project` has valid consent, else why not (the
    reason `capability list` shows)."""
    stored = _strings(_entry(project, home, store=store).get("capabilities")).get(cap_id)
    try:
        current = folder_hash(folder)
    except TrustError as exc:
        return f"cannot be consented to: {exc}"
    if stored is None:
        return NO_CONSENT
    return None if current == stored else CHANGED


def hooks_state(
    project: str | os.PathLike[str], *, home: str | os.PathLike[str] | None = None
) -> str | None:
    """None when the project's hooks.json has valid consent, else why not."""
    stored = _entry(project, home).get("hooks")
    try:
        current = hooks_hash(project)
    except TrustError as exc:
        return f"cannot be consented to: {exc}"
    if current is None:
        return "no project hooks file"
    if not isinstance(stored, str):
        return NO_CONSENT
    return None if current == stored else CHANGED


def hooks_bytes_consented(
    project: str | os.PathLike[str], raw: bytes, *, home: str | os.PathLike[str] | None = None
) -> bool:
    """Did the user consent to exactly these bytes of the project's hooks.json? The loader
    asks this about the bytes it is about to parse, so a file swapped after `is_trusted`
    looked at it is never run."""
    stored = _entry(project, home).get("hooks")
    return isinstance(stored, str) and hashlib.sha256(raw).hexdigest() == stored


def is_trusted(
    project: str | os.PathLike[str], *, home: str | os.PathLike[str] | None = None
) -> bool:
    """May the project's `.looprail/hooks.json` be read and run? Only when the user consented
    to exactly its current bytes (the native hooks loader asks this)."""
    return hooks_state(project, home=home) is None


def _project_of(source: str) -> str:
    """`<project>/.looprail/capabilities/<id>` → `<project>`."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(source))))


def apply_consent(
    caps: CapabilitySet,
    home: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> CapabilitySet:
    """`caps` with the user's consent applied: a project-origin capability gets `consent`
    True, or False with an `inactive_reason` saying why. Only project-origin folders are
    hashed, and the store is read once."""
    project_caps = [
        (cid, lc) for cid, lc in caps.capabilities.items() if lc.origin == PROJECT_ORIGIN
    ]
    if not project_caps:
        return caps
    store = _read_store(store_path(home, env))
    changed = {}
    for cid, lc in project_caps:
        source = os.fspath(lc.source)
        reason = consent_state(_project_of(source), cid, source, store=store)
        changed[cid] = lc._replace(consent=reason is None, inactive_reason=reason)
    return caps.replacing(changed)
