"""The dashboard's view of a task's log files under `.looprail/logs/<run>/`: which files belong
to which task, and their tails. Read bounded; symlinks are never followed."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from looprail.errors import OutsideProjectError
from looprail.fsutil import looprail_path
from looprail.journal import is_run_id
from looprail.layout import LOGS_DIR
from looprail.runtime.logs import ANSI

LOG_TAIL_BYTES = 64 * 1024
LOG_TAIL_LINES = 200
LOG_MAX_FILES = 2000  # files looked at under one run's log folder
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class LogFile(TypedDict):
    """One log file's tail, as `/api/log` sends it."""

    name: str
    text: str
    truncated: bool


class TaskLog(TypedDict):
    """`/api/log`: the tails of a task's log files (an empty list: "no log")."""

    run: str
    task: str
    files: list[LogFile]


def _tokens(text: str) -> list[str]:
    return re.findall(r"[0-9a-z]+", text.lower())


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def log_dir(project: Path, run_id: str) -> Path | None:
    """`.looprail/logs/<run>/`, or None: only for a run id in looprail's own form (a plain
    name, so `../../../../etc` never names a folder), and never through a `.looprail/logs` or
    run folder linked out of the project."""
    if not is_run_id(run_id):
        return None
    try:
        return looprail_path(project, LOGS_DIR, run_id)
    except OutsideProjectError:
        return None


def _is(path: Path, kind) -> bool:
    try:
        return kind(os.lstat(path).st_mode)
    except OSError:
        return False


def _log_files(root: Path) -> list[tuple[str, Path]]:
    """(relative name, path) of the regular files under `root`, sorted, at most LOG_MAX_FILES."""
    files: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if _is(path, stat.S_ISREG):
                files.append((path.relative_to(root).as_posix(), path))
            if len(files) >= LOG_MAX_FILES:
                return files
    return files


def task_logs(
    project: Path, run_id: str, task_keys: Sequence[str]
) -> dict[str, list[tuple[str, Path]]]:
    """`{task key: [(relative name, path), …]}` of the log files under
    `.looprail/logs/<run>/` that belong to each task. A file belongs to a task when the task
    key's words (`01-02/T3` → 01 02 t3) appear in order in its path without extensions, so
    `01-02/T3.log`, `01-02_T3.stderr` and `01-02/T3/out.txt` all match and `T30` does not;
    the longest matching key wins (01-02/T3 over a key that is a prefix of it)."""
    root = log_dir(project, run_id)
    if root is None or not _is(root, stat.S_ISDIR):
        return {}
    out: dict[str, list[tuple[str, Path]]] = {}
    wanted = {key: _tokens(key) for key in task_keys}
    for rel, path in _log_files(root):
        parts = rel.split("/")
        stem = parts[-1].split(".", 1)[0] if not parts[-1].startswith(".") else parts[-1]
        words = _tokens("/".join([*parts[:-1], stem]))
        matching = [key for key, needle in wanted.items() if _contains(words, needle)]
        if matching:
            best = max(matching, key=lambda key: len(wanted[key]))
            out.setdefault(best, []).append((rel, path))
    return out


def read_tail(path: Path) -> tuple[str, bool]:
    """The last lines of a log file as text (escape sequences and control characters removed),
    and whether it was cut."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", False
        start = max(0, os.fstat(fd).st_size - LOG_TAIL_BYTES)
        blob = os.pread(fd, LOG_TAIL_BYTES, start)
    finally:
        os.close(fd)
    text = blob.decode("utf-8", errors="replace")
    cut = start > 0
    if cut and "\n" in text:
        text = text.split("\n", 1)[1]  # drop the partial first line
    lines = _CONTROL.sub("", ANSI.sub("", text.replace("\r\n", "\n"))).split("\n")
    if len(lines) > LOG_TAIL_LINES + 1:
        lines, cut = lines[-LOG_TAIL_LINES - 1 :], True
    return "\n".join(lines), cut


def task_log(project: Path, run_id: str, task_key: str) -> TaskLog:
    """The tails of a task's log files (an empty list: "no log")."""
    files: list[LogFile] = []
    for rel, path in task_logs(project, run_id, [task_key]).get(task_key, []):
        try:
            text, cut = read_tail(path)
        except OSError as exc:
            text, cut = f"(cannot read: {exc.strerror})", False
        files.append({"name": rel, "text": text, "truncated": cut})
    return {"run": run_id, "task": task_key, "files": files}
