"""A pydantic-free proof that a parsed manifest has the shape `manifest.Capability` accepts,
derived from the model itself.

`render-hooks` validates a manifest whose bytes changed since its verdict was cached. Importing
pydantic and building the model costs more than the rest of that call together, yet almost every
changed manifest is valid. So `derive(core_schema)` prunes the model's own pydantic-core schema
(what pydantic validates with) to a small JSON table, which the verdict cache keeps next to the
verdicts (`verdicts.VerdictCache.validate`), and `compile_shape(table)` turns the table into a
check of the JSON. True means `Capability.model_validate(data)` succeeds; False means "not
proven": the caller validates with pydantic, so every problem is still reported in pydantic's
words. A schema node or setting this module does not know becomes `never` (not proven), and
where the two could differ (non-ASCII text or a newline in a pattern field, a lone surrogate, a
number a float cannot hold, a value pydantic would coerce) the answer is False, never a wrong
True. A property test holds the derived check to pydantic's verdict.

Only `re` here: this is on the `render-hooks` start path.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing is not imported at run time on this path
    from collections.abc import Callable
    from typing import Any

    Check = Callable[[Any], bool]

# Per core-schema type, the keys a node may carry and still be understood here (any other key
# makes the node `never`). `metadata`, `ref` and `serialization` never change validation.
_KEYS: dict[str, frozenset[str]] = {
    name: frozenset(keys.split()) | {"type", "metadata", "ref", "serialization"}
    for name, keys in {
        "any": "",
        "bool": "strict",
        "str": "strict min_length max_length pattern",
        "int": "strict gt ge lt le",
        "float": "strict gt ge lt le allow_inf_nan",
        "literal": "expected",
        "nullable": "schema strict",
        "default": "schema default default_factory",
        "list": "items_schema min_length max_length strict",
        "dict": "keys_schema values_schema min_length max_length strict",
        "tagged-union": "choices discriminator strict from_attributes",
        "union": "choices strict",
        "model": "schema config cls custom_init root_model",
        "model-fields": "fields model_name computed_fields extra_behavior",
        "model-field": "schema frozen serialization_alias serialization_exclude",
        "definitions": "schema definitions",
        "definition-ref": "schema_ref",
    }.items()
}
# Model settings that do not change what validates.
_CONFIG_KEYS = frozenset({"title", "extra_fields_behavior", "strict", "regex_engine"})
_NEVER: dict[str, Any] = {"type": "never"}


def derive(schema: Any) -> dict[str, Any]:
    """The table of a pydantic-core schema: the nodes understood here, each pruned to what
    validates; everything else `never`."""
    if not isinstance(schema, dict) or set(schema) - _KEYS.get(str(schema.get("type")), set()):
        return _NEVER
    kind = schema["type"]
    node = {k: v for k, v in schema.items() if k not in ("metadata", "ref", "serialization")}
    if kind == "str" and "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except (re.error, TypeError):
            return _NEVER
    elif kind == "literal":
        if not all(e is None or type(e) in (str, int, bool) for e in schema["expected"]):
            return _NEVER
        node["expected"] = list(schema["expected"])
    elif kind in ("nullable", "default"):  # a default is not checked: only a given value is
        node = {"type": kind, "schema": derive(schema["schema"])}
    elif kind == "list":
        node["items_schema"] = derive(schema.get("items_schema", {"type": "any"}))
    elif kind == "dict":
        node["keys_schema"] = derive(schema.get("keys_schema", {"type": "any"}))
        node["values_schema"] = derive(schema.get("values_schema", {"type": "any"}))
    elif kind == "tagged-union":
        choices = schema["choices"]
        if not isinstance(schema["discriminator"], str) or not all(
            isinstance(tag, str) for tag in choices
        ):
            return _NEVER
        node = {"type": kind, "discriminator": schema["discriminator"]}
        node["choices"] = {tag: derive(choice) for tag, choice in choices.items()}
    elif kind == "union":
        choices = [c[0] if type(c) is tuple else c for c in schema["choices"]]
        node = {"type": kind, "choices": [derive(c) for c in choices]}
    elif kind == "model":
        config = schema.get("config") or {}
        if schema.get("custom_init") or schema.get("root_model") or set(config) - _CONFIG_KEYS:
            return _NEVER
        fields = derive(schema["schema"])
        if "fields" not in fields:  # not model-fields, or not understood
            return _NEVER
        extra = fields.pop("extra") or config.get("extra_fields_behavior", "ignore")
        return {**fields, "extra": extra} if extra in ("forbid", "allow", "ignore") else _NEVER
    elif kind == "model-fields":
        fields = {}
        for name, field in schema["fields"].items():
            inner = derive(field)
            if inner["type"] == "never":
                return _NEVER
            fields[name] = inner
        return {"type": "model", "fields": fields, "extra": schema.get("extra_behavior")}
    elif kind == "model-field":
        inner = schema["schema"]
        required = not (isinstance(inner, dict) and inner.get("type") == "default")
        return {"type": "field", "required": required, "schema": derive(inner)}
    elif kind == "definitions":
        defs = {d.get("ref"): derive(d) for d in schema["definitions"] if isinstance(d, dict)}
        node = {"type": kind, "defs": defs, "schema": derive(schema["schema"])}
    return node


# --------------------------------------------------------------------------- the check


def _text(x: Any) -> bool:
    """A str pydantic-core can read (a lone surrogate from a JSON escape is refused there)."""
    if type(x) is not str:
        return False
    if x.isascii():
        return True
    try:
        x.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _bounds(node: dict[str, Any]) -> Check:
    gt, ge, lt, le = (node.get(k) for k in ("gt", "ge", "lt", "le"))
    return lambda x: (
        (gt is None or x > gt)
        and (ge is None or x >= ge)
        and (lt is None or x < lt)
        and (le is None or x <= le)
    )


def _sized(node: dict[str, Any], is_type: Check) -> Check:
    lo, hi = node.get("min_length") or 0, node.get("max_length")
    return lambda x: is_type(x) and len(x) >= lo and (hi is None or len(x) <= hi)


def _str(node: dict[str, Any]) -> Check:
    sized = _sized(node, _text)
    if "pattern" not in node:
        return sized
    # pydantic-core searches with the Rust regex engine, where `$` is the end of the text
    # only: on ASCII text without a newline, Python's `re` gives the same answer.
    rx = re.compile(node["pattern"], re.ASCII)
    return lambda x: sized(x) and x.isascii() and "\n" not in x and rx.search(x) is not None


def _float(node: dict[str, Any]) -> Check:
    # Strict float takes an int too (never a bool). Beyond 2**53 an int is not one float: not
    # proven. JSON's 1e999 parses to inf: not proven either.
    bounds = _bounds(node)

    def check(x: Any) -> bool:
        if type(x) is int:
            return -(2**53) <= x <= 2**53 and bounds(x)
        return type(x) is float and x == x and abs(x) != float("inf") and bounds(x)

    return check


def _model(node: dict[str, Any], build: Callable[[Any], Check]) -> Check:
    fields = {name: build(f["schema"]) for name, f in node["fields"].items()}
    required = [name for name, f in node["fields"].items() if f["required"]]
    extra = node["extra"]

    def check(x: Any) -> bool:
        if type(x) is not dict:
            return False
        for name in required:
            if name not in x:
                return False
        for k, v in x.items():
            field = fields.get(k)
            if field is None:
                if extra == "forbid" or not _text(k):
                    return False
            elif not field(v):
                return False
        return True

    return check


def compile_shape(table: dict[str, Any]) -> Check:
    """The check a `derive` table describes (a table it cannot read raises KeyError, TypeError
    or ValueError: the caller treats that as no table)."""
    defs: dict[str, Check] = {}

    def build(node: dict[str, Any]) -> Check:
        kind = node["type"]
        if kind == "never":
            return lambda x: False
        if kind == "any":
            return lambda x: True
        if kind == "bool":
            return lambda x: type(x) is bool
        if kind == "str":
            return _str(node)
        if kind == "int":
            bounds = _bounds(node)
            return lambda x: type(x) is int and bounds(x)
        if kind == "float":
            return _float(node)
        if kind == "literal":
            allowed = [(type(e), e) for e in node["expected"]]
            return lambda x: (type(x), x) in allowed
        if kind in ("nullable", "default"):
            inner = build(node["schema"])
            return inner if kind == "default" else lambda x: x is None or inner(x)
        if kind == "list":
            item = build(node["items_schema"])
            return _sized(node, lambda x: type(x) is list and all(item(i) for i in x))
        if kind == "dict":
            key, value = build(node["keys_schema"]), build(node["values_schema"])
            return _sized(
                node, lambda x: type(x) is dict and all(key(k) and value(v) for k, v in x.items())
            )
        if kind == "tagged-union":
            tag, choices = node["discriminator"], {t: build(c) for t, c in node["choices"].items()}

            def tagged(x: Any) -> bool:
                name = x.get(tag) if type(x) is dict else None
                choice = choices.get(name) if type(name) is str else None
                return choice is not None and choice(x)

            return tagged
        if kind == "union":  # smart mode: valid when any member is
            members = [build(c) for c in node["choices"]]
            return lambda x: any(m(x) for m in members)
        if kind == "model":
            return _model(node, build)
        if kind == "definition-ref":
            ref = node["schema_ref"]
            return lambda x: defs[ref](x)
        if kind == "definitions":
            defs.update((ref, build(d)) for ref, d in node["defs"].items())
            return build(node["schema"])
        raise ValueError(f"unknown node {kind!r}")

    check = build(table)

    def shape_ok(data: Any) -> bool:
        try:
            return check(data)
        except (RecursionError, KeyError):  # too deep, or a reference the table lacks
            return False

    return shape_ok
