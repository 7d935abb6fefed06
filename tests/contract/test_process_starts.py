"""Every program looprail starts or looks up goes through looprail/runtime/process.py: its
lookup drops empty and relative PATH entries (which mean "the current folder", the project),
and its `run_bounded` gives every child the same confined PATH. Read from the source with
`ast`: a module that imports `subprocess`, calls `shutil.which`, or starts a process any other
way (`os.system`, `os.exec*`, `os.spawn*`, `os.posix_spawn*`, `asyncio.create_subprocess_*`,
`pty.spawn`) would find a project's own `./git` or `./claude` through an empty PATH entry."""

from __future__ import annotations

import ast

from tests.support.source import PACKAGE, modules, nodes

# The only modules that may start processes themselves, each with its reason.
ALLOWED = {
    # The process module: `run_bounded` (Popen of the guard or of the child, with the
    # confined environment) and `find_program` (`shutil.which` over the confined PATH).
    "runtime/process.py": "the confined lookup and start themselves",
    # The guard: it runs the very argv `run_bounded` handed it, in the environment
    # `run_bounded` confined (posix_spawnp looks a bare name up on that PATH).
    "runtime/guard.py": "starts what run_bounded asked for, with its confined environment",
    # An interactive session (`run --interactive`): the child gets the terminal, so no pipes
    # and no guard (its own session would lose the terminal); an absolute argv[0] found by
    # `find_program` or `locate`, and run_bounded's confined environment.
    "runtime/interactive.py": "the terminal handed over, with the confined environment",
}

# (module, attribute) pairs that start a process or look a program up on PATH.
FORBIDDEN_CALLS = {
    ("shutil", "which"),
    ("os", "system"),
    ("os", "popen"),
    ("asyncio", "create_subprocess_exec"),
    ("asyncio", "create_subprocess_shell"),
    ("pty", "spawn"),
}
FORBIDDEN_OS_PREFIXES = ("exec", "spawn", "posix_spawn", "fork")
FORBIDDEN_MODULES = {"subprocess"}


def _offences(source: str, tree_nodes) -> list[str]:
    found = []
    for node in tree_nodes:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                    found.append(f"{source}:{line}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            top = node.module.split(".")[0]
            if top in FORBIDDEN_MODULES:
                found.append(f"{source}:{line}: from {node.module} import …")
            for alias in node.names:
                if _forbidden(top, alias.name):
                    found.append(f"{source}:{line}: from {node.module} import {alias.name}")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and _forbidden(node.value.id, node.attr)
        ):
            found.append(f"{source}:{line}: {node.value.id}.{node.attr}")
    return found


def _forbidden(module: str, name: str) -> bool:
    if (module, name) in FORBIDDEN_CALLS:
        return True
    return module in ("os", "posix") and name.startswith(FORBIDDEN_OS_PREFIXES)


def test_no_module_but_the_process_module_starts_or_looks_up_programs():
    offences = []
    for path in modules():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED:
            continue
        offences += _offences(rel, nodes(path))
    assert offences == [], "start processes through looprail.runtime.process:\n" + "\n".join(
        offences
    )


def test_the_scan_finds_each_way_of_starting_a_process():
    source = """
import subprocess
from subprocess import run
import shutil
from shutil import which
from os import execvp
import os, asyncio, pty
shutil.which("git")
os.system("x")
os.execv("/bin/x", [])
os.posix_spawnp("x", [], {})
asyncio.create_subprocess_exec("x")
pty.spawn("x")
"""
    found = _offences("x.py", tuple(ast.walk(ast.parse(source))))
    assert len(found) == 10, found


def test_the_allowed_modules_exist():
    for rel in ALLOWED:
        assert (PACKAGE / rel).is_file(), rel
