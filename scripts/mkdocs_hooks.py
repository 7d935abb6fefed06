"""MkDocs hooks for the documentation site (mkdocs.yml `hooks:`).

The diagrams live in `diagrams/` at the repository root, where `looprail diagram
--regenerate-docs` writes them and the README links them; the site serves that folder as
`diagrams/` (its README.md is the page) instead of keeping a second copy under `docs/`.
The API reference lists what the package exports, read from its `__all__`.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.looprail")
DIAGRAMS = Path(__file__).resolve().parent.parent / "diagrams"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path in sorted(DIAGRAMS.iterdir()):
        if path.is_file():
            files.append(File.generated(config, f"diagrams/{path.name}", abs_src_path=str(path)))
    return files


# `<!-- api: MODULE -->` in a page stands for one `::: target` block per name in MODULE's
# `__all__` (the list is read from the package, never copied into the page). A name whose
# class or function has no docstring is a warning, so `mkdocs build --strict` fails on it.
_API = re.compile(r"^<!-- api: ([\w.]+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, config: MkDocsConfig, files: Files) -> str:
    shown: set[str] = set()  # a name exported twice is documented once, linked after
    return _API.sub(lambda m: _api_blocks(m.group(1), page.file.src_uri, shown), markdown)


def _api_blocks(module_name: str, where: str, shown: set[str]) -> str:
    module = importlib.import_module(module_name)
    blocks, again = [], []
    for name in module.__all__:
        if name.startswith("__"):
            continue
        value = getattr(module, name)
        if (inspect.isclass(value) or inspect.isroutine(value)) and not value.__doc__:
            log.warning(f"{where}: {module_name}.{name} has no docstring")
        target = api_target(module_name, name, value)
        if target in shown:
            again.append(f"[`{name}`](#{target})")
        else:
            shown.add(target)
            blocks.append(f"::: {target}\n")
    if again:
        blocks.insert(0, f"Also exported here, documented above: {', '.join(again)}.\n")
    return "\n".join(blocks)


def api_target(module_name: str, name: str, value: object) -> str:
    """Where the reference documents `module_name.name`: a class or function where it is
    defined, a constant where it is exported."""
    home = value.__module__ if inspect.isclass(value) or inspect.isroutine(value) else None
    return f"{home or module_name}.{name}"
