"""Coding agents as runtimes: Claude Code, Codex, OpenCode and Gemini CLI.

`AgentRuntime` is a `BaseRuntime` (one method, `handle`) shared by every agent; what differs per
CLI is an `Adapter`: the argv of one non-interactive invocation and how to read its output
(final text, session id, tokens, cost, errors). The facts each adapter relies on, and what was
verified where, are in docs/agents.md.

Per request kind:
- skill, agent, verdict, phase, task: one bounded CLI invocation with the prompt from
  `looprail.runtime.prompts`, cwd = the plan's worktree (or the project). Its full transcript
  (prompt, argv, stdout stream events, stderr, what was read from them) is filed under
  `.looprail/logs/<run>/`. After a phase step, the artifact it owed must exist and parse; a
  verdict reply must carry a `{block, message}` JSON object (else the gate's check errors).
- command, query: not agent work; they run as with the local runtime (the host tool, or
  `.looprail/commands` / `.looprail/checks`).
- message: queued, and handed verbatim to the next agent invocation's prompt (each invocation is
  a fresh non-interactive session). compact: nothing to compact in a fresh session; ok.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

from looprail.errors import ConfigError
from looprail.runtime.agent_settings import MODE_NAME, mode_in_effect
from looprail.runtime.base import (
    BaseRuntime,
    DispatchContext,
    Outcome,
    Request,
    RunStart,
    RuntimeInfo,
    Usage,
    output_label,
    parse_json_object,
)
from looprail.runtime.git import is_git_repo
from looprail.runtime.interactive import (
    handover_line,
    run_on_terminal,
    session_outcome,
    shown_argv,
    terminal_problem,
    write_meta,
)
from looprail.runtime.local import LocalRuntime, Timeouts, _last_line, _signal_name
from looprail.runtime.logs import LOGS_DIR, OutputTee, Transcripts  # noqa: F401 (re-exported)
from looprail.runtime.owed import owed_problem
from looprail.runtime.process import escape_untrusted, find_program, run_bounded
from looprail.runtime.prompts import build_prompt

if TYPE_CHECKING:
    from looprail.runtime.meter import Meter

AGENT_OUTPUT_CAP = 32 << 20  # 32 MiB per stream: a long agent session, still bounded
ARG_LIMIT = 100_000  # bytes of prompt passed as one argument (the kernel's cap is 128 KiB)
LONG_PROMPT = "Follow the instructions given on stdin."


_CONFIG_FILE = ".planning/config.json"


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
        "args": "args",
        "permissionMode": "permission_mode",
        "allowedTools": "allowed_tools",
        "sandbox": "sandbox",
        "approvalMode": "approval_mode",
        "inputUsdPerMTok": "input_usd_per_mtok",
        "outputUsdPerMTok": "output_usd_per_mtok",
    }

    @classmethod
    def parse(cls, name: str, raw: Mapping[str, Any]) -> AgentSettings:
        where = f"looprail.agents.{name}"
        out = cls()
        for key, value in raw.items():
            attr = cls._KEYS.get(key)
            if attr is None:
                raise ConfigError(
                    _CONFIG_FILE, f"{where}.{key}: unknown setting (known: {', '.join(cls._KEYS)})"
                )
            if attr.endswith("_per_mtok"):
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                if not ok or not value >= 0:
                    raise ConfigError(
                        _CONFIG_FILE, f"{where}.{key}: must be a number of USD, 0 or more"
                    )
                value = float(value)
            elif attr in ("args", "allowed_tools"):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ConfigError(_CONFIG_FILE, f"{where}.{key}: must be a list of strings")
            elif not isinstance(value, str) or not value:
                raise ConfigError(_CONFIG_FILE, f"{where}.{key}: must be a non-empty string")
            setattr(out, attr, value)
        return out


class Adapter:
    """One agent CLI: its argv and its output format. Pure: no process, no files."""

    name: ClassVar[str] = ""
    binary: ClassVar[str] = ""
    install: ClassVar[str] = ""  # how a user installs and logs in (doctor prints it)
    version_args: ClassVar[tuple[str, ...]] = ("--version",)

    def argv(self, prompt: str, request: Request, s: AgentSettings, *, git: bool) -> list[str]:
        raise NotImplementedError

    def parse(self, stdout: str, stderr: str = "") -> Reply:
        raise NotImplementedError

    def interactive_argv(
        self, prompt: str, request: Request, s: AgentSettings, *, git: bool
    ) -> list[str]:
        """The argv of the CLI's interactive mode on the user's terminal, `prompt` its first
        message: the settings of `argv`, none of its non-interactive flags
        (`run --interactive`, looprail/runtime/interactive.py)."""
        raise NotImplementedError

    # The prompt goes on stdin, never in argv (a CLI that rewrites its arguments, or whose
    # argv cannot hold a long prompt whole).
    prompt_on_stdin: ClassVar[bool] = False

    def exit_reason(self, code: int) -> str | None:
        """What a non-zero exit code means for this CLI, when it means something."""
        return None

    def readiness(
        self, project: Path, s: AgentSettings, env: Mapping[str, str]
    ) -> list[tuple[str, str]]:
        """`(status, line)` checks `looprail doctor` prints beyond `--version`: what a run in
        `project` needs from this CLI's own settings ("ok", "warning" or "problem")."""
        return []

    def skill_form(self) -> str:
        return "Run the skill `{name}`."

    def long_prompt(self, path: Path) -> tuple[str, list[str], bool]:
        """A prompt too long for argv: `(short prompt, extra args, send the prompt on stdin)`.
        Default: piped stdin, which claude -p, codex exec and gemini -p all read as input."""
        return LONG_PROMPT, [], True

    def agent_form(self) -> str:
        return "Act as the `{name}` agent."

    def permissions(self, s: AgentSettings) -> str:
        """One line: the permissions an invocation runs with (printed once per run)."""
        return ""

    def show(self, line: str) -> str | None:
        """A line of the CLI's stdout as `-v` shows it while the agent works: an event read
        into words (`event`), a line that is no JSON event as it is; None shows nothing."""
        if not line.lstrip().startswith("{"):
            return line
        ev = parse_json_object(line)
        if ev is None:
            return line
        return self.event(ev)

    def event(self, ev: dict[str, Any]) -> str | None:
        """One JSON event in words; default: its `type` and the event, cut."""
        shown = json.dumps(ev, ensure_ascii=False)
        return shown if len(shown) <= 200 else shown[:199] + "…"


