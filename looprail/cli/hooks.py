"""`looprail` commands: (not yet wired)."""

from __future__ import annotations


def register(sub) -> None:
    """Add this group's commands to the top-level subparsers."""
