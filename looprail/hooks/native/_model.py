"""What the hooks.json models share: the strict base model and the words of their problems.

Each rule words its problem for people where it is declared: `says` on a field, the model's
`MISSING` and `unknown` for absent and unknown members, `cross` for rules across members (run
even when a member failed, so every problem is reported at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, NoReturn

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    model_validator,
)
from pydantic.json_schema import JsonDict
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

Loc = tuple[str | int, ...]
Failure = tuple[Loc, PydanticCustomError]
Context = Mapping[str, object]  # `scope` of the file, `event` of an Action's Hook

# What only the models check; the schema accepts documents that break them.
SCHEMA_CANNOT_SAY = {
    "regex": "a filter string compiles as a regular expression",
    "pairing": "an Action's code can pair with its outcome (pass has 0, a failure non-zero "
    "or null)",
    "nested-preset": "a Preset member is not itself a Preset (a rule across entries)",
}


def problem(reason: str, kind: str = "looprail") -> PydanticCustomError:
    """One problem, in the words a person reads."""
    return PydanticCustomError(kind, "{reason}", {"reason": reason})


def cannot_say(reason: str) -> PydanticCustomError:
    """The problem of a `SCHEMA_CANNOT_SAY` rule: its type is `schema_cannot_say`."""
    return problem(reason, "schema_cannot_say")


def fail(failures: Sequence[Failure], title: str = "hooks.json") -> NoReturn:
    """Raise every failure at once, each at its place below the value being validated."""
    raise ValidationError.from_exception_data(
        title, [InitErrorDetails(type=error, loc=loc, input=None) for loc, error in failures]
    )


def failures_of(exc: ValidationError) -> list[Failure]:
    """The failures of `exc`, the type of each kept (`schema_cannot_say` stays recognisable)."""
    return [(tuple(e["loc"]), problem(e["msg"], e["type"])) for e in exc.errors()]


def says(reason: str | Callable[[Any], str]) -> WrapValidator:
    """A field whose value fails its type or constraints has this one problem."""

    def words(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise problem(reason if isinstance(reason, str) else reason(value)) from None

    return WrapValidator(words)


def no_default(schema: JsonDict) -> None:
    schema.pop("default", None)


def absent(**kwargs: Any) -> Any:
    """An optional member that must not be `null` when present: absent reads as None, and the
    schema shows no default (None is not a value the file may hold)."""
    return Field(default=None, json_schema_extra=no_default, **kwargs)


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else [value]


class Doc(BaseModel):
    """A strict hooks.json object: `1` is not `true`, `"5"` is not `5`; camelCase members have an
    explicit alias."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
        regex_engine="python-re",  # the `re` of filters, and lookahead for entry names
    )
    MISSING: ClassVar[Mapping[str, str]] = {}
    NOT_AN_OBJECT: ClassVar[str] = "must be an object"

    @classmethod
    def unknown(cls, key: str) -> str:
        """The problem of a member the object may not have."""
        return "unknown field"

    @classmethod
    def cross(cls, value: dict[str, object], failed: set[Loc], context: Context) -> list[Failure]:
        """Rules across members, on the raw object (`failed`: where members already failed)."""
        return []

    @classmethod
    def arrange(
        cls, value: dict[str, object], failures: list[Failure], context: Context
    ) -> list[Failure]:
        """Unknown members first, then the members' problems, then the rules across them."""
        unknown = [f for f in failures if len(f[0]) == 1 and f[1].type == "extra_forbidden"]
        others = [f for f in failures if f not in unknown]
        return unknown + others + cls.cross(value, {loc for loc, _ in failures}, context)

    def whole(self) -> list[Failure]:
        """Rules across the members of a valid object."""
        return []

    @model_validator(mode="wrap")
    @classmethod
    def _words(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        if not isinstance(value, dict):
            fail([((), problem(cls.NOT_AN_OBJECT))])
        model, failures = None, []
        try:
            model = handler(value)
        except ValidationError as exc:
            for loc, error in failures_of(exc):
                if len(loc) == 1 and error.type == "missing":
                    error = problem(cls.MISSING.get(str(loc[0]), "is required"))
                elif len(loc) == 1 and error.type == "extra_forbidden":
                    error = problem(cls.unknown(str(loc[0])), "extra_forbidden")
                failures.append((loc, error))
        failures = cls.arrange(value, failures, info.context or {})
        if not failures and model is not None:
            failures = model.whole()
        if failures:
            fail(failures, cls.__name__)
        return model