def _events(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines stream; a cut-off last line is skipped."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        obj = parse_json_object(line)
        if obj is not None:
            out.append(obj)
    return out


def _brief(value: Any, limit: int = 120) -> str:
    """A tool's input or result in one short line."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _obj(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else {}: agents' JSON is read, never trusted."""
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _add(a: int | None, b: Any) -> int | None:
    b = _int(b)
    if b is None:
        return a
    return (a or 0) + b


class ClaudeAdapter(Adapter):
    """`claude -p PROMPT --output-format stream-json --verbose` (stream-json needs --verbose in
    print mode). Default permissions: `--permission-mode acceptEdits` (file edits in the working
    folder are allowed, anything else Claude Code would ask about is denied: nobody can answer)."""

    name = "claude"
    binary = "claude"
    install = (
        "install Claude Code (npm install -g @anthropic-ai/claude-code) and log in once by "
        "running `claude` (or set ANTHROPIC_API_KEY)"
    )
    DEFAULT_MODE = "acceptEdits"

    def argv(self, prompt: str, request: Request, s: AgentSettings, *, git: bool) -> list[str]:
        # `-p` is a flag (print mode) and the prompt a positional argument: `--` ends the
        # options, so a prompt starting with `-` stays the prompt.
        argv = [s.binary or self.binary, "-p", "--output-format", "stream-json", "--verbose"]
        return [*argv, *self._flags(s), *s.args, "--", prompt]

    def interactive_argv(
        self, prompt: str, request: Request, s: AgentSettings, *, git: bool
    ) -> list[str]:
        # `claude PROMPT` starts an interactive session with PROMPT as its first message
        return [s.binary or self.binary, *self._flags(s), *s.args, "--", prompt]

    def _flags(self, s: AgentSettings) -> list[str]:
        flags = ["--permission-mode", s.permission_mode or self.DEFAULT_MODE]
        if s.allowed_tools:
            flags += ["--allowedTools", ",".join(s.allowed_tools)]
        if s.model:
            flags += ["--model", s.model]
        return flags

    def skill_form(self) -> str:
        return "/{name}"  # a Claude Code slash command (skills and custom commands)

    def agent_form(self) -> str:
        return "Use the {name} subagent (Task tool) for this."

    def permissions(self, s: AgentSettings) -> str:
        tools = f", allowed tools {','.join(s.allowed_tools)}" if s.allowed_tools else ""
        return f"--permission-mode {s.permission_mode or self.DEFAULT_MODE}{tools}"

    def event(self, ev: dict[str, Any]) -> str | None:
        kind = ev.get("type")
        if kind == "system":
            return f"[{ev.get('subtype') or 'system'}] session {ev.get('session_id') or '?'}"
        if kind in ("assistant", "user"):
            parts = []
            for c in _obj(ev.get("message")).get("content") or []:
                c = _obj(c)
                if c.get("type") == "text" and c.get("text"):
                    parts.append(str(c["text"]))
                elif c.get("type") == "tool_use":
                    parts.append(f"→ {c.get('name')} {_brief(c.get('input'))}")
                elif c.get("type") == "tool_result":
                    parts.append(f"← {_brief(c.get('content'))}")
            return "\n".join(parts) or None
        if kind == "result":
            cost = ev.get("total_cost_usd", ev.get("cost_usd"))
            spent = f", ${cost}" if isinstance(cost, (int, float)) else ""
            return f"[result] {ev.get('subtype') or ''}{spent}".rstrip()
        return super().event(ev)

    def parse(self, stdout: str, stderr: str = "") -> Reply:
        r = Reply()
        for ev in _events(stdout):
            r.events += 1
            kind = ev.get("type")
            if isinstance(ev.get("session_id"), str):
                r.session_id = ev["session_id"]
            if kind == "assistant":
                texts = [
                    c.get("text", "")
                    for c in (ev.get("message") or {}).get("content") or []
                    if isinstance(c, dict) and c.get("type") == "text"
                ]
                if any(texts):
                    r.final = "\n".join(t for t in texts if t)
                if isinstance(ev.get("error"), str):  # e.g. rate_limit, authentication_failed
                    r.error = f"{ev['error']}: {r.final}".rstrip(": ")
            elif kind == "result":
                r.complete = True
                r.error = None  # the result is authoritative (an earlier error was retried)
                if isinstance(ev.get("result"), str):
                    r.final = ev["result"] or r.final
                cost = ev.get("total_cost_usd", ev.get("cost_usd"))
                if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                    r.cost_usd = float(cost)
                usage = _obj(ev.get("usage"))
                # input_tokens excludes the prompt cache: reads and writes are counted apart
                r.input_tokens = _add(None, usage.get("input_tokens"))
                r.input_tokens = _add(r.input_tokens, usage.get("cache_creation_input_tokens"))
                r.input_tokens = _add(r.input_tokens, usage.get("cache_read_input_tokens"))
                r.cached_input_tokens = _int(usage.get("cache_read_input_tokens"))
                r.output_tokens = _add(None, usage.get("output_tokens"))
                r.error_status = _int(ev.get("api_error_status"))
                r.denials = [_denial(d) for d in ev.get("permission_denials") or []]
                if ev.get("subtype") not in (None, "success"):
                    r.error = f"{ev.get('subtype')}: {ev.get('result') or ''}".strip(": ")
                elif ev.get("is_error"):  # API errors end in subtype "success", is_error true
                    r.error = str(ev.get("result") or "error")
        return r


class CodexAdapter(Adapter):
    """`codex exec --json --sandbox workspace-write PROMPT` (JSON lines: thread.started,
    turn.started, item.*, turn.completed with usage, turn.failed, error). Codex reports tokens,
    not cost. Outside a git repository it needs --skip-git-repo-check."""

    name = "codex"
    binary = "codex"
    install = (
        "install Codex CLI (npm install -g @openai/codex) and log in once with `codex login` "
        "(or set OPENAI_API_KEY)"
    )
    DEFAULT_SANDBOX = "workspace-write"

    def argv(self, prompt: str, request: Request, s: AgentSettings, *, git: bool) -> list[str]:
        argv = [s.binary or self.binary, "exec", "--json"]
        argv += ["--sandbox", s.sandbox or self.DEFAULT_SANDBOX]
        if not git:
            argv.append("--skip-git-repo-check")
        if s.model:
            argv += ["--model", s.model]
        return [*argv, *s.args, "--", prompt]

    def interactive_argv(
        self, prompt: str, request: Request, s: AgentSettings, *, git: bool
    ) -> list[str]:
        # `codex PROMPT`: the TUI (it asks for approvals itself, and whether to trust a
        # folder outside git: `--skip-git-repo-check` is `exec`'s)
        argv = [s.binary or self.binary, "--sandbox", s.sandbox or self.DEFAULT_SANDBOX]
        if s.model:
            argv += ["--model", s.model]
        return [*argv, *s.args, "--", prompt]

    def permissions(self, s: AgentSettings) -> str:
        return f"--sandbox {s.sandbox or self.DEFAULT_SANDBOX} (codex exec never asks)"

    def event(self, ev: dict[str, Any]) -> str | None:
        kind = ev.get("type")
        if kind in ("thread.started", "turn.started", "turn.completed", "turn.failed"):
            return f"[{kind}]"
        if kind in ("item.started", "item.completed", "item.updated"):
            item = _obj(ev.get("item"))
            if item.get("type") in ("agent_message", "assistant_message", "reasoning"):
                if kind != "item.completed":
                    return None
                return str(item.get("text") or "") or None
            if item.get("type") == "command_execution":
                return f"$ {item.get('command')}" if kind == "item.started" else None
            return f"[{kind}] {item.get('type')}"
        if kind == "error":
            return f"[error] {ev.get('message')}"
        return super().event(ev)

    def parse(self, stdout: str, stderr: str = "") -> Reply:
        r = Reply()
        for ev in _events(stdout):
            r.events += 1
            kind = ev.get("type")
            if kind == "thread.started" and isinstance(ev.get("thread_id"), str):
                r.session_id = ev["thread_id"]
            elif kind == "item.completed":
                item = ev.get("item") or {}
                if item.get("type") in ("agent_message", "assistant_message"):
                    r.final = str(item.get("text") or r.final)
            elif kind == "turn.completed":
                r.complete = True
                r.error = None  # an earlier error event was retried: the turn still completed
                usage = _obj(ev.get("usage"))
                r.input_tokens = _add(r.input_tokens, usage.get("input_tokens"))  # cache included
                r.cached_input_tokens = _add(
                    r.cached_input_tokens, usage.get("cached_input_tokens")
                )
                r.output_tokens = _add(r.output_tokens, usage.get("output_tokens"))
            elif kind == "turn.failed":
                r.complete = True
                r.error = str((ev.get("error") or {}).get("message") or "turn failed")
            elif kind == "error":
                r.error = str(ev.get("message") or "error")
        return r


class OpenCodeAdapter(Adapter):
    """`opencode run --format json PROMPT` (JSON lines: step_start, text, tool_use, step_finish
    with tokens and cost, error). `ref.agent` steps use `--agent NAME`. Permissions are
    OpenCode's own (`permission` in opencode.json); looprail passes nothing that loosens them."""

    name = "opencode"
    binary = "opencode"
    install = (
        "install OpenCode (npm install -g opencode-ai) and add a provider with "
        "`opencode auth login`"
    )

    # `opencode run MESSAGE` rewrites an argument holding spaces as a quoted string, and an
    # attached `--file` is cut at 50 KB; piped stdin is read verbatim, so the prompt goes there.
    prompt_on_stdin = True

    def argv(self, prompt: str, request: Request, s: AgentSettings, *, git: bool) -> list[str]:
        argv = [s.binary or self.binary, "run", "--format", "json"]
        return [*argv, *self._flags(request, s), *s.args]

    def interactive_argv(
        self, prompt: str, request: Request, s: AgentSettings, *, git: bool
    ) -> list[str]:
        # `opencode --prompt=PROMPT`: the TUI in the working folder (no `[project]` given),
        # PROMPT in one argument, so it is never read as an option
        return [s.binary or self.binary, *self._flags(request, s), *s.args, f"--prompt={prompt}"]

    @staticmethod
    def _flags(request: Request, s: AgentSettings) -> list[str]:
        flags = ["--model", s.model] if s.model else []
        if request.kind == "agent":
            flags += ["--agent", request.name]
        elif request.kind == "verdict" and request.verdict is not None:
            flags += ["--agent", request.verdict.ref]
        return flags

    def agent_form(self) -> str:
        return "You are the `{name}` agent."

    def permissions(self, s: AgentSettings) -> str:
        return "OpenCode's own `permission` settings (opencode.json)"

    def event(self, ev: dict[str, Any]) -> str | None:
        kind = ev.get("type")
        part = _obj(ev.get("part"))
        if kind == "text":
            return str(part.get("text") or "") or None
        if kind == "tool_use":
            return f"→ {part.get('tool')} {_brief(_obj(part.get('state')).get('input'))}"
        if kind in ("step_start", "step_finish"):
            return None
        if kind == "error":
            err = _obj(ev.get("error"))
            return f"[error] {_obj(err.get('data')).get('message') or err.get('name')}"
        return super().event(ev)

    def parse(self, stdout: str, stderr: str = "") -> Reply:
        r = Reply()
        texts: list[str] = []
        for ev in _events(stdout):
            r.events += 1
            kind = ev.get("type")
            if isinstance(ev.get("sessionID"), str):
                r.session_id = ev["sessionID"]
            part = _obj(ev.get("part"))
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "step_finish":
                tokens = _obj(part.get("tokens"))
                cache = _obj(tokens.get("cache"))
                # tokens.input excludes the prompt cache: reads and writes are counted apart
                r.input_tokens = _add(r.input_tokens, tokens.get("input"))
                r.input_tokens = _add(r.input_tokens, cache.get("read"))
                r.input_tokens = _add(r.input_tokens, cache.get("write"))
                r.cached_input_tokens = _add(r.cached_input_tokens, cache.get("read"))
                r.output_tokens = _add(r.output_tokens, tokens.get("output"))
                cost = part.get("cost")
                if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                    r.cost_usd = (r.cost_usd or 0.0) + float(cost)
                if part.get("reason") in ("stop", "end_turn", "completed", None):
                    r.complete = True
            elif kind == "error":
                err = _obj(ev.get("error"))
                data = _obj(err.get("data"))
                r.error = str(data.get("message") or err.get("message") or err.get("name") or ev)
                r.error_status = _int(data.get("statusCode"))
        r.final = texts[-1] if texts else ""
        return r


class GeminiAdapter(Adapter):
    """`gemini --output-format json --approval-mode auto_edit --prompt=PROMPT`: one JSON object
    `{response, stats, error?}` on stdout; on an API error the object goes to stderr and the
    exit code is the HTTP status modulo 256 (401 -> 145, 429 -> 173); 55: untrusted folder."""

    name = "gemini"
    binary = "gemini"
    install = (
        "install Gemini CLI (npm install -g @google/gemini-cli) and log in once by running "
        "`gemini` (or set GEMINI_API_KEY)"
    )
    DEFAULT_APPROVAL = "auto_edit"

    def argv(self, prompt: str, request: Request, s: AgentSettings, *, git: bool) -> list[str]:
        argv = [s.binary or self.binary, "--output-format", "json", *self._flags(s)]
        # `--prompt=` in one argument: a prompt starting with `-` is never read as an option
        return [*argv, *s.args, f"--prompt={prompt}"]

    def interactive_argv(
        self, prompt: str, request: Request, s: AgentSettings, *, git: bool
    ) -> list[str]:
        # `-i`/`--prompt-interactive`: run the prompt, then go on interactively
        argv = [s.binary or self.binary, *self._flags(s), *s.args]
        return [*argv, f"--prompt-interactive={prompt}"]

    def _flags(self, s: AgentSettings) -> list[str]:
        flags = ["--approval-mode", s.approval_mode or self.DEFAULT_APPROVAL]
        return flags + (["--model", s.model] if s.model else [])

    # Gemini CLI's own exit codes (the others are an HTTP status modulo 256).
    EXIT_CODES: ClassVar[dict[int, str]] = {
        41: "not authenticated",
        42: "bad input",
        44: "sandbox error",
        52: "bad configuration",
        53: "turn limit reached",
        55: (
            "the folder is not trusted (headless Gemini CLI refuses to run there): trust it "
            "once by running `gemini` in the project, or add --skip-trust to "
            "looprail.agents.gemini.args"
        ),
    }

    def readiness(
        self, project: Path, s: AgentSettings, env: Mapping[str, str]
    ) -> list[tuple[str, str]]:
        home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or Path.home())
        settings = _read_json(home / ".gemini" / "settings.json")
        where = Path(project).resolve()
        return [self._trust(where, s, env, home, settings), self._auth(env, settings)]

    def _trust(
        self,
        project: Path,
        s: AgentSettings,
        env: Mapping[str, str],
        home: Path,
        settings: dict[str, Any],
    ) -> tuple[str, str]:
        # Gemini CLI's own order (checkPathTrust): the env, the setting, trustedFolders.json.
        untrusted = (
            f"gemini: {project} is not a trusted folder, and headless Gemini CLI exits 55 "
            "there: trust it once (run `gemini` in it), set GEMINI_CLI_TRUST_WORKSPACE=true, "
            "or add --skip-trust to looprail.agents.gemini.args"
        )
        if "--skip-trust" in s.args:
            return "ok", "gemini: folder trust skipped (--skip-trust)"
        if env.get("GEMINI_RESTRICTED_MODE") == "true" or (
            env.get("GEMINI_CLI_TRUST_WORKSPACE") == "false"
        ):
            return "problem", untrusted
        if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true":
            return "ok", "gemini: folder trusted (GEMINI_CLI_TRUST_WORKSPACE=true)"
        trust = _obj(_obj(settings.get("security")).get("folderTrust"))
        if trust.get("enabled") is False:
            return "ok", "gemini: folder trust is off (security.folderTrust.enabled)"
        rules_file = Path(
            env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or home / ".gemini" / "trustedFolders.json"
        )
        where = os.path.realpath(project)
        best: tuple[int, str] | None = None
        for rule, level in _read_json(rules_file).items():
            folder = os.path.dirname(rule) if level == "TRUST_PARENT" else rule
            real = os.path.realpath(folder)
            inside = where == real or where.startswith(real.rstrip("/") + "/")
            if inside and (best is None or len(rule) > best[0]):
                best = (len(rule), str(level))
        if best is not None and best[1] in ("TRUST_FOLDER", "TRUST_PARENT"):
            return "ok", f"gemini: folder trusted ({rules_file})"
        return "problem", untrusted

    @staticmethod
    def _auth(env: Mapping[str, str], settings: dict[str, Any]) -> tuple[str, str]:
        chosen = _obj(_obj(settings.get("security")).get("auth")).get("selectedType")
        chosen = chosen or settings.get("selectedAuthType")
        if isinstance(chosen, str) and chosen:
            return "ok", f"gemini: auth {chosen} (settings.json)"
        # Gemini CLI's getAuthTypeFromEnv, in its order
        for var, value, mode in (
            ("GOOGLE_GENAI_USE_GCA", "true", "oauth-personal"),
            ("GOOGLE_GENAI_USE_VERTEXAI", "true", "vertex-ai"),
            ("GOOGLE_GEMINI_BASE_URL", None, "gateway"),
            ("GEMINI_API_KEY", None, "gemini-api-key"),
        ):
            if env.get(var) and (value is None or env.get(var) == value):
                return "ok", f"gemini: auth {mode} ({var})"
        return (
            "problem",
            "gemini: no auth method: headless Gemini CLI needs one; run `gemini` once and log "
            "in (it sets security.auth.selectedType in ~/.gemini/settings.json), or set "
            "GEMINI_API_KEY",
        )

    def exit_reason(self, code: int) -> str | None:
        if code in self.EXIT_CODES:
            return self.EXIT_CODES[code]
        status = {401 % 256: 401, 403 % 256: 403, 429 % 256: 429}.get(code)
        return f"HTTP {status}: {classify('', status)}" if status else None

    def permissions(self, s: AgentSettings) -> str:
        return f"--approval-mode {s.approval_mode or self.DEFAULT_APPROVAL}"

    def parse(self, stdout: str, stderr: str = "") -> Reply:
        r = Reply()
        obj = _json_block(stdout)
        if obj is None:  # an API error: stdout is empty, the JSON object is on stderr
            obj = _json_block(stderr)
            if obj is None or "error" not in obj:
                return r
        r.events = 1
        r.complete = True
        if isinstance(obj.get("response"), str):
            r.final = obj["response"]
        for key in ("session_id", "sessionId"):
            if isinstance(obj.get(key), str):
                r.session_id = obj[key]
        stats = _obj(obj.get("stats"))
        models = _obj(stats.get("models"))
        for model in models.values():
            tokens = _obj(_obj(model).get("tokens"))
            r.input_tokens = _add(r.input_tokens, tokens.get("prompt"))  # cache included
            r.cached_input_tokens = _add(r.cached_input_tokens, tokens.get("cached"))
            r.output_tokens = _add(r.output_tokens, tokens.get("candidates"))
        r.input_tokens = _add(r.input_tokens, stats.get("inputTokens"))
        r.output_tokens = _add(r.output_tokens, stats.get("outputTokens"))
        err = obj.get("error")
        if isinstance(err, dict):
            r.error = _api_message(str(err.get("message") or err.get("type") or err))
            r.error_status = _int(err.get("code"))
        elif isinstance(err, str) and err:
            r.error = err
        return r


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object file (comments allowed, as the CLIs allow them), or {}."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
    return _obj(parse_json_object(text))


