"""Journal helpers for the store and recorder tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from looprail.journal import Journal, JournalError


@contextmanager
def commits_failing(journal: Journal, message: str = "disk full") -> Iterator[None]:
    """While the block runs, every commit of `journal` fails after its writes (as on a full
    disk): nobody may believe what it committed was kept."""
    real = journal._seals.seal

    def failing() -> None:
        real()
        raise JournalError(message)

    journal._seals.seal = failing  # type: ignore[method-assign]
    try:
        yield
    finally:
        journal._seals.seal = real  # type: ignore[method-assign]
