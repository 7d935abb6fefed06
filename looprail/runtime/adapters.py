"""The four agent CLIs looprail drives, each an `Adapter`; the facts each relies on are in
docs/agents.md."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

from looprail.runtime.adapter import (
    Adapter,
    AgentSettings,
    Reply,
    add,
    brief,
    classify,
    events,
    items,
    json_block,
    number,
    obj,
    read_json,
    text_of,
    whole,
)
from looprail.runtime.agent_settings import MODE_NAME, mode_in_effect
from looprail.runtime.base import Request, parse_json_object
from looprail.runtime.permits import claude_rules, gemini_rules


def _model(s: AgentSettings) -> list[str]:
    return ["--model", s.model] if s.model else []


def _checks(request: Request) -> list[str]:
    return list(request.task.checks) if request.kind == "task" and request.task else []


class ClaudeAdapter(Adapter):
    """`claude -p --output-format stream-json --verbose -- PROMPT` (stream-json needs --verbose
    in print mode); `--permission-mode acceptEdits` by default: edits allowed, anything else
    Claude Code would ask about is denied (nobody can answer). `claude PROMPT` is interactive."""

    name = "claude"
    binary = "claude"
    install = (
        "install Claude Code (npm install -g @anthropic-ai/claude-code) and log in once by "
        "running `claude` (or set ANTHROPIC_API_KEY)"
    )
    DEFAULT_MODE = "acceptEdits"
    head = ("-p", "--output-format", "stream-json", "--verbose")
    skill_form = "/{name}"  # a Claude Code slash command (skills and custom commands)
    agent_form = "Use the {name} subagent (Task tool) for this."

    def flags(self, request: Request, s: AgentSettings, *, git: bool, live: bool) -> list[str]:
        flags = ["--permission-mode", s.permission_mode or self.DEFAULT_MODE]
        allowed = list(dict.fromkeys([*s.allowed_tools, *claude_rules(_checks(request))]))
        if allowed:
            flags += ["--allowedTools", ",".join(allowed)]
        return flags + _model(s)

    def may_run(self, commands: list[str]) -> list[str]:
        return claude_rules(commands)

    def permissions(self, s: AgentSettings) -> str:
        tools = f", allowed tools {','.join(s.allowed_tools)}" if s.allowed_tools else ""
        return f"--permission-mode {s.permission_mode or self.DEFAULT_MODE}{tools}"

    def event(self, ev: dict[str, object]) -> str | None:
        kind = ev.get("type")
        if kind == "system":
            return f"[{ev.get('subtype') or 'system'}] session {ev.get('session_id') or '?'}"
        if kind in ("assistant", "user"):
            parts = []
            for c in map(obj, items(obj(ev.get("message")).get("content"))):
                if c.get("type") == "text" and c.get("text"):
                    parts.append(str(c["text"]))
                elif c.get("type") == "tool_use":
                    parts.append(f"→ {c.get('name')} {brief(c.get('input'))}")
                elif c.get("type") == "tool_result":
                    parts.append(f"← {brief(c.get('content'))}")
            return "\n".join(parts) or None
        if kind == "result":
            cost = ev.get("total_cost_usd", ev.get("cost_usd"))
            spent = f", ${cost}" if isinstance(cost, (int, float)) else ""
            return f"[result] {ev.get('subtype') or ''}{spent}".rstrip()
        return super().event(ev)

    def parse(self, stdout: str, stderr: str = "") -> Reply:
        r = Reply()
        for ev in events(stdout):
            r.events += 1
            r.session_id = text_of(ev.get("session_id"), r.session_id)
            if ev.get("type") == "assistant":
                content = map(obj, items(obj(ev.get("message")).get("content")))
                texts = [
                    t for c in content if c.get("type") == "text" if (t := text_of(c.get("text")))
                ]
                if texts:
                    r.final = "\n".join(texts)
                if isinstance(ev.get("error"), str):  # e.g. rate_limit, authentication_failed
                    r.error = f"{ev['error']}: {r.final}".rstrip(": ")
            elif ev.get("type") == "result":
                _claude_result(r, ev)
        return r


def _claude_result(r: Reply, ev: dict[str, object]) -> None:
    r.complete = True
    r.error = None  # the result is authoritative (an earlier error was retried)
    result = text_of(ev.get("result"))
    if result is not None:
        r.final = result or r.final
    cost = number(ev.get("total_cost_usd", ev.get("cost_usd")))
    if cost is not None:
        r.cost_usd = cost
    usage = obj(ev.get("usage"))
    # input_tokens excludes the prompt cache: reads and writes are counted apart
    r.input_tokens = add(
        None,
        usage.get("input_tokens"),
        usage.get("cache_creation_input_tokens"),
        usage.get("cache_read_input_tokens"),
    )
    r.cached_input_tokens = whole(usage.get("cache_read_input_tokens"))
    r.output_tokens = add(None, usage.get("output_tokens"))
    r.error_status = whole(ev.get("api_error_status"))
    r.denials = [_denial(d) for d in items(ev.get("permission_denials"))]
    if ev.get("subtype") not in (None, "success"):
        r.error = f"{ev.get('subtype')}: {ev.get('result') or ''}".strip(": ")
    elif ev.get("is_error"):  # API errors end in subtype "success", is_error true
        r.error = str(ev.get("result") or "error")


def _denial(value: object) -> str:
    d = obj(value)
    return f"{d.get('tool_name') or '?'} {brief(d.get('tool_input'), 160)}".strip()


class CodexAdapter(Adapter):
    """`codex exec --json --sandbox workspace-write PROMPT`: JSON lines, tokens but no cost.
    Outside git `exec` needs --skip-git-repo-check; `codex PROMPT` is the TUI (which asks)."""

    name = "codex"
    binary = "codex"
    install = (
        "install Codex CLI (npm install -g @openai/codex) and log in once with `codex login` "
        "(or set OPENAI_API_KEY)"
    )
    DEFAULT_SANDBOX = "workspace-write"
    head = ("exec", "--json")

    def flags(self, request: Request, s: AgentSettings, *, git: bool, live: bool) -> list[str]:
        flags = ["--sandbox", s.sandbox or self.DEFAULT_SANDBOX]
        if not git and not live:
            flags.append("--skip-git-repo-check")
        return flags + _model(s)

    def permissions(self, s: AgentSettings) -> str:
        return f"--sandbox {s.sandbox or self.DEFAULT_SANDBOX} (codex exec never asks)"

    def may_run(self, commands: list[str]) -> list[str]:
        return ["any command, inside its --sandbox"]

    def event(self, ev: dict[str, object]) -> str | None:
        kind = ev.get("type")
        if kind in ("thread.started", "turn.started", "turn.completed", "turn.failed"):
            return f"[{kind}]"
        if kind in ("item.started", "item.completed", "item.updated"):
            item = obj(ev.get("item"))
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
        for ev in events(stdout):
            r.events += 1
            kind = ev.get("type")
            if kind == "thread.started":
                r.session_id = text_of(ev.get("thread_id"), r.session_id)
            elif kind == "item.completed":
                item = obj(ev.get("item"))
                if item.get("type") in ("agent_message", "assistant_message"):
                    r.final = str(item.get("text") or r.final)
            elif kind == "turn.completed":
                r.complete = True
                r.error = None  # an earlier error event was retried: the turn still completed
                usage = obj(ev.get("usage"))
                r.input_tokens = add(r.input_tokens, usage.get("input_tokens"))  # cache included
                r.cached_input_tokens = add(r.cached_input_tokens, usage.get("cached_input_tokens"))
                r.output_tokens = add(r.output_tokens, usage.get("output_tokens"))
            elif kind == "turn.failed":
                r.complete = True
                r.error = str(obj(ev.get("error")).get("message") or "turn failed")
            elif kind == "error":
                r.error = str(ev.get("message") or "error")
        return r


class OpenCodeAdapter(Adapter):
    """`opencode run --format json`, the prompt on stdin (JSON lines); `ref.agent` steps use
    `--agent NAME`. Permissions are OpenCode's own (opencode.json): looprail loosens nothing.
    `opencode --prompt=PROMPT` is the TUI."""

    name = "opencode"
    binary = "opencode"
    install = (
        "install OpenCode (npm install -g opencode-ai) and add a provider with "
        "`opencode auth login`"
    )
    # `opencode run MESSAGE` rewrites an argument holding spaces as a quoted string, and an
    # attached `--file` is cut at 50 KB; piped stdin is read verbatim, so the prompt goes there.
    prompt_on_stdin = True
    head = ("run", "--format", "json")
    prompt_args = ()
    # PROMPT in one argument, so it is never read as an option
    interactive_prompt_args = ("--prompt={prompt}",)
    agent_form = "You are the `{name}` agent."

    def flags(self, request: Request, s: AgentSettings, *, git: bool, live: bool) -> list[str]:
        flags = _model(s)
        if request.kind == "agent":
            flags += ["--agent", request.name]
        elif request.kind == "verdict" and request.verdict is not None:
            flags += ["--agent", request.verdict.ref]
        return flags

    def permissions(self, s: AgentSettings) -> str:
        return "OpenCode's own `permission` settings (opencode.json)"

    def may_run(self, commands: list[str]) -> list[str]:
        return ["what OpenCode's `permission.bash` allows (by default: any command)"]

    def event(self, ev: dict[str, object]) -> str | None:
        kind = ev.get("type")
        part = obj(ev.get("part"))
        if kind == "text":
            return str(part.get("text") or "") or None
        if kind == "tool_use":
            return f"→ {part.get('tool')} {brief(obj(part.get('state')).get('input'))}"
        if kind in ("step_start", "step_finish"):
            return None
        if kind == "error":
            err = obj(ev.get("error"))
            return f"[error] {obj(err.get('data')).get('message') or err.get('name')}"
        return super().event(ev)

    def parse(self, stdout: str, stderr: str = "") -> Reply:
        r = Reply()
        texts: list[str] = []
        for ev in events(stdout):
            r.events += 1
            kind = ev.get("type")
            r.session_id = text_of(ev.get("sessionID"), r.session_id)
            part = obj(ev.get("part"))
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(str(part["text"]))
            elif kind == "step_finish":
                _opencode_step(r, part)
            elif kind == "error":
                err = obj(ev.get("error"))
                data = obj(err.get("data"))
                r.error = str(data.get("message") or err.get("message") or err.get("name") or ev)
                r.error_status = whole(data.get("statusCode"))
        r.final = texts[-1] if texts else ""
        return r


def _opencode_step(r: Reply, part: dict[str, object]) -> None:
    tokens = obj(part.get("tokens"))
    cache = obj(tokens.get("cache"))
    # tokens.input excludes the prompt cache: reads and writes are counted apart
    r.input_tokens = add(r.input_tokens, tokens.get("input"), cache.get("read"), cache.get("write"))
    r.cached_input_tokens = add(r.cached_input_tokens, cache.get("read"))
    r.output_tokens = add(r.output_tokens, tokens.get("output"))
    cost = number(part.get("cost"))
    if cost is not None:
        r.cost_usd = (r.cost_usd or 0.0) + cost
    if part.get("reason") in ("stop", "end_turn", "completed", None):
        r.complete = True


class GeminiAdapter(Adapter):
    """`gemini --output-format json --approval-mode auto_edit --prompt=PROMPT`: one JSON object
    `{response, stats, error?}` on stdout; on an API error it goes to stderr and the exit code
    is the HTTP status modulo 256 (401 -> 145). `--prompt-interactive=PROMPT` is interactive."""

    name = "gemini"
    binary = "gemini"
    install = (
        "install Gemini CLI (npm install -g @google/gemini-cli) and log in once by running "
        "`gemini` (or set GEMINI_API_KEY)"
    )
    DEFAULT_APPROVAL = "auto_edit"
    head = ("--output-format", "json")
    prompt_args = ("--prompt={prompt}",)
    interactive_prompt_args = ("--prompt-interactive={prompt}",)
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

    # read_file refuses a file .gitignore names ("ignored by configured ignore patterns")
    reads_ignored_files = False

    def flags(self, request: Request, s: AgentSettings, *, git: bool, live: bool) -> list[str]:
        flags = ["--approval-mode", s.approval_mode or self.DEFAULT_APPROVAL, *_model(s)]
        # `=`: the array option takes this one value only, never the prompt after it
        return flags + [f"--allowed-tools={rule}" for rule in gemini_rules(_checks(request))]

    def may_run(self, commands: list[str]) -> list[str]:
        return gemini_rules(commands)

    def folder_args(self, folder: Path) -> list[str]:
        return [f"--include-directories={folder}"]  # `=`: the array option takes this one only

    def readiness(
        self, project: Path, s: AgentSettings, env: Mapping[str, str]
    ) -> list[tuple[str, str]]:
        home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or Path.home())
        settings = read_json(home / ".gemini" / "settings.json")
        where = Path(project).resolve()
        return [_gemini_trust(where, s, env, home, settings), _gemini_auth(env, settings)]

    def exit_reason(self, code: int) -> str | None:
        if code in self.EXIT_CODES:
            return self.EXIT_CODES[code]
        status = {401 % 256: 401, 403 % 256: 403, 429 % 256: 429}.get(code)
        return f"HTTP {status}: {classify('', status)}" if status else None

    def permissions(self, s: AgentSettings) -> str:
        return f"--approval-mode {s.approval_mode or self.DEFAULT_APPROVAL}"

    def parse(self, stdout: str, stderr: str = "") -> Reply:
        r = Reply()
        found = json_block(stdout)
        if found is None:  # an API error: stdout is empty, the JSON object is on stderr
            found = json_block(stderr)
            if found is None or "error" not in found:
                return r
        r.events = 1
        r.complete = True
        r.final = text_of(found.get("response"), r.final) or ""
        for key in ("session_id", "sessionId"):
            r.session_id = text_of(found.get(key), r.session_id)
        stats = obj(found.get("stats"))
        for model in obj(stats.get("models")).values():
            tokens = obj(obj(model).get("tokens"))
            r.input_tokens = add(r.input_tokens, tokens.get("prompt"))  # cache included
            r.cached_input_tokens = add(r.cached_input_tokens, tokens.get("cached"))
            r.output_tokens = add(r.output_tokens, tokens.get("candidates"))
        r.input_tokens = add(r.input_tokens, stats.get("inputTokens"))
        r.output_tokens = add(r.output_tokens, stats.get("outputTokens"))
        err = found.get("error")
        if isinstance(err, dict):
            r.error = _api_message(str(err.get("message") or err.get("type") or err))
            r.error_status = whole(err.get("code"))
        elif isinstance(err, str) and err:
            r.error = err
        return r


def _gemini_trust(
    project: Path,
    s: AgentSettings,
    env: Mapping[str, str],
    home: Path,
    settings: dict[str, object],
) -> tuple[str, str]:
    """Gemini CLI's own order (checkPathTrust): the env, the setting, trustedFolders.json."""
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
    trust = obj(obj(settings.get("security")).get("folderTrust"))
    if trust.get("enabled") is False:
        return "ok", "gemini: folder trust is off (security.folderTrust.enabled)"
    rules_file = Path(
        env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or home / ".gemini" / "trustedFolders.json"
    )
    where = os.path.realpath(project)
    best: tuple[int, str] | None = None
    for rule, level in read_json(rules_file).items():
        real = os.path.realpath(os.path.dirname(rule) if level == "TRUST_PARENT" else rule)
        inside = where == real or where.startswith(real.rstrip("/") + "/")
        if inside and (best is None or len(rule) > best[0]):
            best = (len(rule), str(level))
    if best is not None and best[1] in ("TRUST_FOLDER", "TRUST_PARENT"):
        return "ok", f"gemini: folder trusted ({rules_file})"
    return "problem", untrusted


