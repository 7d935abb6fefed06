"""A scripted model server for the real agent CLIs (stdlib only, 127.0.0.1, port 0).

It speaks the four APIs the CLIs use — the OpenAI Responses API (codex), the Anthropic
Messages API with SSE (claude, `ANTHROPIC_BASE_URL`), OpenAI chat completions (opencode, an
`@ai-sdk/openai-compatible` provider) and the Gemini API (gemini, `GOOGLE_GEMINI_BASE_URL`) —
and plays a model that does what looprail's prompt asks: it reads the owed artifact (or the
task's files) from the prompt, answers with the CLI's own file-writing tool calls (absolute
paths under the folder the CLI says it works in), and once it sees the tool results, a final
message. `mode` scripts the failures: `lazy` (a final message, nothing written), `401`, `429`.
When the first message only names a file holding the brief (an interactive session, whose
prompt is never on the command line), the model first reads it with the CLI's own read tool.

`home(cli, root)` writes a fresh HOME that points that CLI at the server.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from looprail.runtime.adapter import file_prompt

MODEL = "looprail-test-model"
CONTEXT = "# Context\n\n- Decided.\n"
SHELL_MARK = "shell-ran.txt"  # what the `shell` mode's command creates in the CLI's folder

PLAN = """---
phase: {slug}
plan: "{plan}"
type: execute
wave: {wave}
depends_on: {deps}
files_modified: ["{target}"]
autonomous: true
requirements: [R-1]
---

<objective>
Plan {plan}
</objective>

<tasks>
<task type="auto">
<name>Write {target}</name>
<files>{target}</files>
<read_first></read_first>
<action>Write {target}</action>
<verify>it exists</verify>
<done>{target} exists</done>
</task>
</tasks>
"""

# The first message of an interactive session: read the brief in this file (looprail's words).
_BRIEF_FILE = re.compile(re.escape(file_prompt(Path("@"))).replace("@", "(.+?)"))
READ_TOOLS = ("Read", "read", "read_file")  # claude, opencode, gemini
_PATH_PARAMS = ("file_path", "filePath", "absolute_path", "path")

# Where each CLI says, in what it sends the model, which folder it works in.
_CWD_PATTERNS = (
    r"<cwd>([^<\n]+)</cwd>",  # codex: <environment_context>
    r"Working directory: ([^\n\\\"]+)",  # claude, opencode
    r"Primary working directory: ([^\n\\\"]+)",  # claude (newer)
    r"\*\*Workspace Directories:\*\*\s*\n\s*- ([^\n]+)",  # gemini
    r"Current working directory: ([^\n\\\"]+)",
)


@dataclass
class Call:
    """One request the server answered (tests read them)."""

    api: str
    path: str
    body: dict[str, Any]
    text: str  # every string in the request, joined (to search the prompt and the cwd)
    results: str = ""  # every string in the request's tool results, joined
    status: int = 200
    tools: bool = False  # the request offered tools: an agent's turn (not a title or a probe)
    shell_offered: bool | None = None  # `shell` mode: whether the CLI offered its shell tool
    answer: str = ""  # what the model answered (its text and tool calls, as JSON, no framing)


@dataclass
class Script:
    """What the model does: `ok` writes what the prompt owes; `lazy`, `401`, `429` fail."""

    mode: str = "ok"
    only: str | None = None  # apply `mode` only to prompts containing this text
    context: str = CONTEXT  # what the model writes as CONTEXT.md
    shell: str = "touch {mark}"  # `shell` mode's command ({mark}: SHELL_MARK's absolute path)
    calls: list[Call] = field(default_factory=list)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def brief_file(text: str) -> str | None:
    """The file an interactive session's first message says holds the brief, if it says so."""
    found = _BRIEF_FILE.search(text)
    return found.group(1) if found else None


def _tool_results(value: Any) -> list[str]:
    """The strings of the tool results in a request, in any of the four APIs."""
    if isinstance(value, list):
        return [s for v in value for s in _tool_results(v)]
    if not isinstance(value, dict):
        return []
    kind = str(value.get("type", ""))
    if kind == "tool_result" or kind.endswith("_call_output") or value.get("role") == "tool":
        return _strings(value)
    if "functionResponse" in value:
        return _strings(value["functionResponse"])
    return [s for v in value.values() for s in _tool_results(v)]


