"""A project whose phase 1 reaches checkpoints, for the dashboard's answer tests: the GSD
shape of `tests.support.phases` (ROADMAP, deterministic role agents) with a planner that writes
one plan of three tasks, the middle one a checkpoint of the reference's kinds (a decision with
options and their pros and cons, a human-verify, a human-action that asks for a key). The
executor writes what each task's request says into `out/`, with the answers it was handed
(`answers.log`) and whether the secret reached its environment (never its value)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support import write_exe
from tests.support.phases import COMMON, ORCHESTRATOR, VERIFIER, build
from tests.support.procs import PY
from tests.support.terminal import Terminal

DECISION = """\
<task type="checkpoint:decision" gate="blocking">
  <name>Choose the greeting</name>
  <decision>Which greeting should the page use?</decision>
  <context>The page needs one greeting; each has its trade-offs.</context>
  <options>
    <option id="hello">
      <name>Hello</name>
      <pros>Plain, understood everywhere</pros>
      <cons>Dull</cons>
    </option>
    <option id="howdy">
      <name>Howdy</name>
      <pros>Friendly</pros>
      <cons>Regional</cons>
    </option>
  </options>
  <resume-signal>Select: hello or howdy</resume-signal>
</task>"""

VERIFY = """\
<task type="checkpoint:human-verify" gate="blocking">
  <name>Look at the greeting</name>
  <what-built>out/01-01-T1.txt with the greeting</what-built>
  <how-to-verify>
    1. Open out/01-01-T1.txt
    2. It says hello
  </how-to-verify>
  <resume-signal>Type "approved" to continue, or describe issues to fix</resume-signal>
</task>"""

SECRET = """\
<task type="checkpoint:human-action" gate="blocking">
  <name>Give the API key</name>
  <action>The deploy needs the service's API key</action>
  <instructions>Copy the key from the service's settings page</instructions>
  <resume-signal>Paste your API key</resume-signal>
</task>"""

KINDS = {"decision": DECISION, "verify": VERIFY, "secret": SECRET}


def _planner(checkpoint: str) -> str:
    plan = (
        '---\nphase: 01-setup\nplan: "01"\ntype: execute\ndepends_on: []\n'
        'files_modified: ["out/01-01-T1.txt", "out/01-01-T3.txt"]\nautonomous: false\n'
        "requirements: [R-1]\n---\n\n<objective>a greeting</objective>\n\n<tasks>\n"
        '<task type="auto">\n<name>write the greeting</name>\n<files>out/01-01-T1.txt</files>\n'
        "<action>write the greeting</action>\n<verify>test -f out/01-01-T1.txt</verify>\n"
        "<done>written</done>\n</task>\n"
        f"{checkpoint}\n"
        '<task type="auto">\n<name>use the answer</name>\n<files>out/01-01-T3.txt</files>\n'
        "<action>use the answer</action>\n<verify>test -f out/01-01-T3.txt</verify>\n"
        "<done>used</done>\n</task>\n</tasks>\n"
    )
    return (
        f"if number == '1':\n"
        f"    (phase_dir / '01-01-PLAN.md').write_text({plan!r})\n"
        f"append('done.log', f'plan {{number}}')\n"
    )


EXECUTOR = r"""
t = req["task"]
key = f"{t['planId']}-{t['taskId']}"
hold("exec-" + key)
out = root / t["files"][0] if t.get("files") else root / "out" / (key + ".txt")
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(t["action"] + "\n")
# what this call was handed of the answers: the request's text, and whether the secret is in
# the environment (its length only: the value must never be written anywhere)
secret = os.environ.get("LOOPRAIL_CHECKPOINT_ANSWER")
text = json.dumps(req)
found = [w for w in ("howdy", "ISSUE-MARK") if w in text]
append("answers.log", f"{key} secret={len(secret) if secret else 0} " + (" ".join(found) or "-"))
append("done.log", "task " + key)
"""


def checkpoint_project(root: Path, kind: str) -> Path:
    """A project whose phase 1 plan 01 is T1 (auto), T2 (the checkpoint `kind`: decision,
    verify or secret), T3 (auto)."""
    project = build(root)
    agents = project / ".looprail" / "agents"
    write_exe(agents / "planner", f"{COMMON}\n{_planner(KINDS[kind])}", shebang=PY)
    write_exe(agents / "executor", f"{COMMON}\n{EXECUTOR}", shebang=PY)
    write_exe(agents / "orchestrator", f"{COMMON}\n{ORCHESTRATOR}", shebang=PY)
    write_exe(agents / "verifier", f"{COMMON}\n{VERIFIER}", shebang=PY)
    return project


def answers_log(project: Path) -> list[str]:
    path = project / "answers.log"
    return path.read_text().splitlines() if path.exists() else []


def terminal_run(project: Path, *extra: str) -> Terminal:
    """`looprail run PROJECT --phase 1` on a real pseudo-terminal (stdin and stderr are a tty,
    so it asks and waits at a checkpoint)."""
    env = {**os.environ, "TERM": "dumb", "COLUMNS": "120"}
    return Terminal.looprail("run", str(project), "--phase", "1", *extra, env=env)
