"""What the role agents are handed, read from the prompts a stand-in `claude` records (issue 42,
point 1): every fact the plan and the phase hold reaches the agent verbatim. A project made by
`looprail init`, with a phase written as GSD writes one (ROADMAP section with goal, requirement
ids and success criteria; REQUIREMENTS/PROJECT/STATE; RESEARCH and UI-SPEC; a plan with
must_haves, context references, a TDD task and annotated read_first entries), is run phase 1
to the end; then the planner's prompt, and the plan checks on the planner's own plans."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.agents import agent_env, calls, looprail

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is needed for plan worktrees",
)

ROADMAP = """# Roadmap

## Phase Details

### Phase 1: Greeting
**Goal**: A visitor is greeted by name.
**Depends on**: Nothing
**Requirements**: GREET-01, GREET-02
**Success Criteria** (what must be TRUE):
  1. `greet.txt` greets the visitor by name
  2. an empty name is refused

## Progress
| Phase | Plans |
"""

PLAN = """---
phase: 01-first
plan: "01"
type: execute
wave: 1
depends_on: []
files_modified: [greet.txt, greet_test.txt]
autonomous: true
requirements: [GREET-01, GREET-02]

must_haves:
  truths:
    - "greet.txt greets the visitor by name"
  artifacts:
    - path: "greet.txt"
      provides: "the greeting"
      contains: "by claude"  # what the stand-in writes: looprail checks must_haves
  key_links:
    - from: "greet_test.txt"
      to: "greet.txt"
      via: "reads the greeting"
      pattern: "by claude"
---

<objective>
Greet the visitor.
</objective>

<context>
@.planning/PROJECT.md
@.planning/phases/01-first/01-RESEARCH.md
@src/names.txt
</context>

<tasks>
<task type="auto" tdd="true">
  <name>Task 1: Write the greeting</name>
  <files>greet.txt</files>
  <read_first>
    - 01-RESEARCH.md (§Architecture Patterns → Pattern 1; §Common Pitfalls 2, 3)
    - 01-CONTEXT.md (D-01, D-02)
    - src/names.txt i src/rules.txt (…)
  </read_first>
  <behavior>
    - Test 1: name "Ada" gives "Hello, Ada"
    - Test 2: an empty name is refused
  </behavior>
  <implementation>Write greet.txt from src/names.txt.</implementation>
  <precondition>src/names.txt lists one name per line</precondition>
  <reversibility>delete greet.txt</reversibility>
  <action>Write greet.txt with "Hello, <name>".</action>
  <verify><automated>test -d .planning</automated></verify>
  <done>greet.txt greets by name</done>
</task>

<task type="auto">
  <name>Task 2: Test the greeting</name>
  <files>greet_test.txt</files>
  <action>Write greet_test.txt that reads greet.txt.</action>
  <verify><automated>test -d .planning/phases</automated></verify>
  <done>greet_test.txt exists</done>
</task>
</tasks>

<verification>
grep -q Hello greet.txt && test -f greet_test.txt
</verification>

<success_criteria>
- The visitor is greeted by name (GREET-01)
- An empty name is refused (GREET-02)
</success_criteria>
"""


def _project(tmp_path: Path, env: dict[str, str], *, plan: bool) -> Path:
    done = looprail("init", "demo", "--agent", "claude", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    demo = tmp_path / "demo"
    planning = demo / ".planning"
    (planning / "ROADMAP.md").write_text(ROADMAP)
    for name in ("REQUIREMENTS.md", "PROJECT.md", "STATE.md"):
        (planning / name).write_text(f"# {name}\n")
    phase = planning / "phases" / "01-first"
    (phase / "01-RESEARCH.md").write_text("# Research\n\n## Architecture Patterns\n")
    (phase / "01-UI-SPEC.md").write_text("# UI spec\n")
    (demo / "src").mkdir()
    (demo / "src" / "names.txt").write_text("Ada\n")
    (demo / "src" / "rules.txt").write_text("no empty names\n")
    if plan:
        (phase / "01-01-PLAN.md").write_text(PLAN)
    return demo


def _prompt(tmp_path: Path, marker: str) -> str:
    found = [c["prompt"] for c in calls(tmp_path) if marker in c["prompt"]]
    assert found, f"no recorded prompt contains {marker!r}"
    return found[0]


def _verbatim(prompt: str, *texts: str) -> None:
    for text in texts:
        assert text.strip() in prompt, text


def _roadmap_section() -> str:
    return ROADMAP[ROADMAP.index("### Phase 1") : ROADMAP.index("## Progress")].strip()


def _block(key: str) -> str:
    """A frontmatter key's lines as written in PLAN."""
    match = re.search(rf"^{key}:.*?(?=^\S|^---)", PLAN, re.M | re.S)
    assert match is not None
    return match.group(0).strip()


