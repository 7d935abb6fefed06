"""What the hooks.json models share: the strict base model, the rules across members (`cross`,
run even when a member failed, so every problem is reported at once), and the words of the
problems pydantic finds (`Says` on a field, `MISSING` and `unknown` on the model), applied where
each error becomes an `Issue` (`manifest.pydantic_issues` with `document.hooks_words`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator
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


@dataclass(frozen=True)
class Says:
    """A field's one problem when its value fails its type or constraints (a function of the
    value, or the words)."""

    reason: str | Callable[[Any], str]

    def words(self, value: Any) -> str:
        return self.reason if isinstance(self.reason, str) else self.reason(value)


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

    @classmethod
    def reason(cls, key: str | int, kind: str, value: Any) -> str | None:
        """The words of a problem pydantic found with member `key` (None: pydantic's own)."""
        if kind == "missing":
            return cls.MISSING.get(str(key))
        if kind == "extra_forbidden":
            return cls.unknown(str(key))
        fields = {f.alias or name: f for name, f in cls.model_fields.items()}
        says = [m for m in fields[key].metadata if isinstance(m, Says)] if key in fields else []
        return says[0].words(value) if says else None

    @model_validator(mode="wrap")
    @classmethod
    def _rules(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        if not isinstance(value, dict):
            return handler(value)  # not an object: pydantic says so
        model, failures = None, []
        try:
            model = handler(value)
        except ValidationError as exc:
            # each type kept: `schema_cannot_say` stays recognisable, pydantic's are worded later
            failures = [(tuple(e["loc"]), problem(e["msg"], e["type"])) for e in exc.errors()]
        failures = cls.arrange(value, failures, info.context or {})
        if not failures and model is not None:
            failures = model.whole()
        if failures:
            fail(failures, cls.__name__)
        return model