def _gemini_auth(env: Mapping[str, str], settings: dict[str, object]) -> tuple[str, str]:
    chosen = obj(obj(settings.get("security")).get("auth")).get("selectedType")
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


def _api_message(text: str) -> str:
    """An API error body quoted as the message (`{"error": {"message": …}}`): its message."""
    inner = parse_json_object(text) if text.lstrip().startswith("{") else None
    message = obj(obj(inner).get("error")).get("message")
    return message if isinstance(message, str) and message else text


ADAPTERS: dict[str, type[Adapter]] = {
    a.name: a for a in (ClaudeAdapter, CodexAdapter, OpenCodeAdapter, GeminiAdapter)
}


def describe(name: str, settings: AgentSettings) -> str:
    """The line a run, `doctor` and `capability audit` print for agent `name`: the argv an
    invocation runs with (the prompt itself goes on stdin)."""
    if name not in ADAPTERS:
        return f"agent {name}"
    adapter = ADAPTERS[name]()
    request = SimpleNamespace(kind="task", name="", verdict=None, task=None)
    argv = adapter.invocation(request, settings, git=True)  # type: ignore[arg-type]
    shown = " ".join(shlex.quote(a) for a in argv) + " < <prompt>"
    mode = mode_in_effect(name, argv)
    if mode is not None:
        return f"agent {name}: {shown} ({MODE_NAME[name]} in effect: {mode})"
    return f"agent {name}: {shown} ({adapter.permissions(settings)})"