def _json_block(text: str) -> dict[str, Any] | None:
    """The JSON object in `text`: all of it, or the last block that starts with `{` at the
    start of a line (Gemini CLI prints a stack trace before its JSON error)."""
    obj = parse_json_object(text)
    if obj is not None:
        return obj
    starts = [m.start() for m in re.finditer(r"^\{", text, flags=re.M)]
    for start in reversed(starts):
        obj = parse_json_object(text[start:])
        if obj is not None:
            return obj
    return None


def _api_message(text: str) -> str:
    """An API error body quoted as the message (`{"error": {"message": …}}`): its message."""
    inner = parse_json_object(text) if text.lstrip().startswith("{") else None
    message = _obj(_obj(inner).get("error")).get("message") if inner else None
    return message if isinstance(message, str) and message else text


def _denial(value: Any) -> str:
    """One refused tool call (claude's `permission_denials[]`) in one short line."""
    d = _obj(value)
    return f"{d.get('tool_name') or '?'} {_brief(d.get('tool_input'), 160)}".strip()


ADAPTERS: dict[str, type[Adapter]] = {
    a.name: a for a in (ClaudeAdapter, CodexAdapter, OpenCodeAdapter, GeminiAdapter)
}


def command_line(name: str, settings: AgentSettings) -> list[str]:
    """The argv an agent invocation runs with, `<prompt>` in the prompt's place."""
    request = SimpleNamespace(kind="task", name="", verdict=None)
    return ADAPTERS[name]().argv("<prompt>", request, settings, git=True)  # type: ignore[arg-type]


