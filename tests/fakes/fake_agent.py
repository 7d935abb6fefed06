#!/usr/bin/env python3
"""A fake coding-agent CLI for tests: installed as `claude`, `codex`, `opencode` and `gemini`
(its file name picks which). It accepts the real CLI's non-interactive argv, emits that CLI's
documented output format (docs/agents.md), writes the artifacts the prompt asks for, and fails
the documented ways when told to.

Environment:
- FAKE_AGENT_MODE: ok (default) | exit | rate_limit | auth | cut | hang | lazy | bad_verdict | bad_plan
- FAKE_AGENT_ONLY: apply the mode only when the prompt contains this text
- FAKE_AGENT_LOG: append one JSON line per invocation ({agent, argv, prompt, cwd, pwd, pid})
- FAKE_AGENT_CONFLICT=1: the planner's two parallel plans both write `shared.txt`
- FAKE_AGENT_COST: cost per invocation in USD (default 0.01)
- FAKE_AGENT_SLEEP: seconds each invocation takes (default 0)
- FAKE_AGENT_EVENT_SLEEP: seconds between two lines of output (default 0: a streaming agent)
- FAKE_AGENT_WAIT_FOR: after its first line of output, wait (up to 30 s) until this file exists
- FAKE_AGENT_ALSO: a task also writes `<task id, / as ->-<this>` in its working folder
"""

import json
import os
import re
import sys
import time
import uuid
from pathlib import Path

agent = Path(sys.argv[0]).name
args = sys.argv[1:]

if args == ["--version"]:
    print(f"fake-{agent} 1.0.0")
    sys.exit(0)


def fail(message: str, code: int = 2) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


# -- argv, as the real CLI reads it ----------------------------------------------------------
if agent == "claude":
    if "-p" not in args:
        fail("fake claude: needs -p")
    if "--" not in args or args.index("--") != len(args) - 2:
        fail("fake claude: the prompt goes last, after `--`")
    prompt = args[-1]
    if "--output-format" not in args or args[args.index("--output-format") + 1] != "stream-json":
        fail("fake claude: needs --output-format stream-json")
    if "--verbose" not in args:
        fail("Error: When using --print, --output-format=stream-json requires --verbose", 1)
    if "--dangerously-skip-permissions" in args:
        fail("fake claude: looprail must never skip permissions silently")
elif agent == "codex":
    if args[:2] != ["exec", "--json"]:
        fail("fake codex: expected `exec --json`")
    if "--" not in args or args.index("--") != len(args) - 2:
        fail("fake codex: the prompt goes last, after `--`")
    prompt = args[-1]
elif agent == "opencode":
    if args[:3] != ["run", "--format", "json"]:
        fail("fake opencode: expected `run --format json`")
    if any(" " in a for a in args):  # the real one rewrites such an argument as "…"
        fail("fake opencode: the prompt goes on stdin, not in argv")
    prompt = ""
elif agent == "gemini":
    given = [a for a in args if a.startswith("--prompt=")]
    if not given or "--output-format" not in args:
        fail("fake gemini: needs --prompt=PROMPT and --output-format json")
    prompt = given[-1][len("--prompt=") :]
    if "--yolo" in args:
        fail("fake gemini: looprail must never skip approvals silently")
else:
    fail(f"fake agent: unknown name {agent}")

if not sys.stdin.isatty():  # piped input is read as (more) prompt
    prompt += "\n" + sys.stdin.read()


