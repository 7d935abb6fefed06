"""Files written so that nothing is ever half-written (`atomic_write`, `create_new`), bounded
reads that cannot hang or exhaust memory, private cache files trusted only when this user alone
could have written them, and the containment rule: a path looprail reads or writes in a project
must stay inside it once symlinks are followed (`require_inside`, `looprail_path`), and a file
that goes into a prompt must also be a regular file (`contained_file`, `read_contained`)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from looprail.errors import OutsideProjectError, UsageError
from looprail.layout import LOOPRAIL_FOLDERS, PLANNING_DIR, project_path
from looprail.textsafe import one_line


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


def project_folder(
    value: str | os.PathLike[str], *, label: str = "", resolve: bool = False
) -> Path:
    """The project folder `value`, or a usage error naming it (escaped and cut: it may be
    hostile; `label` prefixes it): the check every entry point makes before it reads a project."""
    project = Path(value)
    try:
        is_dir = project.is_dir()
    except OSError:  # a name the OS refuses (too long, say) is no folder
        is_dir = False
    if not is_dir:
        text = os.fspath(value)
        shown = one_line(text if len(text) <= 200 else text[:200] + "…")
        raise UsageError(f"{label}{shown}: no such project folder")
    project = Path(project_root(project))
    return project.resolve() if resolve else project


def project_root(start: str | os.PathLike[str]) -> str:
    """The project `start` is in, found upward as git finds its repository (and as the
    reference's `findProjectRoot` does by its last rule): the nearest folder, `start` itself or
    above, holding a `.planning/` folder. `start` as given when that is `start` itself, when
    there is none, or when `start` is no folder. The search never crosses a repository's top
    (a folder holding `.git`: a nested repository is a project of its own) and never looks in
    the home folder or past it."""
    text = os.fspath(start)
    try:
        here = os.path.abspath(text)
        if not os.path.isdir(here):  # not a folder (an answer's TASK, a typo): not searched
            return text
    except (OSError, ValueError):
        return text
    stop = os.path.expanduser("~")
    folder = here
    while True:
        try:
            if os.path.isdir(os.path.join(folder, PLANNING_DIR)):
                return text if folder == here else folder
            if os.path.lexists(os.path.join(folder, ".git")):
                return text
        except (OSError, ValueError):  # a name the OS refuses: no project there
            return text
        parent = os.path.dirname(folder)
        if parent in (folder, stop):
            return text
        folder = parent


# Git's "racy clean" rule: file times tick coarsely (the kernel's clock tick), so a file changed
# this close to a read may change again without its stat showing it. The caches, the phase
# scan and the Dask worker's sync all distrust a stat this fresh.
RACY_NS = 50_000_000


def stat_sig(path: str) -> list[int] | None:
    """What the caches record of a file or folder they depend on (None: absent)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]


def settled(sig: list[int] | None, read_ns: int) -> bool:
    """Whether `sig` (taken after a read begun at `read_ns`) is the content that was read: the
    file's last change is older than the read by more than `RACY_NS`."""
    return sig is None or max(sig[0], sig[1]) < read_ns - RACY_NS