def describe(name: str, settings: AgentSettings) -> str:
    """The one line a run, `doctor` and `capability audit` print for agent `name`."""
    if name not in ADAPTERS:
        return f"agent {name}"
    argv = command_line(name, settings)
    shown = " ".join(_quote(a) for a in argv)
    mode = mode_in_effect(name, argv)
    if mode is not None:
        return f"agent {name}: {shown} ({MODE_NAME[name]} in effect: {mode})"
    return f"agent {name}: {shown} ({ADAPTERS[name]().permissions(settings)})"


def _quote(arg: str) -> str:
    return arg if arg == "<prompt>" else shlex.quote(arg)


def classify(error: str, status: int | None = None) -> str:
    """A short label for a CLI error: rate limited, not authenticated, or just error (by the
    HTTP status when the CLI reported one, else by the words of the message)."""
    if status == 429:
        return "rate limited"
    if status in (401, 403):
        return "not authenticated"
    low = error.lower()
    if "429" in low or "rate limit" in low or "rate_limit" in low or "quota" in low:
        return "rate limited"
    if "401" in low or "auth" in low or "api key" in low or "login" in low:
        return "not authenticated"
    return "error"


class AgentRuntime(BaseRuntime):
    """A coding agent CLI as a runtime (see the module docstring)."""

    adapter_class: ClassVar[type[Adapter]] = Adapter

    def __init__(
        self,
        project: str | Path,
        *,
        settings: AgentSettings | Mapping[str, Any] | None = None,
        timeouts: Timeouts | None = None,
        progress: Callable[[str], None] | None = None,
        host_tool: str | None = None,
        env: Mapping[str, str] | None = None,
        output: Callable[[str, str, str], None] | None = None,
    ) -> None:
        super().__init__(progress=progress, output=output)
        self.adapter = self.adapter_class()
        self.project = Path(project).resolve()
        if settings is None or isinstance(settings, Mapping):
            settings = AgentSettings.parse(self.adapter.name, settings or {})
        self.settings = settings
        self.timeouts = timeouts or Timeouts()
        self.env = dict(env or {})
        self.local = LocalRuntime(
            self.project,
            host_tool=host_tool,
            timeouts=timeouts,
            progress=progress,
            env=env,
            output=output,
        )
        self.transcripts = Transcripts(self.project)
        self.local.transcripts = self.transcripts  # commands and checks: one numbering, one run
        self._meter: Meter | None = None  # the run's (`begin_run`); none outside a run
        self._messages: list[str] = []
        self._lock = threading.Lock()
        self._git = _in_git(self.project)

    @classmethod
    def from_settings(cls, settings: Any) -> AgentRuntime:
        return cls(
            settings.project,
            settings=settings.agent,
            timeouts=settings.timeouts,
            progress=settings.progress,
            host_tool=settings.host_tool,
            env=settings.env,
            output=getattr(settings, "output", None),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.project)!r})"

    def describe(self) -> RuntimeInfo:
        """An agent CLI edits files: each plan works in a git worktree of its own."""
        return RuntimeInfo(name=self.name or type(self).__name__, wants_worktrees=True)

    def unready(self) -> str | None:
        """Why this runtime cannot run any agent work (its CLI is not on PATH), or None. A run
        asks before it starts, so a missing CLI is not found at the first role, after the run
        was journaled and its first hooks ran."""
        env = {**os.environ, **self.local.env, **self.env}
        binary = self.settings.binary or self.adapter.binary
        if find_program(binary, env) is None:
            return self._missing(binary)
        return None

    def _missing(self, binary: str) -> str:
        return (
            f"{self.adapter.name}: `{binary}` not found on PATH; {self.adapter.install} "
            "(`looprail doctor` checks it)"
        )

    def begin_run(self, run: RunStart) -> None:
        """Transcripts are filed under the run; its meter tallies every invocation, and a run
        resumed at its budget stops here, before any work (`BudgetReached`)."""
        self._meter = run.meter
        if run.meter is not None:
            run.meter.check()
        self.transcripts.run_id = run.run_id
        if self.progress is not None:
            self.progress(describe(self.adapter.name, self.settings))

    def end_run(self) -> None:
        self._meter = None

    def own(self, ctx: DispatchContext) -> DispatchContext:
        return self.local.own(ctx)

    def verdict_label(self, request: Request, ctx: DispatchContext) -> str:
        if request.kind == "query":
            return self.local.verdict_label(request, ctx)
        return f"{self.adapter.name} verdict from {request.name}"

    # -- the one method -------------------------------------------------------------------

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        if request.kind in ("command", "query"):
            return self.local.handle(request, ctx)
        if request.kind == "message":
            assert request.message is not None
            with self._lock:
                self._messages.append(request.message.text)
            return Outcome.succeeded()
        if request.kind == "compact":
            return Outcome.succeeded()  # every invocation is a fresh session
        meter = self._meter
        if meter is not None:
            meter.check()
        with self._lock:
            messages, self._messages = tuple(self._messages), []
        talk = ctx.terminal and request.kind == "phase"  # `run --interactive`'s discuss
        prompt = build_prompt(
            request,
            self.project,
            messages=messages,
            skill_form=self.adapter.skill_form(),
            agent_form=self.adapter.agent_form(),
            conversation=talk,
        )
        workdir = ctx.workdir or self.project
        env = self._env(request, ctx)
        binary = self.settings.binary or self.adapter.binary
        found = find_program(binary, env)
        if found is None:
            return Outcome.failed(self._missing(binary))
        folder = self.transcripts.folder(request)
        (folder / "prompt.md").write_text(prompt, encoding="utf-8")
        if talk:
            return agent_session(
                self, request, ctx, prompt=prompt, folder=folder, binary=found, env=env
            )
        stdin = None
        if self.adapter.prompt_on_stdin:
            argv = self.adapter.argv(prompt, request, self.settings, git=self._git)
            stdin = prompt
        elif len(prompt.encode()) > ARG_LIMIT:
            # One argv string may hold at most 128 KiB (Linux MAX_ARG_STRLEN): a long prompt
            # goes the way each CLI reads more input (stdin, or an attached file).
            short, extra, via_stdin = self.adapter.long_prompt(folder / "prompt.md")
            argv = self.adapter.argv(short, request, self.settings, git=self._git)
            argv += extra  # after the prompt: an array option must not swallow it
            stdin = prompt if via_stdin else None
        else:
            argv = self.adapter.argv(prompt, request, self.settings, git=self._git)
        argv[0] = os.path.abspath(found)
        timeout_s = ctx.timeout_s or self.timeouts.for_kind(request.kind)
        self.announce(request)
        # The streams go to the transcript as they arrive (a killed run leaves them), and
        # with -v to the terminal, each event read into one line.
        tee = OutputTee(
            split={"stdout": folder / "stdout.jsonl", "stderr": folder / "stderr.txt"},
            on_line=self._line_sink(request),
        )
        try:
            result = run_bounded(
                argv,
                timeout_s=timeout_s,
                stdin=stdin,
                cwd=workdir,
                env=env,
                output_cap=AGENT_OUTPUT_CAP,
                on_output=tee,
            )
        finally:
            tee.close()
        reply = self.adapter.parse(result.stdout, result.stderr)
        rel = self.transcripts.rel(folder)
        # A CLI that reports no cost, or $0 (opencode and claude for a model they have no
        # price for), is priced from its tokens when prices are configured.
        estimate = self._estimate(reply) if not reply.cost_usd else None
        cost = estimate if estimate is not None else reply.cost_usd
        usage = Usage(
            agent=self.adapter.name,
            session_id=reply.session_id,
            input_tokens=reply.input_tokens,
            cached_input_tokens=reply.cached_input_tokens,
            output_tokens=reply.output_tokens,
            cost_usd=cost,
        )
        if reply.denials and self.progress is not None:
            self.progress(
                f"{self.adapter.name} refused {len(reply.denials)} tool call(s) in "
                f"{output_label(request)}: {'; '.join(reply.denials[:3])}"
            )
        outcome = self._outcome(request, ctx, result, reply, timeout_s, rel, usage)
        _write_transcript(folder, prompt, argv, result, reply, outcome)
        if meter is not None:
            meter.record(
                {
                    "agent": self.adapter.name,
                    "kind": request.kind,
                    "name": request.name,
                    "planId": request.plan_id,
                    "taskId": request.task_id,
                    "ok": outcome.ok,
                    "sessionId": usage.session_id,
                    "inputTokens": usage.input_tokens,
                    "cachedInputTokens": usage.cached_input_tokens,
                    "outputTokens": usage.output_tokens,
                    "costUsd": usage.cost_usd,
                    "costEstimated": estimate is not None,
                    "permissionDenials": reply.denials or None,
                    "transcript": rel,
                    "durationMs": int(result.duration_s * 1000),
                }
            )
        return outcome

    # -- reading what happened ------------------------------------------------------------

    def _outcome(
        self,
        request: Request,
        ctx: DispatchContext,
        result: Any,
        reply: Reply,
        timeout_s: float,
        rel: str,
        usage: Usage,
    ) -> Outcome:
        name = self.adapter.name
        last = _last_words(reply, result.stderr)
        tail = f" (transcript: {rel})"
        common: dict[str, Any] = {
            "stderr": result.stderr,
            "duration_s": result.duration_s,
            "truncated": result.truncated,
            "usage": usage,
            "transcript": rel,
        }

        def failed(why: str) -> Outcome:
            said = f"; last words: {last}" if last and last not in why else ""
            code = result.exit_code if result.exit_code not in (0, None) else None
            return Outcome.failed(
                f"{why}{said}{tail}", exit_code=code, stdout=reply.final, **common
            )

        if result.spawn_error:
            return failed(f"{name}: could not start: {result.spawn_error}")
        if result.timed_out:
            return failed(f"{name} timed out after {timeout_s:g}s and was killed").model_copy(
                update={"timed_out": True}
            )
        if reply.error:
            label = classify(reply.error, reply.error_status)
            return failed(f"{name}: {label}: {_one_line(reply.error)}")
        code = result.exit_code
        if code != 0:
            meaning = self.adapter.exit_reason(code) if code is not None and code > 0 else None
            why = (
                f"was killed by {_signal_name(-code)}"
                if code is not None and code < 0
                else (f"exited {code}" + (f" ({meaning})" if meaning else ""))
            )
            return failed(f"{name} {why}")
        if not reply.complete:
            return failed(f"{name}: the output stream ended before the final result (cut off)")
        if request.kind == "verdict":
            verdict = extract_verdict(reply.final)
            stdout = json.dumps(verdict) if verdict is not None else reply.final
            return Outcome.succeeded(stdout, **common)
        problem = owed_problem(request, self.project)
        if problem is not None:
            refused = f" ({name} refused: {'; '.join(reply.denials)})" if reply.denials else ""
            return failed(f"{request.role or name} did not deliver: {problem}{refused}")
        return Outcome.succeeded(reply.final, **common)

    def _line_sink(self, request: Request) -> Callable[[str, str], None] | None:
        output = self.output
        if output is None:
            return None
        label = output_label(request)
        adapter = self.adapter

        def sink(stream: str, text: str) -> None:
            shown = adapter.show(text) if stream == "stdout" else text
            for part in (shown or "").splitlines():  # an event's text may hold many lines
                output(label, stream, part)

        return sink

    def _estimate(self, reply: Reply) -> float | None:
        """Cost from tokens and the configured prices, for CLIs that report no cost."""
        s = self.settings
        if s.input_usd_per_mtok is None or s.output_usd_per_mtok is None:
            return None
        if not reply.input_tokens and not reply.output_tokens:
            return None
        spent = (reply.input_tokens or 0) * s.input_usd_per_mtok
        spent += (reply.output_tokens or 0) * s.output_usd_per_mtok
        return round(spent / 1_000_000, 6)

    def _env(self, request: Request, ctx: DispatchContext) -> dict[str, str]:
        env = self.local._environment(request, ctx)
        env.update(self.env)
        return env


