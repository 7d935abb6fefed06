"""The hooks.json document as pydantic models, the one declaration of the format: the reader
looprail runs, and the JSON Schema generated from them (`hooks_json_schema`). The cross-field
rules appear in the schema through each model's `json_schema_extra`; what a schema cannot state
is listed in `SCHEMA_CANNOT_SAY` and fails with the error type `schema_cannot_say`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import ConfigDict, Field, ValidationInfo
from pydantic import WrapValidator as Wrap
from pydantic.json_schema import JsonDict, JsonValue
from pydantic_core import ErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ValidatorFunctionWrapHandler as Handler

from looprail.config import FORBIDDEN_SEGMENTS
from looprail.hooks.native._model import (
    SCHEMA_CANNOT_SAY,
    Context,
    Doc,
    Failure,
    Loc,
    Says,
    absent,
    as_list,
    cannot_say,
    fail,
    problem,
)
from looprail.hooks.native.actions import ACTION_MODELS, Action, is_json_number
from looprail.hooks.native.events import (
    EVENT_NAMES,
    EVENTS,
    HOOK_RESULT_EXACT_KEYS,
    HOOK_RESULT_FILTER_KEYS,
    OUTCOMES,
    unknown_event_message,
)
from looprail.hooks.native.filters import compile_pattern

__all__ = ["SCHEMA_CANNOT_SAY", "HookEntry", "HooksDocument", "PresetEntry", "hooks_json_schema"]

DEFAULT_TIMEOUT_MS = 5000
MAX_TIMEOUT_MS = 3_600_000
SECTION_RE = re.compile(r"^[^/]+/[^/]+$")
# A Preset member: `local/name` or `owner/repo/name` (docs/native-hooks.md, Presets).
REF_RE = re.compile(r"^local/[^/\x00]+$|^(?!local/)[A-Za-z0-9._-]+/[A-Za-z0-9._-]+/[^/\x00]+$")
# Entry names the reader refuses: they would shadow JavaScript object internals in the host.
ENTRY_NAME = rf"^(?!(?:{'|'.join(sorted(FORBIDDEN_SEGMENTS))})$)[^/\x00]+$"
BLOCK_EVENTS: list[JsonValue] = [name for name, spec in EVENTS.items() if spec.failure == "block"]
_KEY_HINTS = {"timeout": "timeoutMs", "hook": "event", "command": "shell"}
IS_BOOL = Says("must be true or false")
DESCRIPTION = "is required and must be a string"

Scalar = Union[str, int, float, bool, None]  # noqa: UP007 - a runtime value, read by pydantic
FilterValue = Union[Scalar, list[Scalar]]  # noqa: UP007
EventName = Literal[EVENT_NAMES]  # type: ignore[valid-type]  # the catalog, as a Literal


def _unique_items_no_default(schema: JsonDict) -> None:
    schema.pop("default", None)
    schema["uniqueItems"] = True  # what `_unique_list` checks


def _unique_list(pattern: re.Pattern[str], kind: str, bad: str, duplicate: str) -> Wrap:
    """A list of unique strings matching `pattern`; `bad` and `duplicate` word the problem of
    one item (`{}` is the item, as JSON)."""

    def check(value: Any, handler: Handler) -> Any:
        if not isinstance(value, list):
            raise problem(f"must be an array of {kind}")
        failures: list[Failure] = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not pattern.fullmatch(item):
                failures.append(((i,), problem(bad.format(json.dumps(item)))))
            elif item in value[:i]:
                failures.append(((i,), problem(duplicate.format(json.dumps(item)))))
        if failures:
            fail(failures)
        return handler(value)

    return Wrap(check)


def _filter_problem(key: str, value: object, hook_result: bool) -> str | PydanticCustomError | None:
    """What is wrong with one value a filter field lists (None: nothing)."""
    if hook_result and key == "outcome":
        if value not in OUTCOMES:
            return f"{json.dumps(value)} is not an outcome (one of {', '.join(OUTCOMES)})"
    elif hook_result and key in HOOK_RESULT_EXACT_KEYS:  # code
        if value is not None and not is_json_number(value):
            return f"{json.dumps(value)} is not an exit code (a number or null)"
    elif hook_result and not isinstance(value, str):
        return "must be a regular expression string (or an array of them)"
    elif not (value is None or isinstance(value, (str, bool)) or is_json_number(value)):
        return "must be a string, number, boolean or null (or an array of them)"
    elif isinstance(value, str):
        try:
            compile_pattern(value)
        except re.error as exc:
            return cannot_say(f"invalid regular expression {json.dumps(value)}: {exc}")
    return None


def _filter(value: Any, handler: Handler, info: ValidationInfo) -> Any:
    """A filter's fields and values; a `hook_result` Hook filters on its own few fields."""
    if not isinstance(value, dict):
        raise problem("must be an object of field → pattern or value")
    hook_result = info.data.get("event") == "hook_result"
    failures: list[Failure] = []
    for key, expected in value.items():
        if hook_result and key not in HOOK_RESULT_FILTER_KEYS:
            allowed = ", ".join(HOOK_RESULT_FILTER_KEYS)
            failures.append(
                ((key,), problem(f"not a hook_result filter field (allowed: {allowed})"))
            )
            continue
        listed = isinstance(expected, list)
        for i, member in enumerate(as_list(expected)):
            reason = _filter_problem(key, member, hook_result)
            if reason is not None:
                loc: Loc = (key, i) if listed else (key,)
                failures.append((loc, problem(reason) if isinstance(reason, str) else reason))
    if failures:
        fail(failures)
    return handler(value)


