"""`looprail schema capability|hooks`: JSON Schemas for editors."""

from __future__ import annotations

import json
import sys

from looprail.cli._common import group
from looprail.hooks.manifest import capability_json_schema
from looprail.hooks.native.document import hooks_json_schema


def register(sub) -> None:
    _, cmds = group(sub, "schema", "print a JSON Schema (for editors and tools)")
    p = cmds.add_parser("capability", help="JSON Schema of capability.json")
    p.set_defaults(handler=_print, schema=capability_json_schema)
    p = cmds.add_parser("hooks", help="JSON Schema of hooks.json (native hooks)")
    p.set_defaults(handler=_print, schema=hooks_json_schema)


def _print(args) -> int:
    json.dump(args.schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
