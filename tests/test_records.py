"""`looprail.records.NamedTuple` builds the class `typing.NamedTuple` would (the capability set's
records use it on the `render-hooks` hot path, where `typing` is not imported)."""

from __future__ import annotations

import typing
from functools import cached_property

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.records import NamedTuple


class Light(NamedTuple):
    """A record."""

    a: int
    b: str = "b"
    c: tuple[int, ...] = ()

    @property
    def both(self) -> str:
        return f"{self.a}{self.b}"


class Typed(typing.NamedTuple):
    """A record."""

    a: int
    b: str = "b"
    c: tuple[int, ...] = ()

    @property
    def both(self) -> str:
        return f"{self.a}{self.b}"


def test_the_same_class_as_typing_builds():
    for cls in (Light, Typed):
        one = cls(1)
        assert one == (1, "b", ())
        assert cls._fields == ("a", "b", "c")
        assert cls._field_defaults == {"b": "b", "c": ()}
        assert one._replace(b="x").both == "1x"
        assert cls.__doc__ == "A record."
        assert list(cls.__annotations__) == ["a", "b", "c"]
        with pytest.raises(TypeError):
            cls()
    assert Light.__qualname__ == "Light" and Light.__module__ == __name__
    assert repr(Light(1)) == "Light(a=1, b='b', c=())"


def test_a_field_without_a_default_after_one_with_a_default_is_refused():
    with pytest.raises(TypeError, match="without a default follows one with a default"):

        class Bad(NamedTuple):
            a: int = 1
            b: int


def test_descriptors_of_a_subclass_work_as_with_typing():
    class Cached(Light):
        @cached_property
        def twice(self) -> int:
            return self.a * 2

    assert Cached(3).twice == 6


def _outcome(make):
    try:
        return "ok", tuple(make())
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, None


@settings(max_examples=300, deadline=None)
@given(
    args=st.lists(st.integers(), max_size=4),
    kwargs=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(), max_size=3),
    made=st.lists(st.integers(), max_size=4),
)
def test_construction_make_and_replace_behave_as_typings(args, kwargs, made):
    """Any positional and keyword arguments, any `_make` length, any `_replace` names: the same
    record or the same kind of error as `typing.NamedTuple`."""
    assert _outcome(lambda: Light(*args, **kwargs)) == _outcome(lambda: Typed(*args, **kwargs))
    assert _outcome(lambda: Light._make(made)) == _outcome(lambda: Typed._make(made))
    one, two = Light(1), Typed(1)
    assert _outcome(lambda: one._replace(**kwargs)) == _outcome(lambda: two._replace(**kwargs))
    assert one._asdict() == two._asdict()


def test_a_record_pickles_and_matches_as_typings():
    import pickle

    record = Light(2, "x", (1,))
    assert pickle.loads(pickle.dumps(record)) == record
    assert type(pickle.loads(pickle.dumps(record))) is Light
    match record:
        case Light(a, b, c):
            assert (a, b, c) == (2, "x", (1,))
    assert Light.__match_args__ == Typed.__match_args__
