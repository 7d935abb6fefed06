"""A pydantic-free proof that a parsed manifest has the shape `manifest.Capability` accepts,
derived from the model itself (`render-hooks` validates a changed manifest without paying for
pydantic).

`derive(core_schema)` prunes the model's own pydantic-core schema to a small JSON table (cached
by `verdicts`), `compile_shape(table)` turns it into a check. True means
`Capability.model_validate(data)` succeeds; False means "not proven" and the caller asks
pydantic. A node or setting not understood here is `never`, and wherever the two could differ
(non-ASCII text or a newline in a pattern field, a lone surrogate, a number a float cannot
hold, a value pydantic would coerce) the answer is False, never a wrong True. Only `re`: this is
on the `render-hooks` start path.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing is not imported at run time on this path
    from collections.abc import Callable
    from typing import Any

    Node = dict[str, Any]  # one node of a table (a pruned pydantic-core schema)
    Check = Callable[[Any], bool]
    Build = Callable[[Node], Check]

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
_NEVER: Node = {"type": "never"}


def derive(schema: Any) -> Node:
    """The table of a pydantic-core schema: the nodes understood here, each pruned to what
    validates; everything else `never`."""
    if not isinstance(schema, dict) or set(schema) - _KEYS.get(str(schema.get("type")), set()):
        return _NEVER
    node = {k: v for k, v in schema.items() if k not in ("metadata", "ref", "serialization")}
    prune = _PRUNE.get(schema["type"])
    return node if prune is None else prune(node)


def _pattern(node: Node) -> Node:
    try:
        re.compile(node.get("pattern", ""))
    except (re.error, TypeError):
        return _NEVER
    return node


def _literal(node: Node) -> Node:
    expected = node["expected"]
    return node if all(e is None or type(e) in (str, int, bool) for e in expected) else _NEVER


def _wrapper(node: Node) -> Node:
    # `default`: a default is not checked, only a given value is
    return {"type": node["type"], "schema": derive(node["schema"])}


def _items(node: Node) -> Node:
    for key in ("items_schema",) if node["type"] == "list" else ("keys_schema", "values_schema"):
        node[key] = derive(node.get(key, {"type": "any"}))
    return node


def _tagged(node: Node) -> Node:
    tag, choices = node["discriminator"], node["choices"]
    if not isinstance(tag, str) or not all(isinstance(t, str) for t in choices):
        return _NEVER  # a callable discriminator, or tags that are not text
    return {"type": node["type"], "discriminator": tag, "choices": _map(derive, choices)}


def _union(node: Node) -> Node:
    choices = [derive(c[0] if type(c) is tuple else c) for c in node["choices"]]
    return {"type": "union", "choices": choices}


def _model(node: Node) -> Node:
    config = node.get("config") or {}
    if node.get("custom_init") or node.get("root_model") or set(config) - _CONFIG_KEYS:
        return _NEVER
    fields = derive(node["schema"])
    if "fields" not in fields:  # not model-fields, or not understood
        return _NEVER
    extra = fields["extra"] or config.get("extra_fields_behavior", "ignore")
    return {**fields, "extra": extra} if extra in ("forbid", "allow", "ignore") else _NEVER


def _model_fields(node: Node) -> Node:
    fields = _map(derive, node["fields"])
    if any(f["type"] == "never" for f in fields.values()):
        return _NEVER  # an alias, say: which key holds the field is not known here
    return {"type": "model", "fields": fields, "extra": node.get("extra_behavior")}


def _model_field(node: Node) -> Node:
    inner = node["schema"]
    required = not (isinstance(inner, dict) and inner.get("type") == "default")
    return {"type": "field", "required": required, "schema": derive(inner)}


def _definitions(node: Node) -> Node:
    defs = {d.get("ref"): derive(d) for d in node["definitions"] if isinstance(d, dict)}
    return {"type": "definitions", "defs": defs, "schema": derive(node["schema"])}


def _map(f: Callable[[Any], Any], items: Node) -> Node:
    return {k: f(v) for k, v in items.items()}


_PRUNE: dict[str, Callable[[Node], Node]] = {
    "str": _pattern,
    "literal": _literal,
    "nullable": _wrapper,
    "default": _wrapper,
    "list": _items,
    "dict": _items,
    "tagged-union": _tagged,
    "union": _union,
    "model": _model,
    "model-fields": _model_fields,
    "model-field": _model_field,
    "definitions": _definitions,
}


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


def _bounds(node: Node) -> Check:
    gt, ge, lt, le = (node.get(k) for k in ("gt", "ge", "lt", "le"))
    return lambda x: (
        (gt is None or x > gt)
        and (ge is None or x >= ge)
        and (lt is None or x < lt)
        and (le is None or x <= le)
    )


def _sized(node: Node, is_type: Check) -> Check:
    lo, hi = node.get("min_length") or 0, node.get("max_length")
    return lambda x: is_type(x) and len(x) >= lo and (hi is None or len(x) <= hi)


def _str(node: Node, build: Build) -> Check:
    sized = _sized(node, _text)
    if "pattern" not in node:
        return sized
    # pydantic-core searches with the Rust regex engine, where `$` is the end of the text
    # only: on ASCII text without a newline, Python's `re` gives the same answer.
    rx = re.compile(node["pattern"], re.ASCII)
    return lambda x: sized(x) and x.isascii() and "\n" not in x and rx.search(x) is not None


def _int(node: Node, build: Build) -> Check:
    bounds = _bounds(node)
    return lambda x: type(x) is int and bounds(x)


def _float(node: Node, build: Build) -> Check:
    # Strict float takes an int too (never a bool). Beyond 2**53 an int is not one float: not
    # proven. JSON's 1e999 parses to inf: not proven either.
    bounds = _bounds(node)

    def check(x: Any) -> bool:
        if type(x) is int:
            return -(2**53) <= x <= 2**53 and bounds(x)
        return type(x) is float and x == x and abs(x) != float("inf") and bounds(x)

    return check


def _one_of(node: Node, build: Build) -> Check:
    allowed = [(type(e), e) for e in node["expected"]]
    return lambda x: (type(x), x) in allowed


def _nullable(node: Node, build: Build) -> Check:
    inner = build(node["schema"])
    return lambda x: x is None or inner(x)


def _list(node: Node, build: Build) -> Check:
    item = build(node["items_schema"])
    return _sized(node, lambda x: type(x) is list and all(item(i) for i in x))


def _dict(node: Node, build: Build) -> Check:
    key, value = build(node["keys_schema"]), build(node["values_schema"])
    return _sized(
        node, lambda x: type(x) is dict and all(key(k) and value(v) for k, v in x.items())
    )


def _tagged_union(node: Node, build: Build) -> Check:
    tag, choices = node["discriminator"], _map(build, node["choices"])

    def check(x: Any) -> bool:
        name = x.get(tag) if type(x) is dict else None
        choice = choices.get(name) if type(name) is str else None
        return choice is not None and choice(x)

    return check


def _any_of(node: Node, build: Build) -> Check:
    members = [build(c) for c in node["choices"]]  # smart mode: valid when any member is
    return lambda x: any(m(x) for m in members)


def _fields(node: Node, build: Build) -> Check:
    fields = {name: build(f["schema"]) for name, f in node["fields"].items()}
    required = [name for name, f in node["fields"].items() if f["required"]]
    forbid = node["extra"] == "forbid"

    def check(x: Any) -> bool:
        if type(x) is not dict:
            return False
        for name in required:
            if name not in x:
                return False
        for k, v in x.items():
            field = fields.get(k)
            if field is None:
                if forbid or not _text(k):
                    return False
            elif not field(v):
                return False
        return True

    return check


_CHECKS: dict[str, Callable[[Node, Build], Check]] = {
    "never": lambda node, build: lambda x: False,
    "any": lambda node, build: lambda x: True,
    "bool": lambda node, build: lambda x: type(x) is bool,
    "str": _str,
    "int": _int,
    "float": _float,
    "literal": _one_of,
    "nullable": _nullable,
    "default": lambda node, build: build(node["schema"]),
    "list": _list,
    "dict": _dict,
    "tagged-union": _tagged_union,
    "union": _any_of,
    "model": _fields,
}


def compile_shape(table: Node) -> Check:
    """The check a `derive` table describes (a table it cannot read raises KeyError, TypeError
    or ValueError: the caller treats that as no table)."""
    defs: dict[str, Check] = {}

    def build(node: Node) -> Check:
        kind = node["type"]
        if kind == "definition-ref":
            ref = node["schema_ref"]
            return lambda x: defs[ref](x)
        if kind == "definitions":
            defs.update((ref, build(d)) for ref, d in node["defs"].items())
            return build(node["schema"])
        if kind not in _CHECKS:
            raise ValueError(f"unknown node {kind!r}")
        return _CHECKS[kind](node, build)

    check = build(table)

    def shape_ok(data: Any) -> bool:
        try:
            return check(data)
        except (RecursionError, KeyError):  # too deep, or a reference the table lacks
            return False

    return shape_ok
