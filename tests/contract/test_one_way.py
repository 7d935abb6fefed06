"""One way to do each small thing (issue 29, point 8), read from the source with `ast`: YAML is
loaded only by `looprail.plans.yamlload`, frontmatter is read by `looprail.plans.frontmatter`, a file's
kind is checked on what was opened (`os.fstat`), never by a `stat` before the read, and the
`looprail` config section is read only through `looprail.runtime.settings`. Each exception is listed
with the reason it is not the shared helper; a new one fails here."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import REPO
from tests.support.source import modules, nodes

PACKAGE = REPO / "looprail"


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in nodes(path) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _called(node: ast.AST) -> set[str]:
    """The names called in `node`: `f(...)` gives f, `a.b.f(...)` gives f and `a.b.f`."""
    out: set[str] = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            if isinstance(func, ast.Name):
                out.add(func.id)
            elif isinstance(func, ast.Attribute):
                out |= {func.attr, ast.unparse(func)}
    return out


def test_the_scan_sees_the_helpers():
    fsutil = {f.name for f in _functions(PACKAGE / "fsutil.py")}
    assert {"read_bounded", "read_contained", "contained_file"} <= fsutil
    front = {f.name for f in _functions(PACKAGE / "plans/frontmatter.py")}
    assert {"read_frontmatter", "reference_frontmatter"} <= front


# --------------------------------------------------------------------------- YAML

YAML_LOADS = {"safe_load", "load", "full_load", "unsafe_load", "load_all", "safe_load_all"}


def test_yaml_is_loaded_only_by_yamlload():
    """`yaml.safe_load` and friends build objects from aliases and tags the project may not
    want (`yamlload` refuses aliases and object tags): nobody else calls them."""
    offenders = []
    for path in modules():
        if _rel(path) == "plans/yamlload.py":
            continue
        for node in nodes(path):
            if isinstance(node, ast.ImportFrom) and node.module == "yaml":
                bad = {a.name for a in node.names} & YAML_LOADS
                offenders += [f"{_rel(path)}: from yaml import {name}" for name in sorted(bad)]
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in YAML_LOADS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "yaml"
            ):
                offenders.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node.func)}")
    assert offenders == []


# --------------------------------------------------------------------------- frontmatter

# Readers of a frontmatter that are not `looprail.plans.frontmatter`, and why.
OWN_FRONTMATTER = {
    # PLAN.md: warnings name each key's line, duplicate keys are refused, `01` stays text,
    # and a frontmatter in a ```yaml block is found: the plan format's own rules.
    ("plans/planfile.py", "_split_frontmatter"),
    ("plans/planfile.py", "_fenced_frontmatter"),
    ("plans/planfile.py", "_frontmatter_fields"),
    # The ledger: a strict `key: value` block whose every bad line is an error.
    ("hooks/gates/ledger.py", "_frontmatter"),
    # STATE.md's frontmatter is edited in place, line by line (a key's value replaced, the
    # rest byte for byte, as `phase complete` keeps it); nothing is read from it.
    ("plans/tracking.py", "_split_frontmatter"),
}


def test_frontmatter_is_read_by_the_frontmatter_module():
    """A function about frontmatter outside `looprail/plans/frontmatter.py` either reads it through
    `read_frontmatter`/`reference_frontmatter` or is a format's own reader listed above."""
    found, offenders = set(), []
    for path in modules():
        if _rel(path) == "plans/frontmatter.py":
            continue
        for fn in _functions(path):
            if "frontmatter" not in fn.name.lower():
                continue
            key = (_rel(path), fn.name)
            if key in OWN_FRONTMATTER:
                found.add(key)
            elif not _called(fn) & {"read_frontmatter", "reference_frontmatter"}:
                offenders.append(f"{key[0]}: {key[1]}")
    assert offenders == []
    assert found == OWN_FRONTMATTER  # a stale entry is removed from the list


def test_an_artifact_file_is_read_through_file_frontmatter():
    """`read_frontmatter(path.read_text())` reads any size and blocks on a FIFO: a file's
    frontmatter is read with `file_frontmatter(path)` (a bounded regular-file read)."""
    offenders = []
    for path in modules():
        for node in nodes(path):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func).endswith("read_frontmatter")
                and node.args
                and isinstance(node.args[0], ast.Call)
                and ast.unparse(node.args[0].func).endswith(("read_text", "read_bytes", "read"))
            ):
                offenders.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


# --------------------------------------------------------------------------- bounded reads

# Modules that open a file and check its kind themselves, on the descriptor they opened, and
# why they do not read through `fsutil.read_bounded` / `read_contained`.
OWN_REGULAR_FILE_CHECK = {
    "fsutil.py": "the helpers themselves",
    "machine/commits.py": "appends to git's info/exclude (a write, not a read)",
    "journal/lock.py": "opens the run lock for writing and locking",
    "journal/schema.py": "reads the 16-byte SQLite header with pread",
    "journal/seal.py": "the journal key: owner and mode are checked too (SealError)",
    "ui/logs.py": "reads the tail of a log with pread",
}


def test_a_file_kind_is_checked_on_what_was_opened():
    """A function that opens or reads a file and checks `stat.S_ISREG` checks it with
    `os.fstat` on the descriptor it opened: a `stat` taken before the open is a check-then-read
    race (the file can be swapped for a FIFO or a link in between, and a `read_bytes` after a
    size check reads any size). Only the modules listed above check at all; the rest read
    through `fsutil.read_bounded` (one open, `fstat`, at most `limit` bytes)."""
    checking, offenders = set(), set()
    for path in modules():
        for fn in _functions(path):
            called = _called(fn)
            if "S_ISREG" not in called or not called & {"open", "read_bytes", "read_text"}:
                continue
            where = f"{_rel(path)}: {fn.name}"
            # (`fsutil.contained_file` stats; `read_contained` checks again with `fstat`)
            raced = called & {"stat", "os.stat", "lstat", "os.lstat", "read_bytes", "read_text"}
            if raced and _rel(path) != "fsutil.py":
                offenders.add(where)
                continue
            checking.add(_rel(path))
    assert offenders == set()
    assert checking == set(OWN_REGULAR_FILE_CHECK)  # a new one, or a stale entry, fails


# --------------------------------------------------------------------------- the looprail section


def test_the_looprail_section_is_read_only_through_the_settings_model():
    """`config.get("looprail")` / `config["looprail"]` appear in `looprail/runtime/settings.py` only:
    every other module reads `looprail_settings(config)`, so a key's type is checked once."""
    offenders = []
    for path in modules():
        if _rel(path) == "runtime/settings.py":
            continue
        for node in nodes(path):
            key = None
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and node.args
            ):
                key = node.args[0]
            elif isinstance(node, ast.Subscript):
                key = node.slice
            if isinstance(key, ast.Constant) and key.value == "looprail":
                offenders.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []
