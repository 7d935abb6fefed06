"""`typing.NamedTuple`, for the `render-hooks` hot path.

Hand-written on purpose: importing `typing` costs a warm `render-hooks` call about a tenth of
its instructions (14M of 134M, measured with callgrind), and the records of the capability set
(`hooks/capset.py`) are all it wanted from it. This builds the same class `typing.NamedTuple`
builds (`collections.namedtuple` from the class body's annotations, defaults and methods), so
checkers read `typing.NamedTuple` (the `TYPE_CHECKING` import in each module that uses it) and
the interpreter runs this one. Annotations stay strings (`from __future__ import annotations`):
nothing evaluates them.
"""

from __future__ import annotations

import collections

# What a class body holds besides its fields and methods (typing's `_special`).
_SPECIAL = frozenset({"__module__", "__qualname__", "__annotations__", "__doc__"})


class _Meta(type):
    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, object]) -> type:
        if not bases:  # `NamedTuple` itself
            return super().__new__(mcls, name, bases, ns)
        annotations = ns.get("__annotations__", {})
        assert isinstance(annotations, dict)
        fields = list(annotations)
        defaults = [ns[f] for f in fields if f in ns]
        if any(f not in ns for f in fields[len(fields) - len(defaults) :]):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        module = str(ns["__module__"])
        cls = collections.namedtuple(name, fields, defaults=defaults, module=module)  # type: ignore[misc]
        cls.__qualname__ = str(ns.get("__qualname__", name))
        cls.__annotations__ = annotations
        if ns.get("__doc__"):
            cls.__doc__ = ns["__doc__"]  # type: ignore[assignment]
        for key, value in ns.items():
            if key not in _SPECIAL and key not in annotations:
                setattr(cls, key, value)
                set_name = getattr(value, "__set_name__", None)
                if set_name is not None:
                    set_name(cls, key)
        return cls


class NamedTuple(metaclass=_Meta):
    """Subclass it as `typing.NamedTuple`: `class Root(NamedTuple): path: str`."""


__all__ = ["NamedTuple"]