def cmdline() -> list[str]:
    """This process's command line as any local user reads it (`/proc/PID/cmdline`)."""
    try:
        return Path(f"/proc/{os.getpid()}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return sys.argv


log = os.environ.get("FAKE_AGENT_LOG")
if log:
    with open(log, "a") as fh:
        fh.write(
            json.dumps(
                {
                    "agent": agent,
                    "argv": args,
                    "prompt": prompt,
                    "cwd": os.getcwd(),
                    "pwd": os.environ.get("PWD"),
                    "pid": os.getpid(),
                    "cmdline": cmdline(),
                    "env": {k: v for k, v in os.environ.items() if k.startswith("LOOPRAIL_")},
                }
            )
            + "\n"
        )

only = os.environ.get("FAKE_AGENT_ONLY")
mode = os.environ.get("FAKE_AGENT_MODE", "ok") if not only or only in prompt else "ok"
cost = float(os.environ.get("FAKE_AGENT_COST", "0.01"))
session = f"ses-{uuid.uuid4().hex[:8]}"

if mode == "hang":
    time.sleep(3600)
time.sleep(float(os.environ.get("FAKE_AGENT_SLEEP", "0")))  # a slow agent (for timing)

# -- the work the prompt asks for --------------------------------------------------------------
owe = prompt.split("## What you owe", 1)[1] if "## What you owe" in prompt else ""
phase_dir = re.search(r"- Phase folder: `([^`]+)`", prompt)
phase_dir = Path(phase_dir.group(1)) if phase_dir else None
answer = "done"

PLAN = """---
phase: {slug}
plan: "{plan}"
type: execute
wave: {wave}
depends_on: {deps}
files_modified: ["{declared}"]
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

if mode != "lazy" and owe and phase_dir is not None:
    prefix = phase_dir.name.split("-", 1)[0]
    if "CONTEXT.md" in owe:
        (phase_dir / f"{prefix}-CONTEXT.md").write_text("# Context\n\n- Decided.\n")
    elif "PLAN.md" in owe and mode == "bad_plan":
        (phase_dir / f"{prefix}-01-PLAN.md").write_text(
            "---\nwave: 1\n(the frontmatter never closes)\n"
        )
        answer = "I wrote the plan."
    elif "PLAN.md" in owe:
        conflict = os.environ.get("FAKE_AGENT_CONFLICT") == "1"
        for plan, target in (("01", "a.txt"), ("02", "b.txt")):
            (phase_dir / f"{prefix}-{plan}-PLAN.md").write_text(
                PLAN.format(
                    slug=phase_dir.name,
                    plan=plan,
                    wave=1,
                    deps="[]",
                    declared=target,
                    target="shared.txt" if conflict else target,
                )
            )
        (phase_dir / f"{prefix}-03-PLAN.md").write_text(
            PLAN.format(
                slug=phase_dir.name,
                plan="03",
                wave=2,
                deps='["01", "02"]',
                declared="c.txt",
                target="c.txt",
            )
        )
    elif "VERIFICATION.md" in owe:
        (phase_dir / f"{prefix}-VERIFICATION.md").write_text(
            "---\nstatus: passed\n---\n\n# Verification\n\n- All plans done.\n"
        )
    elif '"block"' in owe:
        answer = "Looks fine.\n" + json.dumps({"block": False, "message": "fine"})
        if mode == "bad_verdict":
            answer = "I think it is fine, no JSON here."
task = re.search(r"^## Task (\S+)", prompt, flags=re.M)
files = re.search(r"^- Files: (.+)$", prompt.split("## Task", 1)[-1], flags=re.M)
if mode != "lazy" and task and files:
    for name in files.group(1).split(","):
        path = Path(name.strip())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{task.group(1)} by {agent} in {Path.cwd().name}\n")
    if os.environ.get("FAKE_AGENT_ALSO"):  # one more file, named `<task>-<this>`
        task_id = task.group(1).rstrip(":")
        also = f"{task_id.replace('/', '-')}-{os.environ['FAKE_AGENT_ALSO']}"
        Path(also).write_text(f"written by {task_id}\n")
    answer = f"Wrote {files.group(1)}."


# -- the output, in the CLI's format ------------------------------------------------------------
_emitted = 0


def emit(obj) -> None:
    global _emitted
    if _emitted:
        time.sleep(float(os.environ.get("FAKE_AGENT_EVENT_SLEEP", "0")))
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    _emitted += 1
    wait_for = os.environ.get("FAKE_AGENT_WAIT_FOR")
    if _emitted == 1 and wait_for:
        deadline = time.monotonic() + 30
        while not os.path.exists(wait_for) and time.monotonic() < deadline:
            time.sleep(0.05)


error = {
    "rate_limit": "API Error: 429 rate_limit_error: rate limit exceeded",
    "auth": "Invalid API key · Please run /login (401)",
}.get(mode)
code = 1 if error or mode == "exit" else 0

if agent == "claude":
    emit({"type": "system", "subtype": "init", "session_id": session, "tools": []})
    if mode == "cut":
        sys.stdout.write('{"type": "assistant", "message": {"content": [{"type": "te')
        sys.exit(0)
    emit(
        {
            "type": "assistant",
            "session_id": session,
            "message": {"content": [{"type": "text", "text": error or answer}]},
        }
    )
    if mode != "exit":
        emit(
            {
                "type": "result",
                "subtype": "success",
                "is_error": bool(error),
                "result": error or answer,
                "session_id": session,
                "total_cost_usd": cost,
                "duration_ms": 12,
                "num_turns": 1,
                "usage": {"input_tokens": 100, "output_tokens": 20},
            }
        )
elif agent == "codex":
    emit({"type": "thread.started", "thread_id": session})
    emit({"type": "turn.started"})
    if mode == "cut":
        sys.exit(0)
    if error:
        emit({"type": "error", "message": error})
        emit({"type": "turn.failed", "error": {"message": error}})
    elif mode != "exit":
        emit(
            {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "agent_message", "text": answer},
            }
        )
        emit(
            {
                "type": "turn.completed",
                "usage": {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 20},
            }
        )
elif agent == "opencode":
    emit({"type": "step_start", "sessionID": session, "part": {"type": "step-start"}})
    if mode == "cut":
        sys.exit(0)
    if error:
        emit(
            {
                "type": "error",
                "sessionID": session,
                "error": {"name": "APIError", "data": {"message": error}},
            }
        )
    elif mode != "exit":
        emit({"type": "text", "sessionID": session, "part": {"type": "text", "text": answer}})
        emit(
            {
                "type": "step_finish",
                "sessionID": session,
                "part": {
                    "type": "step-finish",
                    "reason": "stop",
                    "cost": cost,
                    "tokens": {
                        "input": 100,
                        "output": 20,
                        "reasoning": 0,
                        "cache": {"read": 0, "write": 0},
                    },
                },
            }
        )
elif agent == "gemini":
    if mode == "cut":
        sys.stdout.write('{"response": "half')
        sys.exit(1)
    if error:
        emit(
            {
                "error": {
                    "type": "ApiError",
                    "message": error,
                    "code": 429 if "429" in error else 401,
                }
            }
        )
    elif mode != "exit":
        emit(
            {
                "response": answer,
                "session_id": session,
                "stats": {
                    "models": {
                        "gemini-2.5-pro": {
                            "tokens": {"prompt": 100, "candidates": 20, "total": 120}
                        }
                    }
                },
            }
        )
if mode == "exit":
    print("fatal: something broke", file=sys.stderr)
sys.exit(code)
