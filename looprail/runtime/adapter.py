"""What every agent CLI adapter shares: the `Adapter` contract (its argv, its output read into a
`Reply`), the checked `AgentSettings`, and readers of the CLIs' JSON (read, never trusted)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, NoReturn

from looprail.errors import ConfigError
from looprail.layout import PROJECT_CONFIG_FILE
from looprail.runtime.base import PHASE_ROLES, TASK_ROLE, Request, parse_json_object

LONG_PROMPT = "Follow the instructions given on stdin."


def file_prompt(path: Path) -> str:
    """An interactive session's first message: the prompt is in `path`, never in argv."""
    return f"Read the file {path} and follow it: it is your brief."


ROLES = tuple(dict.fromkeys([*PHASE_ROLES.values(), TASK_ROLE]))  # each role's model is its own


@dataclass
class Reply:
    """What was read from one invocation's output."""

    final: str = ""  # the agent's last words (final message)
    session_id: str | None = None
    # Tokens counted the same way for every CLI: `input_tokens` is every prompt token the
    # model read, prompt-cache reads and writes included; `cached_input_tokens` is the part
    # read from the cache (claude and opencode report the two apart, codex and gemini together).
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None  # an error the CLI reported (event or JSON field)
    error_status: int | None = None  # the HTTP status of that error, when the CLI says it
    denials: list[str] = field(default_factory=list)  # tool calls the CLI's permissions refused
    complete: bool = False  # the terminal event / object was seen
    events: int = 0


@dataclass
class AgentSettings:
    """`looprail.agents.<name>` in `.planning/config.json`, checked. Every field is optional."""

    binary: str | None = None  # the executable (default: the adapter's)
    model: str | None = None
    models: dict[str, str] = field(default_factory=dict)  # role -> model, over `model`
    args: list[str] = field(default_factory=list)  # appended verbatim before the prompt
    permission_mode: str | None = None  # claude: --permission-mode
    allowed_tools: list[str] = field(default_factory=list)  # claude: --allowedTools
    sandbox: str | None = None  # codex: --sandbox
    approval_mode: str | None = None  # gemini: --approval-mode
    # USD per million tokens, to estimate the cost of CLIs that report only tokens
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None

    _KEYS: ClassVar[dict[str, str]] = {
        "binary": "binary",
        "model": "model",
        "models": "models",
        "args": "args",
        "permissionMode": "permission_mode",
        "allowedTools": "allowed_tools",
        "sandbox": "sandbox",
        "approvalMode": "approval_mode",
        "inputUsdPerMTok": "input_usd_per_mtok",
        "outputUsdPerMTok": "output_usd_per_mtok",
    }

    @classmethod
    def parse(cls, name: str, raw: Mapping[str, object]) -> AgentSettings:
        out = cls()
        for key, value in raw.items():
            attr = cls._KEYS.get(key)
            if attr is None:
                _bad(name, key, f"unknown setting (known: {', '.join(cls._KEYS)})")
            elif attr.endswith("_per_mtok"):
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                if not ok or not value >= 0:  # type: ignore[operator]
                    _bad(name, key, "must be a number of USD, 0 or more")
                value = float(value)  # type: ignore[arg-type]
            elif attr == "models":
                value = _role_models(name, value)
            elif attr in ("args", "allowed_tools"):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    _bad(name, key, "must be a list of strings")
                if attr == "args" and "--" in value:  # what follows would not be options
                    _bad(name, key, '"--" ends the CLI\'s options: the prompt after it is lost')
            elif not isinstance(value, str) or not value:
                _bad(name, key, "must be a non-empty string")
            setattr(out, attr, value)
        return out

    def exe(self, default: str) -> str:
        return self.binary or default


