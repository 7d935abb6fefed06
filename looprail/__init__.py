"""looprail: a declarative state-machine orchestrator for the spec-driven project loop.

discuss → plan → execute (waves → plans → tasks) → verify → ship. Capabilities declare hooks in
JSON manifests; at each of the twelve extension points looprail resolves the active hooks and
dispatches every one of them from code.

The import of this package is deliberately cheap: heavy modules (networkx, graphviz,
statemachine) are imported by the submodules that need them, never here.
"""

from looprail.errors import LooprailError

__version__ = "0.1.0"
__all__ = ["LooprailError", "__version__"]
