"""Refresh looprail's copy of the reference's model catalog.

    python scripts/model_catalog.py $LOOPRAIL_REFERENCE

Writes `looprail/runtime/model_catalog.json`: gsd-core's `bin/shared/model-catalog.json` as it
stands, plus a `_source` key naming where it came from and its licence. The catalog is data
(which tier each agent gets per profile, each runtime's model per tier, the provider presets);
`looprail/runtime/models.py` reads it, and `tests/runtime/test_models.py` checks the copy still
equals the reference's file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "looprail" / "runtime" / "model_catalog.json"


def main(gsd_tools: str) -> int:
    core = Path(gsd_tools).resolve().parent.parent  # …/gsd-core/bin/gsd-tools.cjs
    source = core / "bin" / "shared" / "model-catalog.json"
    package = json.loads((core.parent / "package.json").read_text(encoding="utf-8"))
    catalog = json.loads(source.read_text(encoding="utf-8"))
    licence = (core.parent / "LICENSE").read_text(encoding="utf-8")
    holder = next(line for line in licence.splitlines() if line.startswith("Copyright"))
    header = {
        "_source": (
            f"{package['name']} {package['version']}, gsd-core/bin/shared/model-catalog.json "
            f"(MIT License, {holder}); refreshed by scripts/model_catalog.py"
        )
    }
    TARGET.write_text(json.dumps({**header, **catalog}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
