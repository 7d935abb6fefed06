"""Tokens per phase of the bundled example, per agent CLI, before and after issue 42's briefing
work, next to the reference's prompts for the same roles (issue 42, point 5).

Each installed real CLI (tests/support/real_agents.py: `LOOPRAIL_AGENT_BIN`, by default
~/.cache/looprail-agents/node_modules/.bin) runs a copy of `examples/hello-loop` (`looprail run
--phase 1 --jobs 1 --agent <cli>`) against the scripted model server
(tests/support/model_server.py), which records every request and what it answered. Twice: with
this tree's looprail ("after") and with the tree before issue 42 ("before", `--before DIR`: a
`git worktree add` of that commit, run with `PYTHONPATH=DIR`; the same server and CLIs).

The server's own usage figures are scripted (the same for every turn), so the tokens are
measured, at about 4 characters a token:
- input: the size of the request's JSON (everything the CLI sends: its system prompt, its tool
  definitions, looprail's prompt, the turns so far);
- cached: the part of it that repeats the previous turn of the same role (the same call, or the
  previous task's executor call), in the order a prompt cache serves it (tools, system, then
  the conversation);
- output: what the server answered (the scripted model's text and tool calls as JSON, without
  the SSE framing). The answers are the script's, not a model's, but they are what the CLI
  received as output, and they are the same before and after;
- prompt: looprail's own prompt (the transcript's prompt.md), a part of input.
A phase is the role whose brief the request carries (the orchestrator's first call is discuss,
its last ship); turns without tools (titles, probes) are left out.

The reference's side: for each role its agent definition and the workflow that drives it, plus
the templates and references those files name (`@…/references/x.md`), from its files
(`--reference`, default /root/.cache/looprail-reference/gsd). Its "input" per CLI is the same
CLI's turns with the reference's prompt in place of looprail's (input − prompt + reference, per
turn; cached likewise for the turns a cache serves): an estimate, marked `~`.

`parts`: the executor's prompt split at its headings (the role brief, then `## Phase`, `## Task`,
its `###` sections and `## Read first`), in tokens per part, before and after; and the same over
the executor prompts of every real GSD phase in ../shared (`plans/briefing.py` through
`build_prompt`), where the plans carry what the example's scripted plans do not.

    python benchmarks/prompt_tokens.py [--agents claude,codex] [--before DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.agents import AGENTS, looprail
from tests.support.model_server import Call, ModelServer
from tests.support.real_agents import real_cli, real_env

REPO = Path(__file__).resolve().parent.parent
CHARS_PER_TOKEN = 4
PHASES = ("discuss", "plan", "execute", "verify", "ship")
EXAMPLE = Path("examples") / "hello-loop"
BEFORE_COMMIT = "ed3a303"  # the parent of 399c8d9, the first commit of issue 42's brief work
ROLES = {  # the first words of looprail's briefs (looprail/runtime/roles/*.md), then and now
    "You are the executor": "execute",
    "You are the planner": "plan",
    "You are the verifier": "verify",
    "You are the orchestrator": "orchestrator",
}
REFERENCE_ROLES = {  # phase → the reference's agent definition and workflow for it
    "discuss": ["gsd-core/workflows/discuss-phase.md"],
    "plan": ["agents/gsd-planner.md", "gsd-core/workflows/plan-phase.md"],
    "execute": ["agents/gsd-executor.md", "gsd-core/workflows/execute-plan.md"],
    "verify": ["agents/gsd-verifier.md", "gsd-core/workflows/verify-phase.md"],
    "ship": ["gsd-core/workflows/ship.md"],
}
_NAMED = re.compile(r"@[^\s`'\")]*?((?:references|templates|workflows)/[\w./-]+\.md)")


def tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN


def role_of(call: Call) -> str:
    found = [(call.text.find(k), v) for k, v in ROLES.items() if k in call.text]
    return min(found)[1] if found else "other"


# A prompt cache serves a request's prefix in this order (tools, the system prompt, then the
# conversation), whatever order the CLI's JSON has its keys in.
_CACHE_ORDER = ("tools", "system", "instructions", "systemInstruction", "messages", "input")


def _canonical(body: dict[str, Any]) -> str:
    first = [body.get(k) for k in _CACHE_ORDER if k in body]
    rest = {k: v for k, v in body.items() if k not in _CACHE_ORDER and k != "contents"}
    return json.dumps([*first, body.get("contents"), rest], ensure_ascii=False)


def _prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))  # noqa: RUF071 (characters, not paths)


def phases_of(calls: list[Call]) -> dict[str, dict[str, int]]:
    """Per phase: turns, and input, cached and output tokens (from the requests and answers)."""
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
        row = out.setdefault(phase, {"turns": 0, "cached_turns": 0, "input": 0, "cached": 0})
        row.setdefault("output", 0)
        row["turns"] += 1
        row["cached_turns"] += cached > 0
        row["input"] += tokens(body)
        row["cached"] += cached // CHARS_PER_TOKEN
        row["output"] += tokens(call.answer)
        prev_role, prev_body = role, body
    return out


def transcript_prompts(project: Path) -> dict[str, list[str]]:
    """Per phase, looprail's prompts as its transcripts hold them (`NNN-phase-<step>`,
    `NNN-task-…` for execute), in order."""
    out: dict[str, list[str]] = {}
    for folder in sorted((project / ".looprail" / "logs").glob("*/*")):
        prompt = folder / "prompt.md"
        if not prompt.is_file():
            continue
        kind = folder.name.split("-", 1)[1]
        phase = "execute" if kind.startswith("task-") else kind.removeprefix("phase-")
        out.setdefault(phase, []).append(prompt.read_text(encoding="utf-8"))
    return out


# -- the executor's prompt, part by part ------------------------------------------------------

# `###` sections (and `##` ones after the brief) → the part they belong to; a heading not
# named here (one inside a file the prompt shows) stays in the part before it.
_PART_OF = (
    (r"## Phase \S+$", "phase (folder, step, files)"),
    (r"### \S*CONTEXT\.md$", "CONTEXT.md"),
    (r"## Contributions to your role", "contributions"),
    (r"## Task ", "task header (plan path, files, TDD flag)"),
    (r"### (Action|Verify|Done when|Acceptance criteria)$", "task: action, verify, done, criteria"),
    (
        r"### (Behavior|Implementation|Precondition|Reversibility)",
        "task: behavior, impl., pre, rev.",
    ),
    (r"### Plan objective", "plan objective"),
    (r"### must_haves", "plan must_haves"),
    (r"### requirements", "plan requirements"),
    (r"### The plan's context", "plan context refs"),
    (r"### (Interfaces|Threat model) ", "plan interfaces, threat model"),
    (r"### The plan's (verification|success criteria)", "plan verification, success criteria"),
    (r"### The plan's tasks", "plan's other tasks"),
    (r"### Checkpoint answers", "checkpoint answers"),
    (r"## Your previous attempt failed", "check failures"),
    (r"## Read first", "read_first contents"),
    (r"## What you owe", "what you owe"),
)
_HEADING = re.compile(r"^#{2,3} ")


def prompt_parts(prompt: str) -> dict[str, int]:
    """The executor prompt's parts, in characters: `brief` is everything before `## Phase`
    (looprail's role brief), then each heading opens the part `_PART_OF` names. Headings inside
    a fenced block are content. The parts add up to the prompt."""
    parts: dict[str, int] = {}
    part, fenced, started = "brief", False, False
    for line in prompt.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and _HEADING.match(line):
            name = next((p for pat, p in _PART_OF if re.match(pat, line.rstrip("\n"))), None)
            if name and (started or name.startswith("phase")):
                part, started = name, True
        parts[part] = parts.get(part, 0) + len(line)
    return parts


def parts_in_tokens(prompts: list[str]) -> dict[str, float]:
    """The mean tokens per part over `prompts` (a part a prompt lacks counts 0 for it)."""
    total: dict[str, int] = {}
    for prompt in prompts:
        for name, chars in prompt_parts(prompt).items():
            total[name] = total.get(name, 0) + chars
    n = max(len(prompts), 1)
    return {k: round(v / CHARS_PER_TOKEN / n, 1) for k, v in total.items()}


def real_phase_executor_prompts() -> list[str]:
    """Every non-checkpoint task's executor prompt over the real GSD phases in ../shared
    (`tests/plans/real_projects.executor_prompts`); [] without the corpus."""
    from tests.plans import real_projects as rp

    prompts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="looprail-tokens-real-") as tmp:
        for source in rp.projects():
            project = rp.copy_project(source, Path(tmp))
            for _, token in rp.phase_tokens(project):
                prompts += [prompt for *_, prompt in rp.executor_prompts(project, token)]
    return prompts


# -- runs ---------------------------------------------------------------------------------------


def run_example(agent: str, root: Path, tree: Path = REPO) -> dict[str, Any] | str:
    """One run of `tree`'s examples/hello-loop with the real `agent` CLI against the scripted
    server, with `tree`'s looprail: {"phases": phases_of(...), "prompts": per phase, tokens of
    looprail's prompts, "executor": the executor prompts}, or why it could not run."""
    if real_cli(agent) is None:
        return "not installed"
    demo = root / "demo"
    shutil.copytree(tree / EXAMPLE, demo, symlinks=True)
    with ModelServer() as server:
        env = real_env(agent, root, server, demo)
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "the example"]):
            subprocess.run(["git", *args], cwd=demo, env=env, check=True, capture_output=True)
        run = ("run", "--phase", "1", "--jobs", "1", "--agent", agent)
        if tree == REPO:
            done = looprail(*run, cwd=demo, env=env)
        else:  # the other tree's package first on the path, in a process of its own
            env = {**env, "PYTHONPATH": str(tree)}
            done = looprail(*run, cwd=demo, env=env, process=True, timeout=900)
        if done.returncode != 0:
            said = (done.stdout + done.stderr).strip()[-400:]
            return f"run failed (exit {done.returncode}): {said}"
        calls = list(server.calls)
    prompts = transcript_prompts(demo)
    return {
        "phases": phases_of(calls),
        "prompts": {p: sum(tokens(t) for t in texts) for p, texts in prompts.items()},
        "executor": prompts.get("execute", []),
    }


