#!/usr/bin/env python3
"""A stand-in for an agent CLI's interactive mode, for `run --interactive` tests: installed as
`claude`, `codex`, `opencode` or `gemini` (its file name picks which). Called the interactive
way (`claude -- PROMPT`, `codex --sandbox … -- PROMPT`, `opencode --prompt=PROMPT`, `gemini
--prompt-interactive=PROMPT`) it checks that it was given the terminal, asks the user a
question on it, reads the answer typed there, and writes the CONTEXT.md the prompt owes with
the answer in it. Called any other way it is `fake_agent.py` (the loop's other steps).

Environment:
- FAKE_AGENT_MODE=lazy: ask and read the answer, then exit 0 without writing anything
- FAKE_AGENT_LOG: as fake_agent.py (one JSON line per invocation, `"interactive": true`)
"""

import json
import os
import re
import sys
from pathlib import Path

agent = Path(sys.argv[0]).name
args = sys.argv[1:]
FAKE = Path(__file__).with_name("fake_agent.py")

# The non-interactive flags of each CLI: present, this is not an interactive call.
BATCH = {
    "claude": {"-p", "--print", "--output-format", "--verbose", "--input-format"},
    "codex": {"exec", "e", "--json", "--skip-git-repo-check", "--output-last-message"},
    "opencode": {"run", "--format"},
    "gemini": {"-p", "--output-format"},
}


def prompt_of() -> str | None:
    """The first message, read the way the real CLI reads it; None: not an interactive call."""
    if any(a in BATCH.get(agent, ()) or a.split("=")[0] in BATCH.get(agent, ()) for a in args):
        return None
    if any(a.startswith("--prompt=") for a in args) and agent == "gemini":
        return None  # gemini's headless `--prompt=`
    if agent in ("claude", "codex"):
        return args[-1] if "--" in args and args.index("--") == len(args) - 2 else None
    flag = {"opencode": "--prompt=", "gemini": "--prompt-interactive="}.get(agent)
    given = [a for a in args if flag and a.startswith(flag)]
    return given[-1][len(flag) :] if given and flag else None


def cmdline() -> list[str]:
    """This process's command line as any local user reads it (`/proc/PID/cmdline`)."""
    try:
        return Path(f"/proc/{os.getpid()}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return sys.argv


prompt = prompt_of()
brief = re.fullmatch(r"Read the file (.+) and follow it: it is your brief\.", prompt or "")
if brief:  # the real CLI reads it with its file tool
    prompt = Path(brief.group(1)).read_text()
if prompt is None:  # the loop's other steps: the fake CLI (its name is argv[0]'s, kept)
    exec(compile(FAKE.read_text(), str(FAKE), "exec"), {"__name__": "__main__"})
    sys.exit(0)


def fail(message: str) -> None:
    print(f"fake {agent} (interactive): {message}", file=sys.stderr)
    sys.exit(2)


# The terminal is ours: stdin, stdout and stderr, and we are in its foreground process group.
for fd in (0, 1, 2):
    if not os.isatty(fd):
        fail(f"fd {fd} is not a terminal")
if os.tcgetpgrp(0) != os.getpgrp():
    fail("not in the terminal's foreground process group")
if "## This is a conversation" not in prompt:
    fail("the prompt does not say this is a conversation")

log = os.environ.get("FAKE_AGENT_LOG")
if log:
    with open(log, "a") as fh:
        entry = {"agent": agent, "argv": args, "prompt": prompt, "cwd": os.getcwd()}
        entry["cmdline"] = cmdline()
        fh.write(json.dumps({**entry, "interactive": True, "pid": os.getpid()}) + "\n")

owed = re.search(r"Write (\S+-CONTEXT\.md)\.", prompt)
if owed is None:
    fail("the prompt owes no CONTEXT.md")
number = re.search(r"## Phase (\S+)", prompt)
print(f"{agent} here. What must phase {number.group(1) if number else '?'} deliver?", flush=True)
answer = sys.stdin.readline().strip()
if os.environ.get("FAKE_AGENT_MODE") == "lazy":
    print("Thanks! (writing nothing)", flush=True)
    sys.exit(0)
target = Path(owed.group(1))
target.write_text(f"# Phase context\n\n- The user said: {answer}\n")
print(f"Wrote {target}. End the session to go on.", flush=True)
