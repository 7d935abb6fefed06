"""The `looprail-validate` pre-commit hook (`.pre-commit-hooks.yaml`): pre-commit passes the
staged `capability.json` and `hooks.json` files; each goes to the command that checks it.

    python -m looprail.cli.precommit FILE...

A `capability.json` is checked as its capability folder (`looprail capability validate DIR`,
so the skills and agents it names are looked up beside it); a `hooks.json` as a native hooks
file (`looprail hooks validate FILE`). Any other file is ignored. Exit 1 when either finds an
error, each error one line naming its file and JSON path.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from looprail.cli import main as looprail


def main(argv: Sequence[str] | None = None) -> int:
    files = [Path(f) for f in (sys.argv[1:] if argv is None else argv)]
    folders = list(dict.fromkeys(str(f.parent) for f in files if f.name == "capability.json"))
    hooks = [str(f) for f in files if f.name == "hooks.json"]
    status = 0
    if folders:
        status = max(status, looprail(["capability", "validate", *folders]))
    if hooks:
        status = max(status, looprail(["hooks", "validate", *hooks]))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
