"""Writing files so that nothing is ever half-written: a temporary file in the same folder,
flushed, then renamed over the target (atomic on POSIX). Reading the private files of
looprail's caches, trusting only what this user alone could have written."""

from __future__ import annotations

import os
import stat
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def atomic_write(
    path: str | Path, data: str | bytes, *, mode: int = 0o644, fsync: bool = False
) -> None:
    """Replace `path` with `data` in one step. `fsync` also forces the bytes to disk first
    (for stores that must survive a power loss, like the consent store)."""
    import tempfile  # not at import: the run path imports this module and may never write

    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def project_folder(
    value: str | os.PathLike[str], *, label: str = "", resolve: bool = False
) -> Path:
    """The project folder `value`, or a usage error naming it: the one check every command and
    library entry point makes before it reads a project. The name is shown escaped and cut (it
    may be hostile); `label` prefixes it (`"--project: "`)."""
    from looprail.errors import UsageError
    from looprail.textsafe import one_line

    project = Path(value)
    try:
        is_dir = project.is_dir()
    except OSError:  # a name the OS refuses (too long, say) is no folder
        is_dir = False
    if not is_dir:
        text = os.fspath(value)
        shown = one_line(text if len(text) <= 200 else text[:200] + "…")
        raise UsageError(f"{label}{shown}: no such project folder")
    return project.resolve() if resolve else project


def is_private(st: os.stat_result, is_kind: Callable[[int], bool]) -> bool:
    """Of this kind (`stat.S_ISDIR`/`S_ISREG`), owned by this user, writable by nobody else."""
    return is_kind(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def read_private(path: str, max_bytes: int) -> bytes | None:
    """The bytes of a cache entry, or None: only a regular file (never through a symlink, never
    a FIFO) owned by this user, writable by nobody else, of at most `max_bytes`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not is_private(st, stat.S_ISREG) or st.st_size > max_bytes:
            return None
        return os.read(fd, max_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
