"""looprail's version, the one place it is written (Hatch reads it for the package metadata).
A module of its own, importing nothing, so any layer may read it without the root package."""

__version__ = "0.1.0"
