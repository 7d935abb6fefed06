"""PLAN.md frontmatter: its keys, its YAML (duplicate keys refused, `01` kept as text, each
top-level key's line known, errors naming file and line), and how each value is read."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal, TypedDict, get_args

import yaml

from looprail.errors import PlanError
from looprail.plans.scan import Doc
from looprail.plans.yamlload import NoAliasCSafeLoader, NoAliasSafeLoader, c_path_ok

PlanType = Literal["execute", "tdd"]  # the types the reference's templates write
PLAN_TYPES: tuple[str, ...] = get_args(PlanType)


class PlanFields(TypedDict):
    """The `Plan` fields the frontmatter gives."""

    phase: str | None
    plan: str | None
    type: str
    wave: int | None
    depends_on: list[str]
    files_modified: list[str]
    autonomous: bool
    requirements: list[str]
    user_setup: object
    must_haves: object
    extra: dict[str, object]


# Frontmatter keys with a typed field on `Plan`; the rest are kept in `Plan.extra`.
KNOWN_KEYS = tuple(key for key in PlanFields.__annotations__ if key != "extra")
# Keys GSD writes that looprail does not interpret (the reference's planner, templates and
# real plans): kept in `Plan.extra` without a warning. `status: superseded` drops the plan.
GSD_EXTRA_KEYS = (
    "gap_closure",
    "execution_strategy",
    "domain",
    "name",
    "title",
    "tags",
    "subsystem",
    "threat_ids",
    "checkpoint_reason",
    "status",
    "objective",
)
# The keys the plan's waves and checkpoints are read from: a YAML error inside one of them
# refuses the plan (running it with the value dropped would lose a dependency); an error
# anywhere else only loses that key, with a warning.
SCHEDULING_KEYS = ("phase", "plan", "type", "wave", "depends_on", "files_modified", "autonomous")


class _PlanRules:
    """What PLAN.md frontmatter adds to the frontmatter loader: duplicate keys are rejected, and
    zero-padded numbers stay strings (`01` is a plan id, not YAML 1.1's octal 1)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = self.construct_scalar(key_node)  # type: ignore[attr-defined]
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _PlanYamlLoader(_PlanRules, NoAliasSafeLoader):
    """The pure-Python PLAN.md loader: its errors are the ones users read."""

    # PyYAML reads this as a class attribute; its stubs declare it on instances.
    yaml_implicit_resolvers: ClassVar[dict[Any, list[Any]]] = {  # type: ignore[misc]
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:int"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


_PlanYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)\Z"), list("-+0123456789")
)
# The same rules on libyaml's parser, when PyYAML was built with it.
_PlanYamlCLoader: type | None = (
    None
    if NoAliasCSafeLoader is None
    else type(
        "_PlanYamlCLoader",
        (_PlanRules, NoAliasCSafeLoader),
        {"yaml_implicit_resolvers": _PlanYamlLoader.yaml_implicit_resolvers},
    )
)


class _YamlSyntaxError(PlanError):
    """A YAML syntax error: the only kind `lenient_yaml` works around."""


def _compose(loader_class: type, text: str, first_line: int) -> tuple[Any, dict[str, int]]:
    loader = loader_class(text)  # the pure reader rejects control characters here
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    key_lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key_lines[key_node.value] = first_line + key_node.start_mark.line
    return data, key_lines


def _load_yaml(text: str, first_line: int, where: str) -> tuple[Any, dict[str, int]]:
    if _PlanYamlCLoader is not None and c_path_ok(text):
        try:
            return _compose(_PlanYamlCLoader, text, first_line)
        except Exception:  # the pure loader below says what is wrong, in its own words
            pass
    try:
        return _compose(_PlanYamlLoader, text, first_line)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join((exc.problem or exc.context or "invalid YAML").split())
        line = f":{first_line + mark.line}" if mark is not None else ""
        syntax = isinstance(exc, (yaml.scanner.ScannerError, yaml.parser.ParserError))
        error = _YamlSyntaxError if syntax else PlanError
        raise error(f"{where}{line}: invalid YAML frontmatter: {reason}") from None
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise PlanError(f"{where}: invalid YAML frontmatter: {reason}") from None
    except RecursionError:
        raise PlanError(f"{where}: YAML frontmatter is nested too deeply") from None


def top_level_blocks(lines: list[str]) -> list[tuple[str, int, int]]:
    """(key, first line, line after the last) of each top-level `key:` of a YAML mapping."""
    starts = [
        (m.group(1), i) for i, line in enumerate(lines) if (m := re.match(r"([\w-]+)\s*:", line))
    ]
    return [
        (key, start, starts[n + 1][1] if n + 1 < len(starts) else len(lines))
        for n, (key, start) in enumerate(starts)
    ]


