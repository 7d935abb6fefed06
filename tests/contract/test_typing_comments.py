"""Types are written as types: no annotation is `Any` with the real type in a comment beside it
(import it under `TYPE_CHECKING`, which costs the hot path nothing), and only the runtime
registry names a runtime class (`LocalRuntime` is one plugin among others)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import REPO

PACKAGE = REPO / "looprail"
# `x: Any = None  # looprail.plans.Phase`, `y: Any  # Recovery | None`
TYPE_IN_COMMENT = re.compile(
    r":\s*Any\b[^#\n]*#\s*(?:looprail\.[\w.]*\.)?[A-Z]\w*(?:\s*\|\s*None)?\s*(?:,|$)"
)


def test_the_pattern_finds_types_in_comments():
    assert TYPE_IN_COMMENT.search("    phase: Any = None  # looprail.plans.Phase")
    assert TYPE_IN_COMMENT.search(
        "    timeouts: Any = None  # looprail.runtime.local.Timeouts | None"
    )
    assert TYPE_IN_COMMENT.search("    recovery: Any  # Recovery")
    assert not TYPE_IN_COMMENT.search("    data: Any = None  # stdout parsed, when JSON")


def test_no_type_is_written_in_a_comment():
    hits = [
        f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TYPE_IN_COMMENT.search(line)
    ]
    assert hits == []


def _names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {a.name.rsplit(".", 1)[-1] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
              for a in n.names}  # fmt: skip
    return names


def test_session_lint_and_the_cli_do_not_hard_code_the_local_runtime():
    """They build runtimes through `runtime.registry` (the `looprail.runtimes` entry points)."""
    paths = [
        *sorted((PACKAGE / "machine" / "session").glob("*.py")),
        *sorted((PACKAGE / "lint").glob("*.py")),
        *sorted((PACKAGE / "cli").glob("*.py")),
    ]
    offenders = [
        p.relative_to(PACKAGE).as_posix() for p in paths if "LocalRuntime" in _names_used(p)
    ]
    assert offenders == []
