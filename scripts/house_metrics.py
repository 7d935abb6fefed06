"""The size and shape of a Python package, measured the same way for any package.

    python scripts/house_metrics.py looprail [OTHER_PACKAGE_DIR ...] [--json]

Lines and code lines (neither blank nor comment-only), modules over 500 lines, functions over
50 lines, the share of imports written inside a function, `Any` per 1,000 code lines, the
count of `dict[str, Any]`, `global` statements, and import circles between the package's
modules (the root package counted like any other module; imports inside functions and under
`TYPE_CHECKING` count). Issue 29's targets are read against
this output before and after a change.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import sys
import tokenize
from pathlib import Path

import networkx as nx


def code_lines(text: str, tree: ast.Module) -> int:
    """Lines holding a token other than a comment, a newline or an indent, docstrings left out."""
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.update(range(body[0].lineno, (body[0].end_lineno or 0) + 1))
    lines: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in skip and tok.type != tokenize.ENDMARKER:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - docstrings)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(node: ast.AST, here: str, is_pkg: bool) -> list[str]:
    """Absolute names of the modules an import statement reads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = here.split(".")
            base = base if is_pkg else base[:-1]
            base = base[: len(base) - node.level + 1]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        return [mod] + [f"{mod}.{a.name}" for a in node.names]
    return []


def measure(root: Path) -> dict[str, object]:
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    lines = code = big_modules = long_functions = globals_ = any_names = dict_any = 0
    imports = inner_imports = 0
    modules = {module_name(root, p) for p in files}
    graph: nx.DiGraph = nx.DiGraph()
    for path in files:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        here = module_name(root, path)
        graph.add_node(here)
        n = len(text.splitlines())
        lines += n
        code += code_lines(text, tree)
        big_modules += n > 500
        dict_any += text.count("dict[str, Any]")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                long_functions += (node.end_lineno or node.lineno) - node.lineno + 1 > 50
                for inner in ast.walk(node):
                    inner_imports += isinstance(inner, (ast.Import, ast.ImportFrom))
            elif isinstance(node, ast.Global):
                globals_ += 1
            elif getattr(node, "id", None) == "Any" or getattr(node, "attr", None) == "Any":
                any_names += 1
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports += 1
        # Import edges at any level, as a reader sees them: a function-level import and one
        # under `TYPE_CHECKING` are dependencies all the same.
        for node in ast.walk(tree):
            names = imported(node, here, path.name == "__init__.py")
            if isinstance(node, ast.ImportFrom) and all(n in modules for n in names[1:]):
                names = names[1:]  # `from pkg import submodule`: the submodule is the dependency
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != here:
                    graph.add_edge(here, name)
    cycles = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    return {
        "package": root.name,
        "files": len(files),
        "lines": lines,
        "code_lines": code,
        "modules_over_500_lines": big_modules,
        "functions_over_50_lines": long_functions,
        "function_level_imports": inner_imports,
        "function_level_import_share": round(inner_imports / imports, 3) if imports else 0.0,
        "any_per_1k_code_lines": round(1000 * any_names / code, 1) if code else 0.0,
        "dict_str_any": dict_any,
        "global_statements": globals_,
        "import_circles": sorted(sorted(c) for c in cycles),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="one JSON object per package")
    args = parser.parse_args(argv)
    for pkg in args.packages:
        figures = measure(pkg.resolve())
        if args.json:
            print(json.dumps(figures))
            continue
        for key, value in figures.items():
            if key == "import_circles":
                value = len(value)  # type: ignore[arg-type]
            print(f"{key:32} {value}")
        for circle in figures["import_circles"]:  # type: ignore[attr-defined]
            print(f"  circle: {' -> '.join(circle)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
