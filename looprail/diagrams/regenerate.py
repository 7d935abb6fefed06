"""`looprail diagram --regenerate-docs` (or `python -m looprail.diagrams.regenerate`): the
repository's `diagrams/` folder, each of `PICTURES` as `.dot` and `.mmd` (deterministic, checked
for drift by the tests), `.svg` and `.png` (Graphviz's bytes vary by version: not compared),
and a `README.md` embedding the Mermaid text. The capability search path is pinned to the
example capabilities, so the output does not depend on who runs it.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from looprail.diagrams import load_graph
from looprail.diagrams.render import pipe_dot, require_dot, to_dot, to_mermaid
from looprail.errors import LooprailError
from looprail.fsutil import atomic_write
from looprail.points import POINTS

REPO = Path(__file__).resolve().parents[2]
COMMAND = "looprail diagram --regenerate-docs"


@dataclass(frozen=True)
class Picture:
    name: str
    title: str
    project: str | None = None  # relative to the repository
    capabilities: tuple[str, ...] = ()
    hooks: bool = False
    about: str = ""


PICTURES = (
    Picture(
        "loop",
        "looprail loop",
        about="The default loop (`looprail.machine.spec.DEFAULT_LOOP`): the compiled states, "
        f"the wave loop inside `execute`, and the {len(POINTS)} points each transition "
        "dispatches.",
    ),
    Picture(
        "hello-loop",
        "looprail loop · hello-loop",
        project="examples/hello-loop",
        capabilities=("examples/capabilities",),
        hooks=True,
        about="`examples/hello-loop` with `--capabilities examples/capabilities`: the active "
        "hooks hang off the points where they fire.",
    ),
)


_README_HEAD = f"""\
# Diagrams

Pictures of the loop, drawn from the compiled state machine (and, for the example, the
active hooks of its capabilities). Do not edit: regenerate them with

```sh
{COMMAND}
```

A test fails when the `.dot` or `.mmd` files here differ from what that command draws.
Draw your own project with `looprail diagram PROJECT --hooks -o loop.svg`, and overlay
a run with `--run RUN`.
"""


def texts(repo: Path = REPO) -> dict[str, str]:
    """`{file name: text}` of every deterministic file (`.dot`, `.mmd`, `README.md`)."""
    out: dict[str, str] = {}
    readme = _README_HEAD
    with tempfile.TemporaryDirectory(prefix="looprail-diagrams-") as home:
        for pic in PICTURES:
            graph, _ = load_graph(
                repo / pic.project if pic.project else None,
                [repo / c for c in pic.capabilities],
                hooks=pic.hooks,
                title=pic.title,
                env={},
                home=home,
                use_cache=False,
            )
            out[f"{pic.name}.dot"] = to_dot(graph)
            out[f"{pic.name}.mmd"] = mermaid = to_mermaid(graph)
            readme += _readme_section(pic, mermaid.rstrip("\n"))
    out["README.md"] = readme
    return out


def _readme_section(pic: Picture, mermaid: str) -> str:
    n = pic.name
    return f"""
## {pic.title}

{pic.about}

![{pic.title}]({n}.svg)

Files: [`{n}.svg`]({n}.svg), [`{n}.png`]({n}.png), [`{n}.dot`]({n}.dot), [`{n}.mmd`]({n}.mmd).

<details><summary>Mermaid</summary>

```mermaid
{mermaid}
```

</details>
"""


def regenerate(target: Path | None = None, *, pictures: bool = True) -> list[Path]:
    """Write every file into `target` (default: the repository's `diagrams/`); with
    `pictures`, also `.svg` and `.png` through Graphviz. Returns the files written."""
    target = target or REPO / "diagrams"
    if pictures:
        require_dot()  # fail before writing anything
    files = texts()
    blobs: dict[str, bytes] = {name: text.encode() for name, text in files.items()}
    if pictures:
        for pic in PICTURES:
            source = files[f"{pic.name}.dot"]
            blobs[f"{pic.name}.svg"] = pipe_dot(source, "svg")
            blobs[f"{pic.name}.png"] = pipe_dot(source, "png")
    target.mkdir(parents=True, exist_ok=True)
    for name, blob in blobs.items():
        atomic_write(target / name, blob)
    return [target / name for name in blobs]


def main() -> int:
    if not (REPO / "pyproject.toml").is_file() or not (REPO / "examples").is_dir():
        raise LooprailError(f"{REPO}: not a looprail checkout; --regenerate-docs needs one")
    for path in regenerate():
        print(path.relative_to(REPO))
    return 0


if __name__ == "__main__":  # pragma: no cover
    try:
        sys.exit(main())
    except LooprailError as exc:
        print(f"looprail: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
