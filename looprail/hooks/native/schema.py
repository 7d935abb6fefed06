"""The JSON Schema of a native hooks file, generated from the document models
(`hooks.native.document`); pydantic is imported only when a schema is asked for."""

from __future__ import annotations

from pydantic.json_schema import JsonDict

from looprail.hooks.native.document import HooksDocument

SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"


def hooks_json_schema() -> JsonDict:
    """JSON Schema (draft 2020-12) of hooks.json, for editors, generated from
    `HooksDocument`. `looprail hooks validate` is the authority: it also checks what a schema
    cannot say (`document.SCHEMA_CANNOT_SAY`: regular expressions compile, an Action's `code`
    can pair with its `outcome`, Preset members are not Presets)."""
    return {"$schema": SCHEMA_URI, **HooksDocument.model_json_schema(by_alias=True)}
