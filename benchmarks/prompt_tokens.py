"""How much each phase of the bundled example sends the model, per agent CLI, next to what the
reference's prompts for the same roles weigh (issue 42, point 5).

Each installed real CLI (tests/support/real_agents.py: `LOOPRAIL_AGENT_BIN`, by default
~/.cache/looprail-agents/node_modules/.bin) runs `looprail init demo` and `looprail run --phase
1 --jobs 1` against the scripted model server (tests/support/model_server.py), which records
every request. The server's own usage figures are scripted (the same for every turn), so the
tokens here are measured from the requests: input = the request's JSON size / 4 (about 4
characters a token), cached = the part of it that repeats the previous turn of the same call
(what a prompt cache serves), output = what the scripted model answered is not measured (it is
the script's, not a model's). A phase is the role whose brief the request carries (the
orchestrator's first call is discuss, its last ship).

The reference's side: for each role its agent definition and the workflow that drives it, plus
the templates and references those files name (`@…/references/x.md`), measured from its files
under `LOOPRAIL_REFERENCE`'s tree (default /root/.cache/looprail-reference/gsd).

    python benchmarks/prompt_tokens.py [--agents claude,codex] [--reference DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.agents import AGENTS, looprail
from tests.support.model_server import Call, ModelServer
from tests.support.real_agents import real_cli, real_env

CHARS_PER_TOKEN = 4
ROLES = {  # the first words of looprail's briefs (looprail/runtime/roles/*.md)
    "You are the executor": "execute",
    "You are the planner": "plan",
    "You are the verifier": "verify",
    "You are the orchestrator": "orchestrator",
}
REFERENCE_ROLES = {  # role → the reference's agent definition and workflow for it
    "discuss": ["gsd-core/workflows/discuss-phase.md"],
    "plan": ["agents/gsd-planner.md", "gsd-core/workflows/plan-phase.md"],
    "execute": ["agents/gsd-executor.md", "gsd-core/workflows/execute-plan.md"],
    "verify": ["agents/gsd-verifier.md", "gsd-core/workflows/verify-phase.md"],
}
_NAMED = re.compile(r"@[^\s`'\")]*?((?:references|templates|workflows)/[\w./-]+\.md)")


def role_of(call: Call) -> str:
    found = [(call.text.find(k), v) for k, v in ROLES.items() if k in call.text]
    return min(found)[1] if found else "other"


# A prompt cache serves a request's prefix in this order (tools, the system prompt, then the
# conversation), whatever order the CLI's JSON has its keys in.
_CACHE_ORDER = ("tools", "system", "instructions", "systemInstruction", "messages", "input")


def _canonical(body: dict[str, object]) -> str:
    first = [body.get(k) for k in _CACHE_ORDER if k in body]
    rest = {k: v for k, v in body.items() if k not in _CACHE_ORDER and k != "contents"}
    return json.dumps([*first, body.get("contents"), rest], ensure_ascii=False)


def _prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def phases_of(calls: list[Call]) -> dict[str, dict[str, int]]:
    """Per phase: turns, input and cached tokens (estimated from the request bodies)."""
    turns = [c for c in calls if c.tools and c.status == 200]
    out: dict[str, dict[str, int]] = {}
    prev_role, prev_body, orchestrator_seen = None, "", 0
    for call in turns:
        role = role_of(call)
        body = _canonical(call.body)
        if role == "orchestrator" and role != prev_role:
            orchestrator_seen += 1
        phase = (
            ("discuss" if orchestrator_seen == 1 else "ship") if role == "orchestrator" else role
        )
        cached = _prefix(prev_body, body) if role == prev_role else 0
        row = out.setdefault(phase, {"turns": 0, "input": 0, "cached": 0})
        row["turns"] += 1
        row["input"] += len(body) // CHARS_PER_TOKEN
        row["cached"] += cached // CHARS_PER_TOKEN
        prev_role, prev_body = role, body
    return out


def measure_cli(agent: str, root: Path) -> dict[str, dict[str, int]] | str:
    if real_cli(agent) is None:
        return "not installed"
    with ModelServer() as server:
        env = real_env(agent, root, server, root / "demo")
        init = looprail("init", "demo", "--agent", agent, cwd=root, env=env)
        if init.returncode != 0:
            return f"init failed: {init.stderr.strip()[-200:]}"
        done = looprail("run", "--phase", "1", "--jobs", "1", cwd=root / "demo", env=env)
        if done.returncode != 0:
            return f"run failed (exit {done.returncode}): {done.stderr.strip()[-200:]}"
        return phases_of(list(server.calls))


def reference_sizes(ref: Path) -> dict[str, tuple[int, int]]:
    """Per role: (files, tokens) of its definition, workflow, and what they name."""
    out = {}
    for role, files in REFERENCE_ROLES.items():
        seen: set[Path] = set()
        todo = [ref / f for f in files]
        while todo:
            path = todo.pop()
            if path in seen or not path.is_file():
                continue
            seen.add(path)
            text = path.read_text(errors="replace")
            # one level of what it names: the reference loads those into the same context
            if path.relative_to(ref).as_posix() in files:
                todo += [ref / "gsd-core" / m for m in _NAMED.findall(text)]
        chars = sum(len(p.read_text(errors="replace")) for p in seen)
        out[role] = (len(seen), chars // CHARS_PER_TOKEN)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default=",".join(AGENTS))
    default_ref = os.environ.get("LOOPRAIL_REFERENCE_TREE", "/root/.cache/looprail-reference/gsd")
    ap.add_argument("--reference", default=default_ref)
    args = ap.parse_args()
    print(f"{'cli':9} {'phase':8} {'turns':>5} {'input':>8} {'cached':>8}  (est. tokens)")
    for agent in args.agents.split(","):
        with tempfile.TemporaryDirectory(prefix=f"looprail-tokens-{agent}-") as tmp:
            got = measure_cli(agent, Path(tmp))
        if isinstance(got, str):
            print(f"{agent:9} {got}")
            continue
        for phase, row in got.items():
            print(f"{agent:9} {phase:8} {row['turns']:5} {row['input']:8} {row['cached']:8}")
    ref = Path(args.reference)
    if not ref.is_dir():
        print(f"reference: {ref} is absent (setup-reference.sh builds it)")
        return 0
    print(f"\nreference prompts per role, from its files ({ref}):")
    for role, (files, tokens) in reference_sizes(ref).items():
        print(f"  {role:8} {files:3} files {tokens:8} tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