def _one_or_array(item: JsonDict, **array: JsonValue) -> JsonDict:
    return {"anyOf": [item, {"type": "array", **array, "items": item}]}


def _outcomes_only(allowed: list[JsonValue]) -> JsonDict:
    return {"properties": {"outcome": _one_or_array({"enum": allowed}, minItems=1)}}


def _hook_rules(schema: JsonDict) -> None:
    """The Hook's cross-field rules, as `HookEntry.cross` and the validators enforce them."""
    regex = _one_or_array({"type": "string"})
    properties: JsonDict = {
        **{key: regex for key in HOOK_RESULT_FILTER_KEYS if key not in HOOK_RESULT_EXACT_KEYS},
        "outcome": _one_or_array({"enum": [*OUTCOMES]}),
        "code": _one_or_array({"type": ["number", "null"]}),
    }
    hook_result_filter: JsonDict = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    schema["anyOf"] = [{"required": ["shell"]}, {"required": ["action"]}]
    schema["allOf"] = [
        {  # an Action is selected by its owner's outcome: pass, or the event's failure kind
            "if": {"properties": {"event": {"enum": BLOCK_EVENTS}}, "required": ["event"]},
            "then": {"properties": {"action": _outcomes_only(["pass", "block"])}},
            "else": {"properties": {"action": _outcomes_only(["pass", "report"])}},
        },
        {
            "if": {"properties": {"event": {"const": "hook_result"}}, "required": ["event"]},
            "then": {"properties": {"filter": hook_result_filter}},
        },
        {"if": {"required": ["maxSelections"]}, "then": {"required": ["action"]}},
    ]


# The order a Hook's problems are listed in ("-": the Hook itself, which needs shell or action).
_READING_ORDER = [
    "description",
    "event",
    "when",
    "shell",
    "-",
    "filter",
    "action",
    "default",
    "timeoutMs",
    "maxSelections",
]
ShellString = Annotated[str, Says("must be a string (a /bin/sh command)")]


class HookEntry(Doc):
    """A Hook: runs `when` then `shell` at `event` when `filter` matches."""

    model_config = ConfigDict(json_schema_extra=_hook_rules)

    description: Annotated[str, Says(DESCRIPTION)]
    event: Annotated[EventName, Says(unknown_event_message)]
    filter: Annotated[dict[str, FilterValue], Wrap(_filter)] = absent(
        description="ANDed fields of the event candidate; strings are regular expressions, "
        "other scalars match exactly, arrays are any-of."
    )
    when: ShellString = absent(description="Precondition /bin/sh command.")
    shell: ShellString = Field(
        "true",
        description="/bin/sh command: exit 0 passes, anything else is the event's failure "
        'kind. Omitted: the canonical "true".',
    )
    action: Action = absent()
    default: Annotated[bool, IS_BOOL] = True
    timeout_ms: Annotated[int, Says(f"must be an integer from 1 to {MAX_TIMEOUT_MS}")] = Field(
        DEFAULT_TIMEOUT_MS, ge=1, le=MAX_TIMEOUT_MS, alias="timeoutMs"
    )
    max_selections: Annotated[int, Says("must be a positive integer")] = absent(
        ge=1,
        alias="maxSelections",
        description="Loop guard: the Action is selected at most this many times per run.",
    )
    MISSING: ClassVar[Mapping[str, str]] = {
        "description": DESCRIPTION,
        "event": f"is required; supported events: {', '.join(EVENT_NAMES)}",
    }

    @classmethod
    def unknown(cls, key: str) -> str:
        hint = f'; did you mean "{_KEY_HINTS[key]}"?' if key in _KEY_HINTS else ""
        return f"unknown field (allowed: {', '.join(HOOK_KEYS)}){hint}"

    @classmethod
    def arrange(
        cls, value: dict[str, object], failures: list[Failure], context: Context
    ) -> list[Failure]:
        """Unknown members first, then in the order people read a Hook (its `when` and `shell`,
        whether it has either, then what it filters on and does)."""

        def place(failure: Failure) -> int:
            loc, error = failure
            if len(loc) == 1 and error.type == "extra_forbidden":
                return -1
            return _READING_ORDER.index(str(loc[0]) if loc else "-")

        return sorted(super().arrange(value, failures, context), key=place)

    @classmethod
    def cross(cls, value: dict[str, object], failed: set[Loc], context: Context) -> list[Failure]:
        failures: list[Failure] = []
        if "shell" not in value and "action" not in value:
            reason = 'needs "shell" or "action" (a Hook without shell runs the canonical "true")'
            failures.append(((), problem(reason)))
        if "maxSelections" in value and ("maxSelections",) not in failed and "action" not in value:
            failures.append(
                (("maxSelections",), problem('guards an Action; this Hook has no "action"'))
            )
        return failures


