"""The error hierarchy. Every error a user can cause is a `LooprailError` whose `str()` is one
line naming the file, the field (a JSON path where there is one) and the reason; the CLI prints
it without a traceback and exits non-zero."""

from __future__ import annotations


class LooprailError(Exception):
    """Base of every error looprail raises on purpose (bad input, refused work)."""

    exit_code = 1


class UsageError(LooprailError):
    """The command line itself is wrong (missing option, bad value)."""

    exit_code = 2


class Issue:
    """One validation problem: where (file + JSON path) and why. (A plain class rather than a
    dataclass: this module is on the CLI start path, and dataclasses costs ~10 ms to import.)"""

    __slots__ = ("file", "path", "reason")

    def __init__(self, file: str, path: str, reason: str):
        self.file = file
        self.path = path
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Issue) and (self.file, self.path, self.reason) == (
            other.file,
            other.path,
            other.reason,
        )

    def __hash__(self) -> int:
        return hash((self.file, self.path, self.reason))

    def __repr__(self) -> str:
        return f"Issue({self.file!r}, {self.path!r}, {self.reason!r})"

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        return f"{where}: {self.reason}"


class ValidationError(LooprailError):
    """One or more problems in a user- or third-party-supplied file. All are kept, not only the
    first; `str()` is the first one plus a count so a single line still says what is wrong."""

    def __init__(self, issues: list[Issue]):
        if not issues:
            raise ValueError("ValidationError needs at least one issue")
        self.issues = list(issues)
        more = len(self.issues) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        super().__init__(f"{self.issues[0]}{suffix}")


class ManifestError(ValidationError):
    """A capability manifest (or the merged set) is invalid."""


class PlanError(LooprailError):
    """A PLAN.md, the phase layout or the plan DAG is invalid."""


class ConfigError(LooprailError):
    """A configuration file is invalid."""


class HaltError(LooprailError):
    """The loop stopped on purpose: a blocking gate, a failed mandatory action, `onError: halt`."""