def reference_sizes(ref: Path) -> dict[str, dict[str, int]]:
    """Per phase: the files and tokens of its definition, workflow, and what they name."""
    out = {}
    for phase, files in REFERENCE_ROLES.items():
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
        out[phase] = {"files": len(seen), "tokens": chars // CHARS_PER_TOKEN}
    return out


def with_reference(after: dict[str, Any], phase: str, ref_tokens: int) -> dict[str, int]:
    """The same CLI turns with the reference's prompt for `phase` in place of looprail's."""
    row = after["phases"][phase]
    calls = max(len(after["executor"]), 1) if phase == "execute" else 1
    swap = ref_tokens - after["prompts"].get(phase, 0) // calls  # per call
    return {
        "turns": row["turns"],
        "input": row["input"] + row["turns"] * swap,
        "cached": row["cached"] + row["cached_turns"] * swap,
        "output": row["output"],
        "prompt": ref_tokens * calls,
    }


def before_tree(arg: str | None) -> tuple[Path | None, str]:
    """The tree "before" is measured in: `--before DIR`, or a worktree of BEFORE_COMMIT made
    in /tmp (left there for the next run)."""
    if arg:
        return Path(arg), ""
    path = Path(tempfile.gettempdir()) / f"looprail-before-{BEFORE_COMMIT}"
    if not (path / "looprail").is_dir():
        made = subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), BEFORE_COMMIT],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        if made.returncode != 0:
            return None, made.stderr.strip()
    return path, ""