def _role_models(name: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        _bad(name, "models", f"must be an object of role -> model ({', '.join(ROLES)})")
    for role, model in value.items():
        if role not in ROLES:
            _bad(name, f"models.{role}", f"not a role (the roles: {', '.join(ROLES)})")
        if not isinstance(model, str) or not model:
            _bad(name, f"models.{role}", "must be a non-empty string")
    return dict(value)


def _bad(name: str, key: str, why: str) -> NoReturn:
    raise ConfigError(PROJECT_CONFIG_FILE, f"looprail.agents.{name}.{key}: {why}")


class Adapter:
    """One agent CLI: its argv and its output format. Pure: no process, no files."""

    name: ClassVar[str] = ""
    binary: ClassVar[str] = ""
    install: ClassVar[str] = ""  # how a user installs and logs in (doctor prints it)
    # The prompt goes on stdin, never in argv (a CLI that rewrites its arguments, or whose
    # argv cannot hold a long prompt whole).
    prompt_on_stdin: ClassVar[bool] = False
    skill_form: ClassVar[str] = "Run the skill `{name}`."
    agent_form: ClassVar[str] = "Act as the `{name}` agent."
    # Every argv is `[binary, *head, *flags, *args, *prompt]`: `head` only in the
    # non-interactive one; `{prompt}` in a prompt template is the prompt.
    head: ClassVar[tuple[str, ...]] = ()
    prompt_args: ClassVar[tuple[str, ...]] = ("--", "{prompt}")
    interactive_prompt_args: ClassVar[tuple[str, ...]] = ("--", "{prompt}")
    # The CLI's read tool reads a file git ignores, as the interactive brief in looprail's logs
    # folder is; when not, the brief is handed over from a private folder outside the project.
    reads_ignored_files: ClassVar[bool] = True

    def flags(self, request: Request, s: AgentSettings, *, git: bool, live: bool) -> list[str]:
        """The options the settings (and `request`) give; `live`: the interactive mode's."""
        return []

    def argv(self, prompt: str, request: Request, s: AgentSettings, *, git: bool) -> list[str]:
        flags = self.flags(request, s, git=git, live=False)
        return [s.exe(self.binary), *self.head, *flags, *s.args, *_filled(self.prompt_args, prompt)]

    def parse(self, stdout: str, stderr: str = "") -> Reply:
        raise NotImplementedError

    def interactive_argv(
        self, prompt: str, request: Request, s: AgentSettings, *, git: bool
    ) -> list[str]:
        """The argv of the CLI's interactive mode (`run --interactive`), `prompt` its first
        message: the settings of `argv`, none of its non-interactive flags."""
        flags = self.flags(request, s, git=git, live=True)
        return [s.exe(self.binary), *flags, *s.args, *_filled(self.interactive_prompt_args, prompt)]

    def exit_reason(self, code: int) -> str | None:
        """What a non-zero exit code means for this CLI, when it means something."""
        return None

    def folder_args(self, folder: Path) -> list[str]:
        """The args that let the interactive CLI read `folder`, outside the project."""
        return []

    def readiness(
        self, project: Path, s: AgentSettings, env: Mapping[str, str]
    ) -> list[tuple[str, str]]:
        """`(status, line)` checks `looprail doctor` prints beyond `--version`."""
        return []

    def invocation(self, request: Request, s: AgentSettings, *, git: bool) -> list[str]:
        """The argv of one invocation, its prompt on stdin: never on a command line, which any
        local user reads in `/proc/PID/cmdline` (issue 40)."""
        return self.argv("" if self.prompt_on_stdin else LONG_PROMPT, request, s, git=git)

    def permissions(self, s: AgentSettings) -> str:
        """One line: the permissions an invocation runs with."""
        return ""

    def may_run(self, commands: list[str]) -> list[str]:
        """What the executor may run of a task's checks `commands`, in this CLI's words."""
        return []

    def show(self, line: str) -> str | None:
        """A stdout line as `-v` shows it (an event in words); None shows nothing."""
        ev = parse_json_object(line) if line.lstrip().startswith("{") else None
        return line if ev is None else self.event(ev)

    def event(self, ev: dict[str, object]) -> str | None:
        return cut(json.dumps(ev, ensure_ascii=False), 200)


def _filled(template: tuple[str, ...], prompt: str) -> list[str]:
    return [arg.replace("{prompt}", prompt) for arg in template]


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def events(stdout: str) -> list[dict[str, object]]:
    """The JSON objects of a JSON-lines stream; a cut-off last line is skipped."""
    found = (parse_json_object(line) for line in stdout.splitlines() if line.strip()[:1] == "{")
    return [obj for obj in found if obj is not None]


def brief(value: object, limit: int = 120) -> str:
    """A tool's input or result in one short line."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return cut(" ".join(text.split()), limit)


def obj(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def items(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def text_of(value: object, default: str | None = None) -> str | None:
    return value if isinstance(value, str) else default


def whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None  # type: ignore[arg-type]


def add(a: int | None, *values: object) -> int | None:
    """`a` plus every integer of `values`; None while none of them is one."""
    for value in values:
        b = whole(value)
        if b is not None:
            a = (a or 0) + b
    return a


def read_json(path: Path) -> dict[str, object]:
    """A JSON object file (comments allowed, as the CLIs allow them), or {}."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    return obj(parse_json_object(re.sub(r"^\s*//.*$", "", text, flags=re.M)))


def json_block(text: str) -> dict[str, object] | None:
    """The JSON object in `text`: all of it, or the last block that starts with `{` at the
    start of a line (Gemini CLI prints a stack trace before its JSON error)."""
    starts = [m.start() for m in re.finditer(r"^\{", text, flags=re.M)]
    for start in (0, *reversed(starts)):
        found = parse_json_object(text[start:])
        if found is not None:
            return found
    return None


def classify(error: str, status: int | None = None) -> str:
    """A CLI error as rate limited, not authenticated or error: by HTTP status, else by words."""
    if status == 429:
        return "rate limited"
    if status in (401, 403):
        return "not authenticated"
    low = error.lower()
    if _status_in(low, "429") or any(w in low for w in ("rate limit", "rate_limit", "quota")):
        return "rate limited"
    if _status_in(low, "40[13]") or any(w in low for w in ("auth", "api key", "login")):
        return "not authenticated"
    return "error"


def _status_in(text: str, code: str) -> bool:
    """Does `text` name the HTTP status `code` (a regex)? Only as a whole number, and not as a
    port: `127.0.0.1:42917`, `localhost:429` or a request id `req_4291` name no status."""
    return re.search(rf"(?<![\w.]:)\b{code}\b", text) is not None