def _tool(tools: Any, names: tuple[str, ...]) -> dict[str, Any] | None:
    """The declaration of the first tool named in `names` among a request's `tools`."""
    if isinstance(tools, dict):
        if tools.get("name") in names:
            return tools
        tools = list(tools.values())
    if isinstance(tools, list):
        return next(filter(None, (_tool(v, names) for v in tools)), None)
    return None


def _path_param(tool: Any) -> str | None:
    """The name of the path argument a file tool's declaration asks for."""
    if isinstance(tool, dict):
        props = tool.get("properties")
        if isinstance(props, dict):
            found = next((p for p in _PATH_PARAMS if p in props), None)
            if found:
                return found
        return next(filter(None, map(_path_param, tool.values())), None)
    return None


# A line number a read tool puts before each line it returns (claude `  12→`, opencode `00012|`).
_LINE_NUMBER = re.compile(r"^\s*\d+(?:→|\t|\|)")


def _owed(prompt: str) -> str:
    """The sentence of looprail's `## What you owe` section, and only it: what a CLI appends
    after the prompt is not owed (gemini adds the text of each file an `@path` names, such as
    the `@…-CONTEXT.md` of the PLAN format the planner's brief shows)."""
    rest = prompt.split("## What you owe", 1)[1] if "## What you owe" in prompt else ""
    sentence: list[str] = []
    for line in rest.splitlines()[1:]:
        text = _LINE_NUMBER.sub("", line).strip()
        if not text and sentence:
            break
        sentence += [text] if text else []
    return " ".join(sentence)