def lenient_yaml(
    doc: Doc, text: str, first_line: int
) -> tuple[Any, dict[str, int], dict[str, str]]:
    """The frontmatter parsed; a YAML error inside a key looprail keeps only as written
    (`must_haves`, `user_setup`, an unknown key) takes that key's block out, as raw text, with
    a warning. An error in one of `SCHEDULING_KEYS` refuses the plan, naming the line."""
    kept: dict[str, str] = {}
    lines = text.split("\n")
    while True:
        try:
            data, key_lines = _load_yaml("\n".join(lines), first_line, doc.where)
            return data, key_lines, kept
        except _YamlSyntaxError as exc:
            error = exc
        blocks = top_level_blocks(lines)
        at = re.match(rf"{re.escape(doc.where)}:(\d+):", str(error))  # `where:LINE: invalid…`
        bad = int(at.group(1)) - first_line if at else None  # 0-based in the frontmatter
        around = [b for b in blocks if bad is not None and b[1] <= bad < b[2]]
        candidates = around + [b for b in blocks if b[0] in ("must_haves", "user_setup")]
        candidates += [b for b in blocks if b[0] not in KNOWN_KEYS]
        for key, start, end in candidates:
            if key in SCHEDULING_KEYS or key in kept:
                continue
            trial = lines[:start] + [""] * (end - start) + lines[end:]
            try:
                _load_yaml("\n".join(trial), first_line, doc.where)
            except _YamlSyntaxError:
                if (key, start, end) not in around:
                    continue
            except PlanError:
                continue
            reason = str(error).split("invalid YAML frontmatter: ", 1)[-1]
            doc.notes.append(
                f"{doc.where}:{first_line + start}: {key}: invalid YAML ({reason}); kept as "
                "written, unread (looprail does not schedule on it)"
            )
            kept[key] = "\n".join(lines[start:end])
            lines = trial
            break
        else:
            raise error


class KeyReader:
    """The frontmatter's keys, each read on its own (what cannot be, a note naming its line)."""

    def __init__(self, doc: Doc, data: dict[Any, Any], key_lines: dict[str, int], first_line: int):
        self.doc, self.data, self.key_lines, self.first_line = doc, data, key_lines, first_line

    def line(self, key: str) -> int:
        return self.key_lines.get(key, max(self.first_line, 1))

    def warn(self, key: str, reason: str) -> None:
        self.doc.notes.append(f"{self.doc.where}:{self.line(key)}: {key}: {reason}")

    def text(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.warn(key, f"must be a string, got {describe(value)}; ignored")
            return None
        return str(value)

    def strings(self, key: str, example: str, *aliases: str) -> list[str]:
        """A list of strings; a bad `depends_on` refuses the plan (a dependency would be lost),
        other lists are warned about, the bad item dropped."""
        value = next((self.data[k] for k in (key, *aliases) if self.data.get(k) is not None), None)
        if value is None:
            return []
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            value = [value]  # the reference reads `depends_on: 01-01` as ["01-01"]
        strict = key == "depends_on"
        if not isinstance(value, list):
            reason = f"must be a list of strings such as {example}, got {describe(value)}"
            if strict:
                raise self.doc.fail_line(self.line(key), f"{key}: {reason}")
            self.warn(key, reason)
            return []
        out: list[str] = []
        for i, item in enumerate(value):
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                item = str(item)
            if isinstance(item, str) and item.strip():
                out.append(item.strip())
                continue
            reason = f"item {i} must be a non-empty string such as {example}, got {describe(item)}"
            if strict:
                raise self.doc.fail_line(self.line(key), f"{key}: {reason}")
            self.warn(key, f"{reason}; ignored")
        return out

    def plan_type(self) -> str:
        plan_type = self.data.get("type", "execute")
        if plan_type is None:
            return "execute"
        if plan_type not in PLAN_TYPES:
            known = ", ".join(PLAN_TYPES)
            self.warn(
                "type", f"unknown plan type {describe(plan_type)}; run as execute (known: {known})"
            )
        return str(plan_type)

    def wave(self) -> int | None:
        wave = self.data.get("wave")
        if wave is None:
            return None
        # As the reference's parseInt reads it: `wave: 2` and `wave: "02"` are 2.
        digits = None if isinstance(wave, bool) else re.match(r"\s*(\d+)", str(wave))
        if digits is None:
            self.warn("wave", f"must be a non-negative integer, got {describe(wave)}; ignored")
            return None
        return int(digits.group(1))

    def autonomous(self) -> bool:
        value = self.data.get("autonomous", True)
        if value is None or isinstance(value, bool):
            return value is not False
        # The reference: autonomous only when it reads the word `true`.
        read = str(value).strip().lower() == "true"
        self.warn("autonomous", f"must be true or false, got {describe(value)}; read as {read}")
        return read

    def must_haves(self) -> object:
        value = self.data.get("must_haves")
        if value is not None and not isinstance(value, dict):
            self.warn(
                "must_haves",
                f"is {describe(value)}, not a mapping (truths, artifacts, key_links); "
                "kept as written",
            )
        return value


def describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
    return f"a {type(value).__name__}"