def _element(name: str) -> str:
    match = re.search(rf"<{name}>(.*?)</{name}>", PLAN, re.S)
    assert match is not None
    return "\n".join(line.strip() for line in match.group(1).strip().splitlines())


def test_every_role_gets_what_the_plan_and_the_phase_hold(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    demo = _project(tmp_path, env, plan=True)
    done = looprail("run", "--phase", "1", cwd=demo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "shipped" in done.stdout
    paths = [
        ".planning/REQUIREMENTS.md",
        ".planning/PROJECT.md",
        ".planning/STATE.md",
        ".planning/phases/01-first/01-RESEARCH.md",
        ".planning/phases/01-first/01-UI-SPEC.md",
    ]

    # discuss and verify: the ROADMAP section verbatim and the documents to read
    discuss = _prompt(tmp_path, "CONTEXT.md.\n")
    verify = _prompt(tmp_path, "VERIFICATION.md with a `status:`")
    for prompt in (discuss, verify):
        _verbatim(prompt, _roadmap_section(), *paths)
    # the verifier: every plan's must_haves, as written
    _verbatim(verify, _block("must_haves"), "GREET-01, GREET-02")
    # and the evidence of "Done means verified": every check looprail ran, per task
    _verbatim(
        verify,
        "### 01-01/T1\n- `test -d .planning`: passed",
        "### 01-01/T2\n- `test -d .planning/phases`: passed",
        "- `must_haves artifact greet.txt`: passed",
    )

    task1 = _prompt(tmp_path, "## Task 01-01/T1")
    _verbatim(
        task1,
        "`.planning/phases/01-first/01-01-PLAN.md`",
        _block("must_haves"),
        _block("requirements"),
        _element("verification"),
        _element("success_criteria"),
        "- .planning/PROJECT.md\n- .planning/phases/01-first/01-RESEARCH.md\n- src/names.txt",
        '- TDD: yes (`tdd="true"`)',
        _element("behavior"),
        _element("implementation"),
        _element("precondition"),
        _element("reversibility"),
        "T1: Task 1: Write the greeting — this task",
        "T2: Task 2: Test the greeting — to do",
    )
    # read_first as real plans write it: the path part, a bare phase name resolved against the
    # phase folder, the note passed on with the file, two paths joined by a word
    _verbatim(
        task1,
        "### .planning/phases/01-first/01-RESEARCH.md — (§Architecture Patterns → Pattern 1; "
        "§Common Pitfalls 2, 3)\n\n```\n# Research",
        "### .planning/phases/01-first/01-CONTEXT.md — (D-01, D-02)",
        "### src/names.txt — (…)\n\n```\nAda",
        "### src/rules.txt — (…)\n\n```\nno empty names",
    )
    task2 = _prompt(tmp_path, "## Task 01-01/T2")
    assert "T1: Task 1: Write the greeting — done" in task2
    assert "TDD: yes" not in task2


def test_a_read_first_file_that_does_not_exist_halts_naming_it(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    demo = _project(tmp_path, env, plan=True)
    (demo / "src" / "rules.txt").unlink()
    done = looprail("run", "--phase", "1", cwd=demo, env=env)
    assert done.returncode != 0
    assert "read_first: missing src/rules.txt" in done.stdout + done.stderr


def test_the_planner_gets_the_phase_and_its_findings_once_then_the_run_halts(
    tmp_path: Path,
) -> None:
    env = agent_env(tmp_path)
    demo = _project(tmp_path, env, plan=False)
    done = looprail("run", "--phase", "1", cwd=demo, env=env)
    # the stand-in planner's plans claim R-1 only: GREET-01 and GREET-02 stay uncovered
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "plan checks still fail after the planner was told" in out
    assert "requirement GREET-01, GREET-02 of the phase's ROADMAP section" in out
    planner = [c["prompt"] for c in calls(tmp_path) if "-NN-PLAN.md" in c["prompt"]]
    assert len(planner) == 2  # its work, then the findings once
    _verbatim(planner[0], _roadmap_section(), ".planning/REQUIREMENTS.md", "GREET-01, GREET-02")
    assert "fail looprail's plan checks" not in planner[0]
    assert "fail looprail's plan checks" in planner[1]
    assert "GREET-01, GREET-02" in planner[1]
    assert not [c for c in calls(tmp_path) if "## Task " in c["prompt"]]  # no executor ran
