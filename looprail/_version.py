"""looprail's version: the one place it is written.

Hatch reads it for the wheel's and sdist's metadata (`[tool.hatch.version]` in
pyproject.toml); `looprail --version`, `looprail.__version__` and the journal's `run_started`
record import it from here. A module of its own, importing nothing, so that any layer may
read the version without importing the root package.
"""

__version__ = "0.1.0"
