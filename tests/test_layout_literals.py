"""Every layout fact comes from `looprail/layout.py`: no other module spells out looprail's
folder (`.looprail`, in code or in a message), defines its own copy of a layout name, or builds
a path from the planning folder's literal name. Read from the source with `ast`; docstrings
are prose for people and are not checked, comments are not strings."""

from __future__ import annotations

import ast
from pathlib import Path

from looprail import layout
from tests.support import REPO
from tests.support.source import modules, nodes, strings

PACKAGE = REPO / "looprail"
LAYOUT = PACKAGE / "layout.py"
# A standalone script `looprail init` copies into a project's `.looprail/agents/`: it runs
# there on its own and must not import looprail.
STANDALONE = {PACKAGE / "runtime" / "roles" / "local_agent.py"}


def _modules() -> list[Path]:
    return [p for p in modules() if p != LAYOUT and p not in STANDALONE]


def test_the_scan_seesstrings():
    found = strings(PACKAGE / "runtime" / "local.py")
    assert any("refused" in text for _, text in found)
    assert layout.LOOPRAIL_DIR == ".looprail"
    assert any(layout.LOOPRAIL_DIR in text for _, text in strings(LAYOUT))


def test_only_layout_spells_out_the_looprail_folder():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text[:60]!r}"
        for path in _modules()
        for line, text in strings(path)
        if layout.LOOPRAIL_DIR in text
    ]
    assert offenders == [], "use looprail.layout.LOOPRAIL_DIR (and its names)"


def test_no_module_builds_a_path_from_the_planning_folder_name():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in _modules()
        for line, text in strings(path)
        if text in (layout.PLANNING_DIR, layout.PLANNING_DIR + "/")
    ]
    assert offenders == [], "use looprail.layout.PLANNING_DIR / PROJECT_CONFIG_FILE / …"


LAYOUT_NAMES = {
    name
    for name, value in vars(layout).items()
    if name.isupper() and isinstance(value, str) and name != "TYPE_CHECKING"
}


def test_no_module_defines_its_own_copy_of_a_layout_name():
    """`LOOPRAIL_DIR = ".looprail"` in runtime/local.py was such a copy; an alias of the
    layout's value (`JOURNAL_FILE = Path(LOOPRAIL_DIR) / _JOURNAL`) is fine."""
    offenders = []
    values = {getattr(layout, name) for name in LAYOUT_NAMES}
    for path in _modules():
        for node in nodes(path):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
                getattr(node, "value", None), ast.Constant
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                value = node.value.value  # type: ignore[union-attr]
                if any(n in LAYOUT_NAMES for n in names) and value in values:
                    offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert offenders == []


def test_looprail_home_is_computed_once():
    """The three copies that disagreed about `~` are gone, and so are the wrappers that turned
    it into a Path: `layout.looprail_home` is the one definition, every layer calls it."""
    defined = [
        path.relative_to(PACKAGE).as_posix()
        for path in [*_modules(), LAYOUT]
        for node in nodes(path)
        if isinstance(node, ast.FunctionDef) and node.name == "looprail_home"
    ]
    assert defined == ["layout.py"]  # (the scan sees layout's own, so it sees the others)
