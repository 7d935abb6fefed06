"""PLAN.md parsing: frontmatter fields, the tolerant task scanner, one-line errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from looprail.errors import PlanError
from looprail.plans import Plan, parse_plan, read_plan, split_paths

FULL_PLAN = textwrap.dedent(
    """\
    ---
    phase: 01-setup
    plan: 02
    type: tdd
    wave: 2
    depends_on: ["01"]
    files_modified: [src/app.py, src/db.py]
    autonomous: false
    requirements: [AUTH-01, AUTH-02]
    user_setup:
      - service: stripe
        why: payments
    must_haves:
      truths: ["users can log in"]
      artifacts: []
      key_links: []
    cross_ai: true
    gap_closure: false
    ---

    <objective>
    Add login.

    Purpose: users need accounts.
    </objective>

    <execution_context>
    @~/.claude/gsd-core/workflows/execute-plan.md
    </execution_context>

    <context>
    @.planning/PROJECT.md
    </context>

    <tasks>

    <task type="tdd" gate="blocking" tdd="true" tracker-id="beads:GSD-42">
      <name>Task 1: Login endpoint</name>
      <files>src/app.py, src/db.py</files>
      <read_first>
        - `src/app.py` (the current handler)
        - docs/auth.md
      </read_first>
      <action>
        Compare with `if a < b && c > d` and keep the `<task>` text as is:
        ```python
        if user.age < 18 and flags & ADMIN:
            raise Forbidden("<done>")
        ```
        Then wire it up.
      </action>
      <verify><automated>pytest -q tests/test_login.py</automated></verify>
      <acceptance_criteria>
        - src/app.py contains "def login"
        - tests pass
      </acceptance_criteria>
      <done>POST /login returns 200</done>
    </task>

    <!-- a comment that mentions <task> is not a task -->

    <task type="checkpoint:human-verify" gate="blocking-human">
      <what-built>Login page at /login</what-built>
      <options>
        <option id="a"><name>Keep</name></option>
      </options>
      <resume-signal>Type "approved"</resume-signal>
    </task>

    <task type="checkpoint:decision" gate="blocking"><name>Pick a store</name></task>
    <task type="checkpoint:human-action"><name>Create the account</name></task>
    <task type="tracer"><name>Trace it</name></task>
    <task><name>Untyped defaults to auto</name></task>

    </tasks>

    <verification>
    - [ ] pytest passes
    </verification>

    <success_criteria>
    - All tasks completed
      </success_criteria>

    <output>
    After completion, create `.planning/phases/01-setup/01-02-SUMMARY.md`
    </output>
    """
)


def parse(text: str, name: str = "01-02-PLAN.md") -> Plan:
    return parse_plan(text, path=Path(".planning/phases/01-setup") / name)


def minimal(frontmatter: str = "", body: str = "<objective>x</objective>\n") -> str:
    return f"---\n{frontmatter}---\n{body}"


def error_of(text: str, name: str = "01-02-PLAN.md") -> str:
    with pytest.raises(PlanError) as info:
        parse(text, name)
    message = str(info.value)
    assert "\n" not in message
    assert name in message
    return message


def test_full_plan_frontmatter():
    plan = parse(FULL_PLAN)
    assert plan.id == "01-02"
    assert plan.phase == "01-setup"
    assert plan.plan == "02"  # zero padding kept, not read as an octal integer
    assert plan.type == "tdd"
    assert plan.wave == 2
    assert plan.depends_on == ["01"]  # resolved to plan ids only when loaded with its phase
    assert plan.files_modified == ["src/app.py", "src/db.py"]
    assert plan.autonomous is False
    assert plan.requirements == ["AUTH-01", "AUTH-02"]
    assert plan.user_setup == [{"service": "stripe", "why": "payments"}]
    assert plan.must_haves == {"truths": ["users can log in"], "artifacts": [], "key_links": []}
    assert plan.extra == {"cross_ai": True, "gap_closure": False}


def test_full_plan_sections():
    plan = parse(FULL_PLAN)
    assert plan.objective == "Add login.\n\nPurpose: users need accounts."
    assert plan.objective_line == "Add login."
    assert plan.execution_context == "@~/.claude/gsd-core/workflows/execute-plan.md"
    assert plan.context == "@.planning/PROJECT.md"
    assert plan.verification == "- [ ] pytest passes"
    assert plan.success_criteria == "- All tasks completed"
    assert plan.output == "After completion, create `.planning/phases/01-setup/01-02-SUMMARY.md`"


def test_task_with_every_attribute_and_child():
    task = parse(FULL_PLAN).tasks[0]
    assert task.id == "01-02/T1"
    assert task.index == 1
    assert task.line == 37
    assert task.type == "tdd"
    assert task.gate == "blocking"
    assert task.tdd is True
    assert task.tracker_id == "beads:GSD-42"
    assert task.attributes == {
        "type": "tdd",
        "gate": "blocking",
        "tdd": "true",
        "tracker-id": "beads:GSD-42",
    }
    assert task.is_checkpoint is False
    assert task.name == "Task 1: Login endpoint"
    assert task.files == ["src/app.py", "src/db.py"]
    assert task.read_first == ["src/app.py", "docs/auth.md"]
    assert task.action == (
        "Compare with `if a < b && c > d` and keep the `<task>` text as is:\n"
        "```python\n"
        "if user.age < 18 and flags & ADMIN:\n"
        '    raise Forbidden("<done>")\n'
        "```\n"
        "Then wire it up."
    )
    assert task.verify == "<automated>pytest -q tests/test_login.py</automated>"
    assert task.acceptance_criteria == '- src/app.py contains "def login"\n- tests pass'
    assert task.done == "POST /login returns 200"


def test_checkpoint_tasks_keep_their_other_children():
    tasks = parse(FULL_PLAN).tasks
    assert [t.id for t in tasks] == [f"01-02/T{i}" for i in range(1, 7)]
    checkpoint = tasks[1]
    assert checkpoint.is_checkpoint
    assert checkpoint.type == "checkpoint:human-verify"
    assert checkpoint.gate == "blocking-human"
    assert checkpoint.name is None  # the <name> inside <options> is not the task's
    assert checkpoint.extra["what-built"] == "Login page at /login"
    assert checkpoint.extra["resume-signal"] == 'Type "approved"'
    assert '<option id="a">' in checkpoint.extra["options"]
    assert [t.type for t in tasks[2:]] == [
        "checkpoint:decision",
        "checkpoint:human-action",
        "tracer",
        "auto",
    ]
    assert [t.is_checkpoint for t in tasks[2:]] == [True, True, False, False]
    assert parse(FULL_PLAN).has_checkpoints


def test_defaults_and_tasks_without_wrapper():
    plan = parse(minimal(body="<task type='auto'><name>one</name></task>\n"))
    assert plan.type == "execute"
    assert plan.wave is None
    assert plan.depends_on == [] and plan.files_modified == [] and plan.requirements == []
    assert plan.autonomous is True
    assert plan.objective is None
    assert [t.name for t in plan.tasks] == ["one"]


def test_zero_padded_wave_and_null_lists():
    plan = parse(minimal("wave: 01\ndepends_on:\nfiles_modified:\nautonomous:\n"))
    assert plan.wave == 1
    assert plan.depends_on == [] and plan.files_modified == []
    assert plan.autonomous is True


def test_crlf_and_bom_are_accepted():
    text = "\ufeff" + minimal("wave: 1\n", "<objective>\r\nx\r\n</objective>\r\n")
    plan = parse(text.replace("\n", "\r\n"))
    assert plan.wave == 1
    assert plan.objective == "x"


def test_split_paths():
    assert split_paths("a.py, b.py\n- c.py\n* `d.py` (context)\n1. e.py\n\n`f.py`, `g.py`") == [
        "a.py",
        "b.py",
        "c.py",
        "d.py",
        "e.py",
        "f.py",
        "g.py",
    ]


def test_read_plan_from_disk(tmp_path: Path):
    path = tmp_path / "03-01-PLAN.md"
    path.write_text(minimal("wave: 1\n"), encoding="utf-8")
    assert read_plan(path).id == "03-01"
    path.write_bytes(b"---\nwave: 1\n---\n\xff\xfe")
    with pytest.raises(PlanError, match="not UTF-8"):
        read_plan(path)


# --- malformed plans: one line naming the file, the line and the problem --------------------


def notes_of(text: str, name: str = "01-02-PLAN.md") -> str:
    """What reading the plan warned about (it was read, not refused), one note per line."""
    plan = parse(text, name)
    assert all("\n" not in n and name in n for n in plan.notes)
    return "\n".join(plan.notes)


def test_missing_frontmatter_is_read_with_defaults_and_warned():
    plan = parse("<objective>x</objective>\n")
    assert plan.depends_on == [] and plan.autonomous
    assert ":1: no YAML frontmatter: read with defaults" in notes_of("<objective>x</objective>\n")


def test_unterminated_frontmatter():
    message = error_of("---\nwave: 1\n<objective>x</objective>\n")
    assert ":1: unterminated frontmatter" in message


def test_bad_yaml_names_its_line():
    message = error_of("---\nwave: 1\ndepends_on: [01\nplan: 02\n---\n")
    assert ":4: invalid YAML frontmatter" in message


def test_duplicate_frontmatter_key():
    message = error_of("---\nwave: 1\nplan: 01\nwave: 2\n---\n")
    assert ":4: invalid YAML frontmatter: duplicate key 'wave'" in message


def test_non_mapping_frontmatter():
    assert "frontmatter must be a YAML mapping, got a list" in error_of("---\n- a\n- b\n---\n")


def test_a_wave_is_read_as_the_reference_reads_it():
    assert parse(minimal("plan: 01\nwave: two\n")).wave is None
    assert ":3: wave: must be a non-negative integer, got 'two'" in notes_of(
        minimal("plan: 01\nwave: two\n")
    )
    assert parse(minimal("wave: 1.5\n")).wave == 1  # parseInt
    assert parse(minimal("wave: true\n")).wave is None


def test_depends_on_as_the_reference_reads_it():
    assert parse(minimal("depends_on: 01-01\n")).depends_on == ["01-01"]
    assert parse(minimal("depends_on: [1]\n")).depends_on == ["1"]
    assert parse(minimal("depends_on: [03, 04]\n")).depends_on == ["03", "04"]
    # a dependency that cannot be read would be lost: refused
    assert "depends_on: item 0 must be a non-empty string" in error_of(
        minimal("depends_on: [{a: 1}]\n")
    )


def test_other_frontmatter_type_problems_are_warned_not_refused():
    assert "type: unknown plan type 'deploy'; run as execute" in notes_of(minimal("type: deploy\n"))
    assert parse(minimal("type: verify\n")).type == "verify"
    assert "autonomous: must be true or false, got 'maybe'; read as False" in notes_of(
        minimal("autonomous: maybe\n")
    )
    plan = parse(minimal("must_haves: [a]\n"))
    assert plan.must_haves == ["a"]
    assert "must_haves: is a list, not a mapping" in notes_of(minimal("must_haves: [a]\n"))
    assert "files_modified: must be a list" in notes_of(minimal("files_modified: {a: 1}\n"))


def test_task_without_closing_tag():
    body = "<tasks>\n<task type='auto'>\n  <name>a</name>\n</tasks>\n"
    message = error_of(minimal(body=body))
    assert ":4: <task> has no </task>" in message


def test_task_closed_only_after_the_next_task():
    body = "<tasks>\n<task>\n<name>a</name>\n<task>\n<name>b</name>\n</task>\n</tasks>\n"
    message = error_of(minimal(body=body))
    assert ":4: <task> has no </task> before the next <task> (line 6)" in message


def test_unknown_task_type_is_warned_and_run_safely():
    text = minimal(body="<tasks>\n<task type='checkpoint:coffee'></task>\n</tasks>\n")
    assert parse(text).tasks[0].type == "checkpoint:human-verify"
    assert ":4: <task> has unknown type 'checkpoint:coffee'; run as checkpoint:human-verify" in (
        notes_of(text)
    )
    assert parse(minimal(body="<task type='review'></task>")).tasks[0].type == "auto"


def test_unknown_gate_and_bad_attributes():
    assert "unknown gate 'soft'" in notes_of(minimal(body="<task gate='soft'></task>"))
    assert "tdd must be true or false" in notes_of(minimal(body="<task tdd='yes'></task>"))
    assert "repeats the attribute 'type'" in error_of(
        minimal(body="<task type='auto' type='tdd'></task>")
    )
    assert "malformed attribute list" in error_of(minimal(body='<task type="auto" "x"></task>'))


def test_unclosed_task_child_and_section():
    body = "<tasks>\n<task>\n<action>do it\n</task>\n</tasks>\n"
    assert ":5: <action> has no </action>" in error_of(minimal(body=body))
    assert "<objective> has no </objective>" in error_of(minimal(body="<objective>\nx\n"))


def test_duplicate_task_child_keeps_the_first():
    body = "<task><name>a</name><name>b</name></task>"
    assert parse(minimal(body=body)).tasks[0].name == "a"
    assert "<task> has a second <name>: the first is used" in notes_of(minimal(body=body))