class PresetEntry(Doc):
    """A Preset: enables the listed Hooks together."""

    description: Annotated[str, Says(DESCRIPTION)]
    preset: Annotated[
        list[Annotated[str, Field(pattern=REF_RE.pattern)]],
        _unique_list(
            REF_RE,
            "hook references",
            "{} is not a hook reference (local/name or owner/repo/name)",
            "duplicate reference {}",
        ),
        Field(json_schema_extra={"uniqueItems": True}),
    ]
    default: Annotated[bool, IS_BOOL] = True
    MISSING: ClassVar[Mapping[str, str]] = {"description": DESCRIPTION}

    @classmethod
    def unknown(cls, key: str) -> str:
        return (
            "not allowed on a Preset (a Preset has only "
            "description, preset and default; a Hook cannot have preset)"
        )


HOOK_KEYS = tuple(f.alias or name for name, f in HookEntry.model_fields.items())


def _entry(value: Any, handler: Handler, info: ValidationInfo) -> HookEntry | PresetEntry:
    """An entry with `preset` is a Preset, any other a Hook."""
    if not isinstance(value, dict):
        fail([((), problem("must be an object (a Hook or a Preset)"))])
    return _entry_model(value).model_validate(value, context=info.context)


def _entry_model(entry: dict[str, object]) -> type[HookEntry | PresetEntry]:
    return PresetEntry if "preset" in entry else HookEntry


def _entry_name(value: Any, handler: Handler) -> Any:
    if value in FORBIDDEN_SEGMENTS:
        raise problem(f"forbidden entry name {json.dumps(value)}")
    try:
        return handler(value)
    except ValueError:
        raise problem(
            f"invalid entry name {json.dumps(value)}; names must be non-empty and "
            "contain neither / nor NUL"
        ) from None


Entry = Annotated[Union[HookEntry, PresetEntry], Wrap(_entry)]  # noqa: UP007
Section = dict[Annotated[str, Field(pattern=ENTRY_NAME), Wrap(_entry_name)], Entry]


def nested_presets(presets: Mapping[str, Sequence[str]]) -> Iterator[tuple[str, int, str]]:
    """(Preset ref, member index, member ref) for each Preset member that is itself a Preset
    (nested Presets are not supported; a member that names nothing is fine: it is ignored)."""
    for ref, members in presets.items():
        for i, member in enumerate(members):
            if member in presets:
                yield ref, i, member


NESTED = "references Preset {}; nested Presets are not supported"


def _sections(schema: JsonDict) -> None:
    # Section names are a pattern (`extra` holds the Sections), and pydantic's
    # `patternProperties` for a constrained key would let any other key through.
    section = schema.pop("additionalProperties")
    assert isinstance(section, dict)
    section = {**section, "additionalProperties": False}
    schema["patternProperties"] = {"^local$": section, SECTION_RE.pattern: section}
    schema["additionalProperties"] = False


_MEMBERS = ("$schema", "repos", "local")  # what is not an owner/repo Section


def declared_repos(document: Mapping[str, object]) -> tuple[str, ...]:
    """The valid owner/repo names of a document's `repos`, each once."""
    repos = document.get("repos")
    listed = repos if isinstance(repos, list) else []
    return tuple(dict.fromkeys(r for r in listed if isinstance(r, str) and SECTION_RE.fullmatch(r)))