def measure(agents: list[str], before: Path | None, ref: Path | None) -> dict[str, Any]:
    result: dict[str, Any] = {"cli": {}, "reference": {}, "parts": {}, "chars_per_token": 4}
    refs = reference_sizes(ref) if ref is not None and ref.is_dir() else {}
    result["reference"] = refs
    executors: dict[str, list[str]] = {"before": [], "after": []}
    for agent in agents:
        sides: dict[str, Any] = {}
        for side, tree in (("after", REPO), ("before", before)):
            if tree is None:
                continue
            with tempfile.TemporaryDirectory(prefix=f"looprail-tokens-{agent}-") as tmp:
                got = run_example(agent, Path(tmp), tree)
            sides[side] = got
            if isinstance(got, dict):
                executors[side] += got["executor"]
        after = sides.get("after")
        if isinstance(after, dict) and refs:
            sides["reference"] = {
                p: with_reference(after, p, refs[p]["tokens"])
                for p in PHASES
                if p in refs and p in after["phases"]
            }
        result["cli"][agent] = sides
    for side, prompts in executors.items():
        if prompts:
            result["parts"][f"example, {side}"] = parts_in_tokens(prompts)
    real = real_phase_executor_prompts()
    if real:
        result["parts"][f"real GSD phases, after ({len(real)} tasks)"] = parts_in_tokens(real)
    return result


