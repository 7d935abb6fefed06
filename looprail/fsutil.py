"""Writing files so that nothing is ever half-written: a temporary file in the same folder,
flushed, then renamed over the target (atomic on POSIX), or a new file created where nothing
was (never through a symlink). Reading the private files of looprail's caches, trusting only
what this user alone could have written. The containment rule for the project's own paths: a
path looprail reads or writes in a project (`.planning/`, a phase's files, `.looprail/` and
every folder in it) must stay inside the project once symlinks are followed
(`require_inside`, `looprail_path`), and a file that goes into a prompt must also be a regular
file (`contained_file`, `read_contained`)."""

from __future__ import annotations

# On the `render-hooks` start path (`ENTRY` in tests/cli/test_loop.py): what a call there does
# not need is imported in the function that needs it.
import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def atomic_write(
    path: str | Path, data: str | bytes, *, mode: int = 0o644, fsync: bool = False
) -> None:
    """Replace `path` with `data` in one step. `fsync` also forces the bytes to disk first
    (for stores that must survive a power loss, like the consent store)."""
    import tempfile  # not at import: the run path imports this module and may never write
    from pathlib import Path  # not at import: a warm `render-hooks` reads its config only

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
    from pathlib import Path  # not at import: a warm `render-hooks` reads its config only

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


def _size(limit: int) -> str:
    mib = 1024 * 1024
    return f"{limit // mib} MiB" if limit >= mib and limit % mib == 0 else f"{limit} bytes"


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """The bytes of `path`, or None when it does not exist: the one bounded read of a regular
    file. Raises `OSError` whose `strerror` is the reason for anything that is not a regular
    file of at most `limit` bytes: a FIFO, a device such as /dev/zero (through a symlink too)
    or a folder is refused before a byte is read, so it can never hang or exhaust memory. One
    open, then `fstat` on what was opened (no check-then-read race); O_NONBLOCK keeps the open
    itself from waiting on a FIFO. A file that grows while read is refused past `limit`."""
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
        chunks, total = [], 0
        while True:  # read what is there now, never past the limit (the file may grow)
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise OSError(errno.EFBIG, f"larger than {_size(limit)}")
        return b"".join(chunks)
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
    """`path` (absolute, or relative to the project `root`) with its symlinks followed, or an
    error (one line, `OutsideProjectError` unless `error` says otherwise) when that leaves the
    project: the line names the part of the path that is the symlink out, and its target. The
    path need not exist: what exists of it is followed, so a symlinked folder on the way is
    caught before anything is created under it."""
    from pathlib import Path  # not at import: a warm `render-hooks` reads its config only

    from looprail.errors import OutsideProjectError
    from looprail.textsafe import one_line

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
    if real == top or real.is_relative_to(top):
        return real
    # Name the link itself: the first part of the path whose real path is outside.
    culprit, target = given, real
    lexical = Path(os.path.abspath(given))
    for n in range(1, len(lexical.parts) + 1):
        part = Path(*lexical.parts[:n])
        if not part.is_relative_to(top) or part == top or not os.path.islink(part):
            continue
        here = part.resolve()
        if not (here == top or here.is_relative_to(top)):
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
    """`<project>/.looprail/<parts…>`, checked: `OutsideProjectError` (one line) when it, or any
    folder on the way to it (`.looprail/logs`, `.looprail/worktrees`, …), is a symlink that
    leads out of the project. The one way looprail names a path under `.looprail/` that it
    writes to or reads from, so a cloned project's links cannot send logs, worktrees or
    installed capabilities elsewhere."""
    from pathlib import Path  # not at import: a warm `render-hooks` reads its config only

    from looprail.layout import project_path

    path = Path(project_path(project, *parts))
    require_inside(project, path, "the folder")
    return path


def check_looprail_folders(project: str | os.PathLike[str]) -> None:
    """Refuse (one line) when `.looprail/` or any folder looprail keeps in it is a symlink out
    of the project: `looprail run` checks them all before it starts."""
    # not at the top: the render-hooks entry loads this module (its import budget)
    from looprail.layout import LOOPRAIL_FOLDERS, project_path

    for name in ("", *LOOPRAIL_FOLDERS):
        path = project_path(project, name) if name else project_path(project)
        if os.path.lexists(path):
            require_inside(project, path, "the folder")


def contained_file(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path | None:
    """The real path of `path` (relative to `root` or absolute) when it is a regular file
    inside `root` once symlinks are followed, else None: the rule for every file whose text
    looprail puts into a prompt (a task's `read_first`, a phase's CONTEXT.md, a role brief).
    A link to `~/.aws/credentials` or `/proc/self/environ`, a FIFO, a device, a folder: None."""
    from pathlib import Path  # not at import: a warm `render-hooks` reads its config only

    top = Path(root).resolve()
    given = Path(path)
    try:
        real = (given if given.is_absolute() else top / given).resolve()
        if not (real == top or real.is_relative_to(top)):
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
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, got = [], 0
        while got <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


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