class HooksDocument(Doc):
    """Global ~/.looprail/hooks.json and project .looprail/hooks.json: Sections `local` and
    `owner/repo` of named Hooks and Presets."""

    model_config = ConfigDict(
        extra="allow", title="looprail native hooks (hooks.json)", json_schema_extra=_sections
    )
    __pydantic_extra__: dict[str, Section] = Field(init=False)

    schema_: Annotated[str, Says("must be a string")] = absent(alias="$schema")
    repos: Annotated[
        list[Annotated[str, Field(pattern=SECTION_RE.pattern)]],
        _unique_list(
            SECTION_RE,
            "unique owner/repo strings",
            "{} is not an owner/repo string",
            "duplicate repository {}",
        ),
        Field(
            default=None,
            description="owner/repo Sections this (project) file may hold.",
            json_schema_extra=_unique_items_no_default,
        ),
    ]

    def sections(self) -> dict[str, dict[str, HookEntry | PresetEntry]]:
        """The Sections, in file order."""
        return dict(self.__pydantic_extra__ or {})

    @classmethod
    def arrange(
        cls, value: dict[str, object], failures: list[Failure], context: Context
    ) -> list[Failure]:
        """In file order, each Section's own problem first; a Section or an entry with an
        invalid name is not looked into. Presets are checked across entries when all else is
        valid."""
        bad: set[Loc] = {
            (name,) for name in value if name not in _MEMBERS and not SECTION_RE.fullmatch(name)
        }
        bad_entries = {loc[:2] for loc, _ in failures if loc[2:] == ("[key]",)}
        kept = cls.cross(value, bad, context)
        for loc, error in failures:
            if loc[:1] in bad or (loc[:2] in bad_entries and loc[2:] != ("[key]",)):
                continue
            kept.append((loc, error))
        order = {key: i for i, key in enumerate(value)} | {"$schema": -2, "repos": -1}
        kept.sort(key=lambda f: (order[str(f[0][0])] if f[0] else -3, len(f[0]) > 1))
        return kept

    @classmethod
    def cross(cls, value: dict[str, object], failed: set[Loc], context: Context) -> list[Failure]:
        """Section names (`failed`: the invalid ones), and the project file's `repos`."""
        repos = declared_repos(value)
        failures: list[Failure] = []
        for name in value:
            if name in _MEMBERS:
                continue
            if (name,) in failed:
                expected = 'expected "local" or owner/repo'
                reason = f"section {json.dumps(name)} is not a valid source; {expected}"
                failures.append(((name,), problem(reason)))
            elif context.get("scope") == "project" and name not in repos:
                reason = (
                    f'repository section {json.dumps(name)} is not declared in this file\'s "repos"'
                )
                failures.append(((name,), problem(reason)))
        return failures

    def whole(self) -> list[Failure]:
        """A Preset member may not be a Preset (checked once all else is valid)."""
        presets = {
            f"{section}/{name}": entry.preset
            for section, body in self.sections().items()
            for name, entry in body.items()
            if isinstance(entry, PresetEntry)
        }
        return [
            ((*ref.rsplit("/", 1), "preset", i), cannot_say(NESTED.format(json.dumps(member))))
            for ref, i, member in nested_presets(presets)
        ]


def hooks_words(document: object) -> Callable[[Loc, ErrorDetails], tuple[Loc, str | None]]:
    """The words of a problem pydantic found in `document`, for `manifest.pydantic_issues`:
    a rule's own, the document's, or the member's (`Doc.reason` of the model holding it)."""

    def words(loc: Loc, err: ErrorDetails) -> tuple[Loc, str | None]:
        if err["type"] in ("looprail", "schema_cannot_say"):
            return loc, err["msg"]  # a rule's own words
        if not loc:
            return loc, "top level is not a JSON object"
        if len(loc) == 1 and loc[0] not in ("$schema", "repos"):
            return loc, f"section {json.dumps(loc[0])} must be an object of named entries"
        *parent, key = loc
        holder: Any = document
        for step in parent:
            holder = holder.get(step) if isinstance(holder, dict) else None
        model = _holder(parent, holder)
        value = holder.get(key) if isinstance(holder, dict) else None
        return loc, model.reason(key, err["type"], value) if model is not None else None

    return words


def _holder(parent: list[str | int], value: object) -> type[Doc] | None:
    """The model of the object at `parent` (`value`, as written): the document, an entry, or
    an entry's Action."""
    if not isinstance(value, dict):
        return None
    if not parent:
        return HooksDocument
    if len(parent) == 2:
        return _entry_model(value)
    kind = value.get("type")
    return ACTION_MODELS.get(kind) if parent[2:] == ["action"] and isinstance(kind, str) else None


def hooks_json_schema() -> JsonDict:
    """JSON Schema (draft 2020-12) of hooks.json, for editors, generated from
    `HooksDocument`. `looprail hooks validate` is the authority: it also checks what a schema
    cannot say (`SCHEMA_CANNOT_SAY`: regular expressions compile, an Action's `code` can pair
    with its `outcome`, Preset members are not Presets)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **HooksDocument.model_json_schema(by_alias=True),
    }