# -- printing -----------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def ratios(result: dict[str, Any]) -> dict[str, dict[str, dict[str, str]]]:
    """Per CLI and phase: after/before of input, and after/reference of looprail's prompt."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for agent, sides in result["cli"].items():
        after, before = sides.get("after"), sides.get("before")
        if not isinstance(after, dict):
            continue
        rows = out.setdefault(agent, {})
        for phase in PHASES:
            if phase not in after["phases"]:
                continue
            a = after["phases"][phase]
            row = rows.setdefault(phase, {})
            if isinstance(before, dict) and phase in before["phases"]:
                b = before["phases"][phase]
                row["input after/before"] = _ratio(a["input"], b["input"])
                pb = before["prompts"].get(phase, 0)
                row["prompt after/before"] = _ratio(after["prompts"].get(phase, 0), pb)
            if phase in sides.get("reference", {}):
                r = sides["reference"][phase]
                row["input after/reference~"] = _ratio(a["input"], r["input"])
                row["prompt after/reference"] = _ratio(after["prompts"].get(phase, 0), r["prompt"])
    return out


def print_table(result: dict[str, Any]) -> None:
    head = f"{'cli':9} {'phase':8} {'side':10} {'turns':>5} {'input':>8} {'cached':>8} "
    print(head + f"{'output':>7} {'prompt':>7}   (tokens, 4 chars each)")
    for agent, sides in result["cli"].items():
        for side in ("before", "after"):
            if isinstance(sides.get(side), str):
                print(f"{agent:9} {side}: {sides[side]}")
        for phase in PHASES:
            for side in ("before", "after", "reference"):
                got = sides.get(side)
                if not isinstance(got, dict):
                    continue
                if side == "reference":
                    row, prompt, label = got.get(phase), None, "reference~"
                else:
                    row, prompt, label = got["phases"].get(phase), got["prompts"].get(phase), side
                if row is None:
                    continue
                prompt = row.get("prompt", prompt)
                print(
                    f"{agent:9} {phase:8} {label:10} {row['turns']:5} {row['input']:8} "
                    f"{row['cached']:8} {row['output']:7} {prompt if prompt is not None else '':>7}"
                )
    print("\nratios (input: the whole requests; prompt: looprail's prompt alone):")
    for agent, rows in ratios(result).items():
        for phase, row in rows.items():
            print(f"  {agent:9} {phase:8} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    if result["reference"]:
        print("\nthe reference's prompt per phase, from its files:")
        for phase, ref in result["reference"].items():
            print(f"  {phase:8} {ref['files']:3} files {ref['tokens']:8} tokens")
    names = sorted({k for parts in result["parts"].values() for k in parts})
    if names:
        sets = list(result["parts"])
        print("\nthe executor's prompt by part, mean tokens per task prompt:")
        print(f"  {'part':40} " + " ".join(f"{s[:28]:>28}" for s in sets))
        for name in names:
            cells = " ".join(f"{result['parts'][s].get(name, 0):28}" for s in sets)
            print(f"  {name:40} {cells}")
        totals = " ".join(f"{round(sum(result['parts'][s].values()), 1):28}" for s in sets)
        print(f"  {'(whole prompt)':40} {totals}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--agents", default=",".join(AGENTS))
    ap.add_argument("--before", default=None, help=f"the tree before (default: {BEFORE_COMMIT})")
    ap.add_argument("--no-before", action="store_true", help="measure this tree only")
    default_ref = os.environ.get("LOOPRAIL_REFERENCE_TREE", "/root/.cache/looprail-reference/gsd")
    ap.add_argument("--reference", default=default_ref)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    before, why = (None, "") if args.no_before else before_tree(args.before)
    if why:
        print(f"before: no tree ({why})", file=sys.stderr)
    result = measure(args.agents.split(","), before, Path(args.reference))
    for sides in result["cli"].values():
        for side in ("before", "after"):
            if isinstance(sides.get(side), dict):
                del sides[side]["executor"]  # the prompts themselves: too long to print
    if args.json:
        result["ratios"] = ratios(result)
        print(json.dumps(result, indent=1))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