def writes_for(prompt: str, cwd: str, context: str = CONTEXT) -> list[tuple[str, str]]:
    """`(absolute path, content)` for what looprail's prompt owes (as tests/fakes/fake_agent.py
    writes it), under `cwd`."""
    owe = _owed(prompt)
    found = re.search(r"- Phase folder: `([^`]+)`", prompt)
    out: list[tuple[str, str]] = []
    if owe and found:
        phase_dir = found.group(1)
        slug = Path(phase_dir).name
        prefix = slug.split("-", 1)[0]
        base = f"{cwd}/{phase_dir}"
        if "CONTEXT.md" in owe:
            out.append((f"{base}/{prefix}-CONTEXT.md", context))
        elif "PLAN.md" in owe:
            for plan, target, wave, deps in (
                ("01", "a.txt", 1, "[]"),
                ("02", "b.txt", 1, "[]"),
                ("03", "c.txt", 2, '["01", "02"]'),
            ):
                text = PLAN.format(slug=slug, plan=plan, wave=wave, deps=deps, target=target)
                out.append((f"{base}/{prefix}-{plan}-PLAN.md", text))
        elif "VERIFICATION.md" in owe:
            text = "---\nstatus: passed\n---\n\n# Verification\n\n- All plans done.\n"
            out.append((f"{base}/{prefix}-VERIFICATION.md", text))
    # looprail's task heading (`## Task 01-01/T1: …`), not a heading of the CLI's own prompt
    task = re.search(r"^## Task (\d[\w.]*-\d+/\S+?):? ", prompt, flags=re.M)
    files = re.search(r"^- Files: (.+)$", prompt[task.end() :], flags=re.M) if task else None
    if task and files:
        for name in files.group(1).split(","):
            out.append((f"{cwd}/{name.strip()}", f"{task.group(1)} written in {Path(cwd).name}\n"))
    return out


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # model lists, health checks
        if "models" in self.path:
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_HEAD(self) -> None:
        self._json(200, {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?", 1)[0]
        if path.endswith("/responses"):
            api = "responses"
        elif path.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": 10})
            return
        elif path.endswith("/messages"):
            api = "messages"
        elif path.endswith("/chat/completions"):
            api = "chat"
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            api = "gemini"
        elif ":countTokens" in path:
            self._json(200, {"totalTokens": 10})
            return
        else:
            self._json(404, {"error": {"message": f"no such endpoint {path}"}})
            return
        text, results = "\n".join(_strings(body)), "\n".join(_tool_results(body))
        call = Call(api, self.path, body, text, results, tools=bool(body.get("tools")))
        script = self.server.script
        with self.server.lock:
            script.calls.append(call)
        mode = script.mode if not script.only or script.only in call.text else "ok"
        if mode in ("401", "429"):
            call.status = int(mode)
            self._error(api, int(mode))
            return
        getattr(self, f"_{api}")(body, call, mode)

    # -- plumbing ----------------------------------------------------------------------------

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        if status == 429:  # as rate-limiting APIs say when to come back: now (tests are fast)
            self.send_header("Retry-After", "0")
            self.send_header("retry-after-ms", "0")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, Any]]) -> None:
        chunks = []
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            payload = data if isinstance(data, str) else json.dumps(data)
            chunks.append(f"{head}data: {payload}\n\n")
        data = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, api: str, status: int) -> None:
        text = {
            401: "Invalid API key: the key looprail-test-key is not valid",
            429: "Rate limit exceeded: too many requests, try again later",
        }[status]
        if api == "messages":
            kind = "authentication_error" if status == 401 else "rate_limit_error"
            self._json(status, {"type": "error", "error": {"type": kind, "message": text}})
        elif api == "gemini":
            st = "UNAUTHENTICATED" if status == 401 else "RESOURCE_EXHAUSTED"
            self._json(status, {"error": {"code": status, "message": text, "status": st}})
        else:
            kind = "invalid_api_key" if status == 401 else "rate_limit_exceeded"
            self._json(status, {"error": {"message": text, "type": kind, "code": kind}})

    def _plan(
        self, call: Call, mode: str, rounds: int, shell: str | None = None
    ) -> tuple[str | None, list[tuple[str, str]]]:
        """`(shell command, writes)` to make now, after `rounds` rounds of tool calls: in
        `shell` mode a shell command first (when the CLI offers its shell tool `shell`, else
        the call notes it was not offered), then the writes; a lazy model writes nothing."""
        cwd = _cwd(call.text)
        if mode == "shell":
            call.shell_offered = shell is not None
            if shell is not None:
                if rounds == 0 and cwd:
                    mark = f"'{cwd}/{SHELL_MARK}'"
                    return self.server.script.shell.replace("{mark}", mark), []
                rounds -= 1
        if rounds > 0 or mode == "lazy" or not cwd:
            return None, []
        return None, writes_for(call.text, cwd, self.server.script.context)

    @staticmethod
    def _read_brief(
        call: Call, tools: Any, rounds: int
    ) -> tuple[tuple[str, dict[str, str]] | None, int]:
        """`((read tool, its arguments), 0)` in the first round when the first message names
        the file holding the brief and the CLI offers a read tool, as a model reads its brief;
        later `(None, rounds after that read)`; `(None, rounds)` for a prompt given whole."""
        brief = brief_file(call.text)
        tool = _tool(tools, READ_TOOLS)
        param = _path_param(tool)
        if brief is None or tool is None or param is None:
            return None, rounds
        if rounds == 0:
            return (str(tool["name"]), {param: brief}), 0
        return None, rounds - 1

    @staticmethod
    def _final(writes_done: bool) -> str:
        return "Wrote the files." if writes_done else "I looked around and wrote nothing."

    # -- codex: the Responses API (SSE) -------------------------------------------------------

    def _responses(self, body: dict[str, Any], call: Call, mode: str) -> None:
        items = body.get("input") or []
        rounds = sum(
            isinstance(i, dict) and str(i.get("type", "")).endswith("_call") for i in items
        )
        answered = rounds > 0
        tools = {
            t.get("name") or (t.get("function") or {}).get("name") for t in body.get("tools") or []
        }
        shell = "exec_command" if "exec_command" in tools else None
        command, writes = self._plan(call, mode, rounds, shell)
        rid = f"resp_{uuid.uuid4().hex[:12]}"
        output: list[dict[str, Any]] = []
        if command:
            cid = f"call_{uuid.uuid4().hex[:8]}"
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{cid}",
                    "call_id": cid,
                    "name": "exec_command",
                    "arguments": json.dumps({"cmd": command}),
                    "status": "completed",
                }
            )
        elif writes:
            patch = "*** Begin Patch\n"
            for path, text in writes:
                patch += f"*** Add File: {path}\n" + "".join(
                    f"+{line}\n" for line in text.splitlines()
                )
            patch += "*** End Patch\n"
            tool = next(
                (t for t in body.get("tools") or [] if t.get("name") == "apply_patch"), None
            )
            cid = f"call_{uuid.uuid4().hex[:8]}"
            if tool is not None and tool.get("type") == "custom":
                output.append(
                    {
                        "type": "custom_tool_call",
                        "id": f"ctc_{cid}",
                        "call_id": cid,
                        "name": "apply_patch",
                        "input": patch,
                        "status": "completed",
                    }
                )
            elif "apply_patch" in tools:
                output.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{cid}",
                        "call_id": cid,
                        "name": "apply_patch",
                        "arguments": json.dumps({"input": patch}),
                        "status": "completed",
                    }
                )
            else:  # exec_command (unified exec), or the older `shell`
                script = "".join(
                    f"mkdir -p '{Path(p).parent}' && printf %s {_sh(t)} > '{p}'\n"
                    for p, t in writes
                )
                name = "exec_command" if "exec_command" in tools else "shell"
                args = (
                    {"cmd": script}
                    if name == "exec_command"
                    else {"command": ["bash", "-lc", script]}
                )
                output.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{cid}",
                        "call_id": cid,
                        "name": name,
                        "arguments": json.dumps(args),
                        "status": "completed",
                    }
                )
        else:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:8]}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": self._final(answered), "annotations": []}
                    ],
                }
            )
        call.answer = json.dumps(output)
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "response": {"id": rid}})
        ]
        for item in output:
            events.append(
                ("response.output_item.done", {"type": "response.output_item.done", "item": item})
            )
        usage = {
            "input_tokens": 1000,
            "input_tokens_details": {"cached_tokens": 600},
            "output_tokens": 50,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 1050,
        }
        events.append(
            (
                "response.completed",
                {"type": "response.completed", "response": {"id": rid, "usage": usage}},
            )
        )
        self._sse(events)

    # -- claude: the Messages API (SSE) ---------------------------------------------------------

    def _messages(self, body: dict[str, Any], call: Call, mode: str) -> None:
        messages = body.get("messages") or []
        rounds = sum(
            isinstance(m, dict)
            and m.get("role") == "assistant"
            and isinstance(m.get("content"), list)
            and any(isinstance(c, dict) and c.get("type") == "tool_use" for c in m["content"])
            for m in messages
        )
        answered = rounds > 0
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        read, rounds = self._read_brief(call, body.get("tools"), rounds)
        command, writes = (
            self._plan(call, mode, rounds, "Bash" if "Bash" in tools else None)
            if "Write" in tools and not read
            else (None, [])
        )
        mid = f"msg_{uuid.uuid4().hex[:12]}"
        usage = {
            "input_tokens": 100,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 600,
            "output_tokens": 50,
        }
        blocks: list[dict[str, Any]] = []
        if read:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:12]}",
                    "name": read[0],
                    "input": read[1],
                }
            )
        elif command:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:12]}",
                    "name": "Bash",
                    "input": {"command": command, "description": "Create a file"},
                }
            )
        elif writes:
            for path, text in writes:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": f"toolu_{uuid.uuid4().hex[:12]}",
                        "name": "Write",
                        "input": {"file_path": path, "content": text},
                    }
                )
        else:
            blocks.append({"type": "text", "text": self._final(answered) if tools else "ok"})
        call.answer = json.dumps(blocks)
        events: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": mid,
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model") or MODEL,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {**usage, "output_tokens": 1},
                    },
                },
            )
        ]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": block["text"]},
                        },
                    )
                )
            else:
                start = {**block, "input": {}}
                events.append(
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": i, "content_block": start},
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {
                                "type": "input_json_delta",
                                "partial_json": json.dumps(block["input"]),
                            },
                        },
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        stop = "tool_use" if writes or command or read else "end_turn"
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 50},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        if body.get("stream"):
            self._sse(events)
        else:
            self._json(
                200,
                {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": blocks,
                    "stop_reason": stop,
                    "usage": usage,
                },
            )

    # -- opencode: chat completions (SSE) -------------------------------------------------------

    def _chat(self, body: dict[str, Any], call: Call, mode: str) -> None:
        messages = body.get("messages") or []
        rounds = sum(
            isinstance(m, dict) and m.get("role") == "assistant" and bool(m.get("tool_calls"))
            for m in messages
        )
        answered = rounds > 0
        tools = {
            (t.get("function") or {}).get("name")
            for t in body.get("tools") or []
            if isinstance(t, dict)
        }
        read, rounds = self._read_brief(call, body.get("tools"), rounds)
        command, writes = (
            self._plan(call, mode, rounds, "bash" if "bash" in tools else None)
            if "write" in tools and not read
            else (None, [])
        )
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        usage = {
            "prompt_tokens": 1000,
            "completion_tokens": 50,
            "total_tokens": 1050,
            "prompt_tokens_details": {"cached_tokens": 600},
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": MODEL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }

        events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
        if read:
            call_ = {
                "index": 0,
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": read[0], "arguments": json.dumps(read[1])},
            }
            events.append((None, chunk({"tool_calls": [call_]})))
            finish = "tool_calls"
        elif command:
            call_ = {
                "index": 0,
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {
                    "name": "bash",
                    "arguments": json.dumps({"command": command, "description": "Create a file"}),
                },
            }
            events.append((None, chunk({"tool_calls": [call_]})))
            finish = "tool_calls"
        elif writes:
            for i, (path, text) in enumerate(writes):
                call_ = {
                    "index": i,
                    "id": f"call_{uuid.uuid4().hex[:8]}",
                    "type": "function",
                    "function": {
                        "name": "write",
                        "arguments": json.dumps({"filePath": path, "content": text}),
                    },
                }
                events.append((None, chunk({"tool_calls": [call_]})))
            finish = "tool_calls"
        else:
            events.append((None, chunk({"content": self._final(answered) if tools else "A title"})))
            finish = "stop"
        call.answer = json.dumps([e[1]["choices"][0]["delta"] for e in events[1:]])
        events.append((None, chunk({}, finish)))
        events.append(
            (
                None,
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": MODEL,
                    "choices": [],
                    "usage": usage,
                },
            )
        )
        events.append((None, "[DONE]"))
        self._sse(events)

    # -- gemini: the Gemini API (streamGenerateContent, SSE) ------------------------------------

    def _gemini(self, body: dict[str, Any], call: Call, mode: str) -> None:
        contents = body.get("contents") or []
        rounds = sum(
            isinstance(c, dict)
            and c.get("role") == "model"
            and any(isinstance(p, dict) and "functionCall" in p for p in c.get("parts") or [])
            for c in contents
        )
        answered = rounds > 0
        names = {
            d.get("name")
            for t in body.get("tools") or []
            if isinstance(t, dict)
            for d in t.get("functionDeclarations") or []
        }
        shell = "run_shell_command" if "run_shell_command" in names else None
        read, rounds = self._read_brief(call, body.get("tools"), rounds)
        command, writes = (
            self._plan(call, mode, rounds, shell)
            if "write_file" in names and not read
            else (None, [])
        )
        if read:
            parts = [{"functionCall": {"name": read[0], "args": read[1]}}]
        elif command:
            parts = [{"functionCall": {"name": "run_shell_command", "args": {"command": command}}}]
        elif writes:
            parts = [
                {"functionCall": {"name": "write_file", "args": {"file_path": p, "content": t}}}
                for p, t in writes
            ]
        else:
            final = (
                self._final(answered) if names else '{"next_speaker": "user", "reasoning": "done"}'
            )
            parts = [{"text": final}]
        call.answer = json.dumps(parts)
        response = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 1000,
                "cachedContentTokenCount": 600,
                "candidatesTokenCount": 50,
                "totalTokenCount": 1050,
            },
            "modelVersion": MODEL,
        }
        if ":streamGenerateContent" in call.path:
            self._sse([(None, response)])
        else:
            self._json(200, response)


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _cwd(text: str) -> str | None:
    for pattern in _CWD_PATTERNS:
        found = re.search(pattern, text)
        if found:
            return found.group(1).strip().rstrip(".")
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: Script
    lock: threading.Lock


class ModelServer:
    """`with ModelServer() as server:` serves on `server.url` until the block ends."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.script = self.script
        self._httpd.lock = threading.Lock()
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    @property
    def calls(self) -> list[Call]:
        return self.script.calls
