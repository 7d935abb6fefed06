"""Writing files so that nothing is ever half-written: a temporary file in the same folder,
flushed, then renamed over the target (atomic on POSIX)."""

from __future__ import annotations

import os
from pathlib import Path


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