def is_private(st: os.stat_result, is_kind: Callable[[int], bool]) -> bool:
    """Of this kind (`stat.S_ISDIR`/`S_ISREG`), owned by this user, writable by nobody else."""
    return is_kind(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def read_private(path: str, max_bytes: int) -> bytes | None:
    """The bytes of a cache entry, or None: only a regular file (never through a symlink, never
    a FIFO) owned by this user, writable by nobody else, of at most `max_bytes`."""

    def private(st: os.stat_result) -> bool:
        return is_private(st, stat.S_ISREG) and st.st_size <= max_bytes

    return _read_if(path, private, max_bytes + 1)


def _read_if(path: str | Path, accept: Callable[[os.stat_result], bool], n: int) -> bytes | None:
    """At most `n` bytes of `path` when what was opened (never through a last symlink, never
    waiting on a FIFO) passes `accept` by its `fstat`, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _read_upto(fd, n) if accept(os.fstat(fd)) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_upto(fd: int, n: int) -> bytes:
    """At most `n` bytes of `fd`: what is there now, never more (the file may grow)."""
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(1 << 20, n - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _size(limit: int) -> str:
    mib = 1024 * 1024
    return f"{limit // mib} MiB" if limit >= mib and limit % mib == 0 else f"{limit} bytes"


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """The bytes of `path`, or None when it does not exist. Raises `OSError` (`strerror`: the
    reason) for anything but a regular file of at most `limit` bytes, before a byte is read: a
    FIFO, a device (through a symlink too), a folder. `fstat` checks what was opened (no race);
    O_NONBLOCK keeps the open from waiting on a FIFO; a file that grows is refused past `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {_size(limit)}")
        data = _read_upto(fd, limit + 1)
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"larger than {_size(limit)}")
        return data
    finally:
        os.close(fd)


def _shown_rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def require_inside(
    root: str | os.PathLike[str],
    path: str | os.PathLike[str],
    what: str,
    *,
    error: type[Exception] | None = None,
) -> Path:
    """`path` (absolute, or relative to the project `root`) with its symlinks followed, or one
    line (`OutsideProjectError`, or `error`) naming the symlink out and its target. What exists
    of the path is followed, so a symlinked folder is caught before anything is created in it."""
    kind = error or OutsideProjectError
    top = Path(root).resolve()
    given = Path(path)
    if not given.is_absolute():
        given = top / given
    try:
        real = given.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise kind(
            one_line(f"{_shown_rel(given, top)}: {what} cannot be resolved (symlink loop)")
        ) from None
    if real.is_relative_to(top):
        return real
    # Name the link itself: the first part of the path whose real path is outside.
    culprit, target = given, real
    lexical = Path(os.path.abspath(given))
    for n in range(1, len(lexical.parts) + 1):
        part = Path(*lexical.parts[:n])
        if not part.is_relative_to(top) or part == top or not os.path.islink(part):
            continue
        here = part.resolve()
        if not here.is_relative_to(top):
            culprit, target = part, here
            break
    if culprit != given:  # a folder on the way is the link
        what = "the folder"
    raise kind(
        one_line(
            f"{_shown_rel(culprit, top)}: {what} is a symlink to {target}, outside the project; "
            "refused (move it into the project)"
        )
    )


def looprail_path(project: str | os.PathLike[str], *parts: str) -> Path:
    """`<project>/.looprail/<parts…>`, or `OutsideProjectError` when it or a folder on the way
    is a symlink out of the project: the one way to name a path there, so a cloned project's
    links cannot send logs, worktrees or installed capabilities elsewhere."""
    path = Path(project_path(project, *parts))
    require_inside(project, path, "the folder")
    return path


def check_looprail_folders(project: str | os.PathLike[str]) -> None:
    """Refuse (one line) when `.looprail/` or any folder looprail keeps in it is a symlink out
    of the project: `looprail run` checks them all before it starts."""
    for name in ("", *LOOPRAIL_FOLDERS):
        path = project_path(project, name) if name else project_path(project)
        if os.path.lexists(path):
            require_inside(project, path, "the folder")


def contained_file(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path | None:
    """The real path of `path` (relative to `root` or absolute) when it is a regular file
    inside `root` once symlinks are followed, else None: the rule for every file whose text goes
    into a prompt (a link to `~/.aws/credentials`, a FIFO, a device, a folder: None)."""
    top = Path(root).resolve()
    given = Path(path)
    try:
        real = (given if given.is_absolute() else top / given).resolve()
        if not real.is_relative_to(top):
            return None
        st = os.stat(real)
    except (OSError, RuntimeError, ValueError):
        return None
    return real if stat.S_ISREG(st.st_mode) else None


def read_contained(
    root: str | os.PathLike[str], path: str | os.PathLike[str], max_bytes: int
) -> bytes | None:
    """At most `max_bytes + 1` bytes of `path` when `contained_file` accepts it, else None. The
    real path is opened without following a last symlink and without blocking, and checked
    again with `fstat`, so a file swapped for a FIFO or a link in between is not read."""
    real = contained_file(root, path)
    if real is None:
        return None
    return _read_if(real, lambda st: stat.S_ISREG(st.st_mode), max_bytes + 1)


def create_new(path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o644) -> bool:
    """Create `path` holding `data` only where nothing is, never through a symlink
    (`O_CREAT | O_EXCL | O_NOFOLLOW`: a dangling link there is not followed to create a file
    elsewhere). False when something already exists at `path`; other errors raise."""
    blob = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
        )
    except FileExistsError:
        return False
    try:
        view = memoryview(blob)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)  # the umask does not narrow what was asked for (an executable)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return True