def extract_verdict(text: str) -> dict[str, Any] | None:
    """The `{block, message}` object in an agent's final text: the whole text, a fenced block,
    or the last line that is a JSON object."""
    candidates = [text]
    candidates += re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, flags=re.S)
    candidates += [line for line in reversed(text.splitlines()) if line.strip().startswith("{")]
    for c in candidates:
        obj = parse_json_object(c)
        if obj is not None and "block" in obj:
            return obj
    return None


def _last_words(reply: Reply, stderr: str) -> str:
    text = reply.final.strip() or reply.error or ""
    line = _last_line(text) if text else ""
    return line or _last_line(stderr)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(escape_untrusted(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _write_transcript(
    folder: Path, prompt: str, argv: Sequence[str], result: Any, reply: Reply, outcome: Outcome
) -> None:
    (folder / "prompt.md").write_text(prompt, encoding="utf-8")
    # stdout.jsonl and stderr.txt were written while the CLI ran (OutputTee)
    # the prompt (or gemini's `--prompt=PROMPT`) is in prompt.md beside
    shown = [
        "<prompt.md>"
        if a == prompt
        else a[: -len(prompt)] + "<prompt.md>"
        if a.endswith("=" + prompt)
        else a
        for a in argv
    ]
    meta = {
        "argv": shown,
        "exitCode": result.exit_code,
        "timedOut": result.timed_out,
        "durationS": round(result.duration_s, 3),
        "truncated": result.truncated,
        "events": reply.events,
        "complete": reply.complete,
        "sessionId": reply.session_id,
        "inputTokens": reply.input_tokens,
        "cachedInputTokens": reply.cached_input_tokens,
        "outputTokens": reply.output_tokens,
        "costUsd": reply.cost_usd,
        "error": reply.error,
        "errorStatus": reply.error_status,
        "permissionDenials": reply.denials,
        "final": reply.final,
        "ok": outcome.ok,
        "detail": outcome.detail,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def _in_git(path: Path) -> bool:
    return is_git_repo(path)


class ClaudeRuntime(AgentRuntime):
    name = "claude"
    adapter_class = ClaudeAdapter


class CodexRuntime(AgentRuntime):
    name = "codex"
    adapter_class = CodexAdapter


class OpenCodeRuntime(AgentRuntime):
    name = "opencode"
    adapter_class = OpenCodeAdapter


class GeminiRuntime(AgentRuntime):
    name = "gemini"
    adapter_class = GeminiAdapter


def agent_session(
    rt: AgentRuntime,
    request: Request,
    ctx: DispatchContext,
    *,
    prompt: str,
    folder: Path,
    binary: str,
    env: Mapping[str, str],
) -> Outcome:
    """One phase step as a conversation in the agent CLI's interactive mode."""
    name = rt.adapter.name
    problem = terminal_problem()
    if problem is not None:
        return Outcome.failed(f"{name}: an interactive session needs a terminal: {problem}")
    given = prompt
    if len(prompt.encode()) > ARG_LIMIT:  # stdin is the terminal: the CLI reads the file
        given = f"Read the file {folder / 'prompt.md'} and follow it: it is your brief."
    argv = rt.adapter.interactive_argv(given, request, rt.settings, git=rt._git)
    argv[0] = os.path.abspath(binary)
    shown = shown_argv(argv, given)
    if rt.progress is not None:
        rt.progress(handover_line(name, shown, request, rt.project))
    session = run_on_terminal(
        argv, cwd=ctx.workdir or rt.project, env=env, timeout_s=rt.timeouts.interactive
    )
    rel = rt.transcripts.rel(folder)
    usage = Usage(agent=name)
    outcome = session_outcome(
        name,
        session,
        request,
        rt.project,
        duration_s=session.duration_s,
        usage=usage,
        transcript=rel,
    )
    write_meta(folder, shown, session, outcome)
    if rt._meter is not None:
        rt._meter.record(
            {
                "agent": name,
                "kind": request.kind,
                "name": request.name,
                "planId": request.plan_id,
                "taskId": request.task_id,
                "ok": outcome.ok,
                "interactive": True,
                "transcript": rel,
                "durationMs": int(session.duration_s * 1000),
            }
        )
    return outcome
