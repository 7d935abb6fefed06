"""`typing.NamedTuple`, for the `render-hooks` hot path.

Hand-written on purpose: importing `typing` costs a warm `render-hooks` call about a tenth of
its instructions (14M of 134M, measured with callgrind), and `collections.namedtuple` compiles
a `__new__` from source for each class (57 of its 82 µs; 2M instructions for the capability
set's five records). The records of the capability set (`hooks/capset.py`) are all the hot path
wanted from either. A record here is what `typing.NamedTuple` builds (a tuple with named fields,
defaults, `_fields`, `_field_defaults`, `_make`, `_replace`, `_asdict`, pickling) with one
shared `__new__`, so checkers read `typing.NamedTuple` (the `TYPE_CHECKING` import in each
module that uses it) and the interpreter runs this one. Annotations stay strings (`from
__future__ import annotations`): nothing evaluates them.
"""

from __future__ import annotations

from operator import itemgetter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, ClassVar

# What a class body holds besides its fields and methods (typing's `_special`).
_SPECIAL = frozenset({"__module__", "__qualname__", "__annotations__", "__doc__"})


class _Record(tuple):
    """The methods every record shares; `_Meta` adds each class's fields."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _field_defaults: ClassVar[dict[str, object]] = {}

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        fields = cls._fields
        if len(args) == len(fields) and not kwargs:
            return tuple.__new__(cls, args)
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__}() takes {len(fields)} arguments ({len(args)} given)")
        values = list(args)
        for name in fields[len(args) :]:
            if name in kwargs:
                values.append(kwargs.pop(name))
            elif name in cls._field_defaults:
                values.append(cls._field_defaults[name])
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
        if kwargs:
            raise TypeError(f"{cls.__name__}() got an unexpected argument: {next(iter(kwargs))!r}")
        return tuple.__new__(cls, values)

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> Any:
        values = tuple(iterable)
        if len(values) != len(cls._fields):
            raise TypeError(f"expected {len(cls._fields)} arguments, got {len(values)}")
        return tuple.__new__(cls, values)

    def _replace(self, **changes: Any) -> Any:
        values = [changes.pop(name, value) for name, value in zip(self._fields, self, strict=True)]
        if changes:
            raise ValueError(f"got unexpected field names: {list(changes)!r}")
        return tuple.__new__(type(self), values)

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._fields, self, strict=True))

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({inner})"

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)


class _Meta(type):
    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, object]) -> type:
        if not bases:  # `NamedTuple` itself
            return super().__new__(mcls, name, bases, ns)
        annotations = ns.get("__annotations__", {})
        assert isinstance(annotations, dict)
        fields = tuple(annotations)
        defaults = {f: ns[f] for f in fields if f in ns}
        if any(f not in defaults for f in fields[len(fields) - len(defaults) :]):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        body: dict[str, object] = {
            key: value for key, value in ns.items() if key not in fields or key in _SPECIAL
        }
        body.update(
            __slots__=(),
            _fields=fields,
            _field_defaults=defaults,
            __match_args__=fields,
            __annotations__=annotations,
        )
        for i, field in enumerate(fields):
            body[field] = property(itemgetter(i), doc=f"Alias for field number {i}")
        # `type`, not `_Meta`: a subclass of a record is a plain class, as with typing.
        return type(name, (_Record,), body)


class NamedTuple(metaclass=_Meta):
    """Subclass it as `typing.NamedTuple`: `class Root(NamedTuple): path: str`."""


__all__ = ["NamedTuple"]
