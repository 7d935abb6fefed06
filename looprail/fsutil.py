"""Writing files so that nothing is ever half-written: a temporary file in the same folder,
flushed, then renamed over the target (atomic on POSIX)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(
    path: str | Path, data: str | bytes, *, mode: int = 0o644, fsync: bool = False
) -> None:
    """Replace `path` with `data` in one step. `fsync` also forces the bytes to disk first
    (for stores that must survive a power loss, like the consent store)."""
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
