"""The `looprail-validate` pre-commit hook (`python -m looprail.cli.precommit FILE...`): a staged
`capability.json` goes to `looprail capability validate` (its folder), a `hooks.json` to
`looprail hooks validate`; any other file is ignored."""

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
