"""Hostile input: manifests, plans, configs and hook files from `tests/hostile/` (and some made
here: symlinks, oversized and deeply nested files) are rejected with an error naming the file and
the field, and nothing they carry ever runs. Every subprocess looprail starts is bounded: a hung
step, gate, resolver or lane is killed and handled by its `onError`.

Sentinel files are what a successful injection would create; they must stay absent.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from looprail.cli import main
from looprail.hooks.gates.checks import CheckContext, evaluate_predicate
from looprail.hooks.manifest import MAX_FRAGMENT_BYTES, MAX_MANIFEST_BYTES, validate_manifest
from looprail.hooks.native.models import MAX_FILE_BYTES as MAX_HOOKS_BYTES
from looprail.hooks.native.parsing import read_hooks_file
from looprail.hooks.registry import load_registry
from looprail.machine.progress import Progress
from looprail.machine.session.phase import load_project, run_phase
from looprail.runtime.base import run_skill
from looprail.runtime.local import LocalRuntime, Timeouts
from tests.support import HOSTILE, feature, run_cli, write_capability, write_config
from tests.support.loop import make_project, plan_md, task_xml, write_plan

# file → (JSON path, part of the reason): what `capability validate` must say.
MANIFESTS = {
    "agentverdict-blocking.json": ("$.gates[0].blocking", "advisory"),
    "constructor-in-step.json": ("$.steps[0].constructor", "forbidden key"),
    "contribution-fragment-dotdot.json": ("$.contributions[0].fragment.path", "without '..'"),
    "duplicate-keys.json": ("$", 'duplicate key "role"'),
    "fragment-absolute.json": ("$.steps[0].fragment.path", "relative path"),
    "fragment-dotdot.json": ("$.steps[0].fragment.path", "without '..'"),
    "hook-matcher-control.json": ("$.hooks[0].matcher", "control characters"),
    "hook-script-absolute.json": ("$.hooks[0].script", "relative path"),
    "hook-script-dotdot.json": ("$.hooks[0].script", "no '..'"),
    "hook-script-leading-dash.json": ("$.hooks[0].script", "no leading '-'"),
    "hook-script-shell.json": ("$.hooks[0].script", "[A-Za-z0-9._/-]"),
    "non-utf8.json": ("$", "not UTF-8"),
    "proto-config-segment.json": ('$.config["a.__proto__.b"]', "forbidden key segment"),
    "proto-top-level.json": ("$.__proto__", "forbidden key"),
    "prototype-in-config.json": ("$.config.prototype", "forbidden key"),
    "resolver-no-id.json": ("$.taskContentResolver.invoke.args", '"{{id}}"'),
    "resolver-null.json": ("$.taskContentResolver", "null is not allowed"),
    "resolver-timeout-unbounded.json": ("$.taskContentResolver.invoke.timeoutMs", "120000"),
    "reviewer-on-feature.json": ("$.reviewer.flags", "required"),
    "top-level-array.json": ("$", "top level must be a JSON object"),
    "truncated.json": ("$", "not valid JSON"),
    "unknown-field-mcp.json": ("$.mcpServers", "unknown field"),
    "when-not-declared.json": ("$.steps[0].when", "not declared"),
}

HOOK_FILES = {
    "bad-regex.json": ("$.local.x.filter.name", "invalid regular expression"),
    "constructor-filter.json": ("$.local.x.constructor", "unknown field"),
    "duplicate-keys.json": ("$", 'duplicate key "shell"'),
    "name-with-slash.json": ('$.local["a/b"]', "invalid entry name"),
    "non-utf8.json": ("$", "not UTF-8"),
    "proto-entry.json": ("$.local.__proto__", "forbidden"),
    "proto-section.json": ("$.__proto__", "not a valid source"),
    "shell-boolean.json": ("$.local.x.shell", "must be a string"),
    "top-level-array.json": ("$", "not a JSON object"),
    "unknown-key-command.json": ("$.local.x.command", 'did you mean "shell"'),
}
# A finding for the native hooks loader (see the report): an entry named `__proto__` loads.

PLANS = {
    "bad-depends-on.md": (":2: depends_on:", "must be a list of strings"),
    "duplicate-keys.md": (":5:", "duplicate key 'wave'"),
    "non-utf8.md": (":", "not UTF-8"),
    "not-a-mapping.md": (":2:", "must be a YAML mapping"),
    "python-tag.md": (":2:", "could not determine a constructor"),
    "unclosed-frontmatter.md": (":1:", "unterminated frontmatter"),
    "yaml-alias-bomb.md": (":5:", "alias *l0 is not allowed"),
}

CONFIGS = {
    # Bad bytes are decoded as U+FFFD, as the reference does: no warning, and the typed key
    # (a boolean holding a string) takes its default.
    "non-utf8.json": None,
    "not-object.json": "top level is not a JSON object",
    "truncated.json": "not valid JSON",
}


def test_the_tables_cover_the_whole_corpus():
    assert set(MANIFESTS) == {p.name for p in (HOSTILE / "manifests").iterdir()}
    assert set(HOOK_FILES) == {p.name for p in (HOSTILE / "hooks").iterdir()}
    assert set(PLANS) == {p.name for p in (HOSTILE / "plans").iterdir()}
    assert set(CONFIGS) | {"proto.json"} == {p.name for p in (HOSTILE / "configs").iterdir()}
    names = {p.name for p in (HOSTILE / "injections").iterdir()}
    assert len(names) == 18 and all(n.startswith(("command-", "query-")) for n in names)


def hostile_root(tmp_path: Path, source: Path, name: str = "caps") -> Path:
    """`<tmp>/<name>/hostile/capability.json`: a capability set holding one corpus file."""
    folder = tmp_path / name / "hostile"
    folder.mkdir(parents=True)
    shutil.copy(source, folder / "capability.json")
    return folder.parent


# --------------------------------------------------------------------------- manifests


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_hostile_manifest_is_rejected_naming_file_and_field(tmp_path, capsys, name):
    caps = hostile_root(tmp_path, HOSTILE / "manifests" / name)
    assert main(["capability", "validate", str(caps), "--project", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    path, reason = MANIFESTS[name]
    line = next(x for x in err.splitlines() if x.startswith("error: "))
    assert line.startswith(f"error: {caps / 'hostile' / 'capability.json'}: {path}: "), err
    assert reason in line and "\n" not in line


def big_manifest(size: int) -> bytes:
    m = feature("hostile", description="x" * size)
    return json.dumps(m).encode()


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: big_manifest(MAX_MANIFEST_BYTES), f"file is larger than {MAX_MANIFEST_BYTES}"),
        (lambda: b"[" * 100 + b"]" * 100, "nested deeper than 64"),
        (lambda: b"[" * 100_000 + b"]" * 100_000, "nested deeper than 64"),
        (lambda: b'{"a":' * 70 + b"1" + b"}" * 70, "nested deeper than 64"),
        (lambda: b"\xff\xfe{}", "not UTF-8"),
    ],
    ids=["oversized", "deep-100", "deep-100000", "deep-objects", "bom-garbage"],
)
def test_oversized_deep_and_binary_manifests_are_rejected(tmp_path, make, reason):
    folder = tmp_path / "hostile"
    folder.mkdir()
    file = folder / "capability.json"
    file.write_bytes(make())
    cap, _, issues = validate_manifest(file.read_bytes(), str(file), folder)
    assert cap is None and issues[0].file == str(file)
    assert reason in issues[0].reason


def fragment_cap(tmp_path: Path, rel: str, files: dict[str, str] | None = None) -> Path:
    step = {
        "point": "plan:pre",
        "ref": {"skill": "s"},
        "produces": [],
        "consumes": [],
        "onError": "skip",
        "fragment": {"path": rel},
    }
    return write_capability(
        tmp_path / "caps", feature("hostile", skills=["s"], steps=[step]), files=files
    )


def test_oversized_fragment_is_rejected(tmp_path):
    folder = fragment_cap(tmp_path, "big.md")
    with open(folder / "big.md", "wb") as fh:
        fh.truncate(MAX_FRAGMENT_BYTES + 1)
    registry = load_registry(tmp_path, [tmp_path / "caps"])
    issue = registry.failed[0].issues[0]
    assert (issue.file, issue.path) == (str(folder / "capability.json"), "$.steps[0].fragment.path")
    assert "larger than" in issue.reason


def test_fragment_symlinked_out_of_the_capability_is_rejected(tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("private notes that must not reach an agent")
    folder = fragment_cap(tmp_path, "fragments/leak.md")
    (folder / "fragments").mkdir()
    (folder / "fragments" / "leak.md").symlink_to(secret)
    registry = load_registry(tmp_path, [tmp_path / "caps"])
    issue = registry.failed[0].issues[0]
    assert (
        issue.path == "$.steps[0].fragment.path" and "outside the capability folder" in issue.reason
    )
    assert "hostile" not in registry.capabilities


def test_a_fifo_fragment_is_rejected_without_reading_it(tmp_path):
    folder = fragment_cap(tmp_path, "pipe.md")
    os.mkfifo(folder / "pipe.md")
    registry = load_registry(tmp_path, [tmp_path / "caps"])
    assert "not a regular file" in registry.failed[0].issues[0].reason


# --------------------------------------------------------------------------- injections


INJECTIONS = sorted(p.name for p in (HOSTILE / "injections").iterdir())


@pytest.mark.parametrize("name", INJECTIONS)
def test_injected_command_or_query_is_refused_naming_file_and_field(tmp_path, capsys, name):
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(HOSTILE / "injections" / name, source / "capability.json")
    project = tmp_path / "project"
    project.mkdir()
    rc = main(["capability", "install", str(source), "--project", str(project), "--yes"])
    out, err = capsys.readouterr()
    assert rc == 1
    field = "$.steps[0].ref.command" if name.startswith("command-") else "$.gates[0].check.query"
    assert f"looprail: error: {source / 'capability.json'}: {field}: " in err
    grammar = "command" if name.startswith("command-") else "query"
    assert f"fails the {grammar} grammar" in err and err.count("\n") == 1
    assert "REFUSED" in out  # the audit says so before the refusal
    assert not (project / ".looprail" / "capabilities" / "hostile").exists()


def executable(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def tiny_project(root: Path) -> Path:
    """Phase 1 with its CONTEXT: the run dispatches discuss:pre, then stops at plan (no
    planner), which is all these tests need."""
    project = make_project(root)
    (project / ".planning" / "phases" / "01-demo" / "01-CONTEXT.md").write_text("# ctx\n")
    return project


def test_nothing_hostile_runs_in_a_real_loop(tmp_path):
    sentinel = tmp_path / "SENTINEL"
    project = tiny_project(tmp_path)
    ran = tmp_path / "plain-word-ran"
    for folder in ("commands", "checks"):
        executable(project / ".looprail" / folder / "x", f"touch {ran}")
    outside = executable(tmp_path / "outside.sh", f'touch "{sentinel}.outside"')
    for rel in ("commands/escape", "checks/escape", "skills/gsd-escape"):
        (project / ".looprail" / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / ".looprail" / rel).symlink_to(outside)
    steps, gates = [], []
    for name in INJECTIONS:
        body = json.loads((HOSTILE / "injections" / name).read_text())
        steps += body.get("steps") or []
        gates += body.get("gates") or []
    steps.append(
        {
            "point": "discuss:pre",
            "ref": {"command": "escape"},
            "produces": [],
            "consumes": [],
            "onError": "skip",
        }
    )
    steps.append(
        {
            "point": "discuss:pre",
            "ref": {"skill": "escape"},
            "produces": [],
            "consumes": [],
            "onError": "skip",
        }
    )
    gates.append(
        {"point": "discuss:pre", "check": {"query": "escape"}, "blocking": True, "onError": "skip"}
    )
    caps = tmp_path / "caps"
    write_capability(caps, feature("injected", skills=["escape"], steps=steps, gates=gates))
    roots = [
        hostile_root(tmp_path, HOSTILE / "manifests" / n, f"m-{i}")
        for i, n in enumerate(sorted(MANIFESTS))
    ]
    hooks = project / ".looprail" / "hooks.json"  # the project's own, never trusted here
    hooks.write_text(
        json.dumps(
            {
                "local": {
                    "pwn": {
                        "description": "d",
                        "event": "discuss:pre",
                        "shell": f'touch "{sentinel}.hook"',
                    }
                }
            }
        )
    )
    args = [
        "run",
        "--phase",
        "1",
        "--no-journal",
        "--project",
        str(project),
        "--capabilities",
        str(caps),
    ]
    with_hostile = list(args)
    for root in roots:
        with_hostile += ["--capabilities", str(root)]
    # A capability that failed to load would drop its hooks silently: the run refuses to start,
    # naming every one (issue 12), and nothing runs.
    p = run_cli(*with_hostile, env={"SENTINEL": str(sentinel)})
    assert p.returncode == 1, p.stderr
    assert p.stderr.count("failed to load") == len(MANIFESTS)
    assert "Traceback" not in p.stderr
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(("SENTINEL", "plain-word"))]
    p = run_cli(*args, env={"SENTINEL": str(sentinel)})
    assert p.returncode == 1, p.stderr  # halted at plan: no planner, as designed
    assert "Traceback" not in p.stderr
    assert p.stderr.count("ref.command fails the grammar") == 9
    assert p.stderr.count("check.query fails the grammar") == 9
    assert p.stderr.count("resolves outside .looprail/") == 3
    assert "not read because the project is not trusted" in p.stderr
    leftovers = sorted(
        x.name for x in tmp_path.iterdir() if x.name.startswith(("SENTINEL", "plain-word"))
    )
    assert leftovers == []

    # The positive control: once the user trusts the hooks file, its shell does run.
    assert run_cli("trust", "--project", str(project), "--yes").returncode == 0
    p = run_cli(*args, env={"SENTINEL": str(sentinel)})
    assert Path(f"{sentinel}.hook").exists()
    assert not sentinel.exists() and not Path(f"{sentinel}.outside").exists() and not ran.exists()


# --------------------------------------------------------------------------- hook files


@pytest.mark.parametrize(
    "name",
    [n for n in sorted(HOOK_FILES)],
)
def test_hostile_hooks_file_is_rejected_naming_file_and_field(name):
    path = HOSTILE / "hooks" / name
    loaded = read_hooks_file(path, scope="project")
    assert loaded.status == "invalid" and loaded.hooks == ()
    where, reason = HOOK_FILES[name]
    first = loaded.issues[0]
    assert (first.file, first.path) == (str(path), where)
    assert reason in first.reason


def test_hostile_hooks_file_is_rejected_by_the_cli(capsys):
    path = HOSTILE / "hooks" / "unknown-key-command.json"
    assert main(["hooks", "validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: $.local.x.command: unknown field" in err


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"local": {"x": {"description": "' + b"x" * MAX_HOOKS_BYTES + b'"}}}', "larger than"),
        (b'{"local":' * 100_000 + b"{}" + b"}" * 100_000, "nested deeper"),
    ],
    ids=["oversized", "deep"],
)
def test_oversized_and_deep_hooks_files_are_rejected(tmp_path, content, reason):
    path = tmp_path / "hooks.json"
    path.write_bytes(content)
    loaded = read_hooks_file(path, scope="project")
    assert loaded.status == "invalid" and reason in loaded.issues[0].reason


# --------------------------------------------------------------------------- plans


@pytest.mark.parametrize("name", sorted(PLANS))
def test_hostile_plan_is_rejected_naming_file_line_and_field(tmp_path, name):
    project = make_project(tmp_path)
    plan = project / ".planning" / "phases" / "01-demo" / "01-01-PLAN.md"
    shutil.copy(HOSTILE / "plans" / name, plan)
    sentinel = tmp_path / "SENTINEL"
    p = run_cli(
        "phase", "plan-index", "1", "--project", str(project), env={"SENTINEL": str(sentinel)}
    )
    assert p.returncode != 0
    where, reason = PLANS[name]
    line = p.stderr.strip()
    assert line.startswith("looprail: error: .planning/phases/01-demo/01-01-PLAN.md" + where), line
    assert reason in line and "\n" not in line and "Traceback" not in p.stderr
    assert not sentinel.exists()


def test_read_first_outside_the_project_halts_naming_plan_and_field(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the project")
    project = tiny_project(tmp_path)
    (project / "inside.txt").write_text("ok")
    (project / "link.txt").symlink_to(secret)
    tasks = [task_xml("peek", read_first=["inside.txt", "../secret.txt", str(secret), "link.txt"])]
    write_plan(project, "01", plan_md("01", tasks=tasks))
    executable(project / ".looprail" / "agents" / "executor", f"touch {tmp_path / 'SENTINEL'}")
    result = run_phase(
        load_project(project), "1", journal=False, progress=Progress(io.StringIO(), live=False)
    )
    assert result.result.status == "halted"
    reason = result.result.reason
    assert reason.startswith("01-01-PLAN.md: task 01-01/T1 read_first: missing ")
    assert f"../secret.txt, {secret}, link.txt" in reason and "inside.txt" not in reason
    assert not (tmp_path / "SENTINEL").exists()  # the task body never ran


def test_resolver_plan_outside_the_project_is_refused(tmp_path, capsys):
    project = make_project(tmp_path)
    outside = tmp_path / "outside-PLAN.md"
    outside.write_text(plan_md("01", tasks=[task_xml("t", attrs=' tracker-id="t:1"')]))
    link = project / ".planning" / "phases" / "01-demo" / "01-01-PLAN.md"
    link.symlink_to(outside)
    for given in ("../outside-PLAN.md", str(outside), ".planning/phases/01-demo/01-01-PLAN.md"):
        rc = main(
            [
                "task",
                "resolve-content",
                "--plan",
                given,
                "--task-id",
                "t:1",
                "--project",
                str(project),
            ]
        )
        assert rc == 2
        assert f"--plan: {given} is outside the project" in capsys.readouterr().err


# --------------------------------------------------------------------------- configs


WHEN_CAP = feature(
    "hostile",
    skills=["s"],
    config={"hostile.on": {"type": "boolean", "default": False}},
    steps=[
        {
            "point": "plan:pre",
            "ref": {"skill": "s"},
            "produces": [],
            "consumes": [],
            "onError": "skip",
            "when": "hostile.on",
        }
    ],
)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hostile_config_is_set_aside_with_a_warning_naming_the_file(tmp_path, name):
    project = make_project(tmp_path)
    caps = tmp_path / "caps"
    write_capability(caps, WHEN_CAP)
    shutil.copy(HOSTILE / "configs" / name, project / ".planning" / "config.json")
    p = run_cli(
        "loop",
        "render-hooks",
        "plan:pre",
        "--raw",
        "--project",
        str(project),
        "--capabilities",
        str(caps),
    )
    assert p.returncode == 0 and json.loads(p.stdout)["activeHooks"] == []
    assert "Traceback" not in p.stderr
    if CONFIGS[name] is None:
        assert p.stderr == ""
        return
    (line,) = p.stderr.splitlines()
    assert line.startswith(f"looprail: warning: {project / '.planning' / 'config.json'}")
    assert CONFIGS[name] in line and "NOT applied" in line


def test_forbidden_config_keys_never_resolve(tmp_path):
    project = make_project(tmp_path)
    caps = tmp_path / "caps"
    write_capability(caps, WHEN_CAP)
    shutil.copy(HOSTILE / "configs" / "proto.json", project / ".planning" / "config.json")
    p = run_cli(
        "loop",
        "render-hooks",
        "plan:pre",
        "--raw",
        "--project",
        str(project),
        "--capabilities",
        str(caps),
    )
    assert p.returncode == 0 and json.loads(p.stdout)["activeHooks"] == []
    write_config(project, {"hostile": {"on": True}})  # the control: a real key does activate
    p = run_cli(
        "loop",
        "render-hooks",
        "plan:pre",
        "--raw",
        "--project",
        str(project),
        "--capabilities",
        str(caps),
    )
    assert len(json.loads(p.stdout)["activeHooks"]) == 1


# --------------------------------------------------------------------------- findings, fixed


def test_deeply_nested_config_is_set_aside(tmp_path):
    project = make_project(tmp_path)
    write_config(project, "[" * 100_000 + "]" * 100_000)
    from looprail.config import load_project_config

    config, warnings = load_project_config(project)
    assert config is None and "config.json" in warnings[0]
    assert "nested too deeply" in warnings[0]


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_deep_config_is_refused_in_one_line_where_the_reference_reads_it(tmp_path, depth):
    """A deliberate difference (docs/checks.md): JSON.parse reads any depth; looprail reads what
    this Python's parser reads (by version: docs/checks.md) and refuses a config nested
    deeper in one line, as it refuses an oversized one."""
    text = '{"d": ' + "[" * depth + "]" * depth + "}"
    try:
        python_reads = json.loads(text) is not None
    except RecursionError:
        python_reads = False
    project = make_project(tmp_path)
    write_config(project, text)
    result = run_cli("lint", "--project", str(project))
    assert result.returncode != 0  # refused, or (read) the project's missing role agents
    assert "Traceback" not in result.stderr
    refusals = [line for line in result.stderr.splitlines() if "nested too deeply" in line]
    if python_reads:
        assert refusals == []
    else:
        assert result.stderr.strip().splitlines() == refusals
        (line,) = refusals
        assert "config.json: cannot be read (JSON nested too deeply for Python's parser)" in line


def test_config_nested_a_few_hundred_levels_is_read(tmp_path):
    project = make_project(tmp_path)
    write_config(project, '{"d": ' + "[" * 300 + "]" * 300 + ', "e": 1}')
    from looprail.config import load_project_config

    config, warnings = load_project_config(project)
    assert config is not None and config["e"] == 1 and warnings == []


def test_config_with_duplicate_keys_keeps_the_last_as_the_reference(tmp_path):
    project = make_project(tmp_path)
    write_config(project, '{"hostile": {"on": false}, "hostile": {"on": true}}')
    from looprail.config import load_project_config

    config, warnings = load_project_config(project)
    assert config == {"hostile": {"on": True}} and warnings == []  # JSON.parse: last one wins


def test_deeply_nested_plan_frontmatter_is_a_plan_error():
    from looprail.errors import PlanError
    from looprail.plans.planfile import parse_plan

    with pytest.raises(PlanError):
        parse_plan("---\na: " + "[" * 5000 + "]" * 5000 + "\n---\n", path="01-01-PLAN.md")


def test_deep_frontmatter_is_refused_even_with_a_raised_recursion_limit():
    # Another library in the process (dask, a test tool) may raise the interpreter's limit:
    # the depth bound is looprail's own, not the interpreter's.
    import sys

    from looprail.errors import PlanError
    from looprail.plans.planfile import parse_plan

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(60_000)
    try:
        with pytest.raises(PlanError, match="nested too deeply"):
            parse_plan("---\na: " + "[" * 5000 + "]" * 5000 + "\n---\n", path="01-01-PLAN.md")
    finally:
        sys.setrecursionlimit(old)


def test_control_character_in_plan_frontmatter_is_a_plan_error():
    from looprail.errors import PlanError
    from looprail.plans.planfile import parse_plan

    with pytest.raises(PlanError):
        parse_plan("---\nphase: \x00\n---\n", path="01-01-PLAN.md")


def test_a_manifest_with_very_many_steps_loads_in_bounded_time(tmp_path):
    steps = [
        {
            "point": "plan:pre",
            "ref": {"skill": "s"},
            "produces": [f"a{i}"],
            "consumes": [],
            "onError": "skip",
        }
        for i in range(50_000)
    ]
    write_capability(tmp_path / "caps", feature("hostile", skills=["s"], steps=steps))
    start = time.monotonic()
    load_registry(tmp_path, [tmp_path / "caps"])
    assert time.monotonic() - start < 10


# --------------------------------------------------------------------------- everything bounded


def step_cap(on_error: str, **entry) -> dict:
    base = {"point": "discuss:pre", "produces": [], "consumes": [], "onError": on_error}
    return {**base, **entry}


def run_with(project: Path, caps: Path, **timeouts):
    stream = io.StringIO()
    runtime = LocalRuntime(project, timeouts=Timeouts(**timeouts), progress=lambda line: None)
    result = run_phase(
        load_project(project, [caps]),
        "1",
        runtime=runtime,
        journal=False,
        progress=Progress(stream, live=False),
    )
    return result.result, stream.getvalue()


@pytest.mark.parametrize("on_error", ["skip", "halt"])
def test_a_hung_step_is_killed_and_handled_by_on_error(tmp_path, on_error):
    project = tiny_project(tmp_path)
    executable(project / ".looprail" / "skills" / "gsd-hang", "sleep 60")
    caps = tmp_path / "caps"
    write_capability(
        caps, feature("hang", skills=["hang"], steps=[step_cap(on_error, ref={"skill": "hang"})])
    )
    result, log = run_with(project, caps, skill=1)
    assert ".looprail/skills/gsd-hang timed out after 1s and was killed" in log
    if on_error == "skip":
        assert result.state == ["plan"]  # carried on past discuss:pre
    else:
        assert result.status == "halted" and result.state == ["idle"]
        assert "timed out after 1s and was killed" in result.reason


@pytest.mark.parametrize("on_error", ["skip", "halt"])
def test_a_hung_query_gate_is_killed_and_handled_by_on_error(tmp_path, on_error):
    project = tiny_project(tmp_path)
    executable(project / ".looprail" / "checks" / "slow", "sleep 60")
    gate = {
        "point": "discuss:pre",
        "check": {"query": "slow check"},
        "blocking": True,
        "onError": on_error,
    }
    caps = tmp_path / "caps"
    write_capability(caps, feature("slow", gates=[gate]))
    result, log = run_with(project, caps, query=1)
    assert ".looprail/checks/slow timed out after 1s and was killed" in log
    if on_error == "skip":
        assert result.state == ["plan"]
    else:
        assert result.status == "halted" and result.state == ["idle"]


@pytest.mark.parametrize("blocking", [True, False])
def test_a_hung_predicate_is_killed_and_blocks_only_when_blocking(tmp_path, blocking):
    project = tiny_project(tmp_path)
    predicate = {"kind": "command-exit-zero", "command": "sleep 60", "timeout": 1}
    gate = {
        "point": "discuss:pre",
        "check": {"predicate": predicate},
        "blocking": blocking,
        "onError": "skip",
    }
    caps = tmp_path / "caps"
    write_capability(caps, feature("slow", gates=[gate]))
    result, log = run_with(project, caps)
    assert "command timed out after 1s" in log
    if blocking:  # a timed-out predicate is a delivered `block: true` (the reference's rule)
        assert result.status == "halted" and result.refused_by.cap_id == "slow"
    else:
        assert result.state == ["plan"]


def test_a_timed_out_predicate_leaves_no_process_behind(tmp_path):
    sentinel = tmp_path / "SENTINEL"
    predicate = {
        "kind": "command-exit-zero",
        "command": f"sleep 0.8; touch {sentinel}",
        "timeout": 0.2,
    }
    start = time.monotonic()
    verdict = evaluate_predicate(predicate, CheckContext(project=tmp_path))
    assert verdict.block and "timed out" in verdict.message
    time.sleep(max(0.0, 1.2 - (time.monotonic() - start)))  # past the moment it would have run
    assert not sentinel.exists()  # the whole process group was killed, not only /bin/sh


def test_a_hung_resolver_is_killed_and_halts_the_task(tmp_path):
    project = tiny_project(tmp_path)
    resolver = executable(tmp_path / "bin" / "slow-tracker", "sleep 60")
    tcr = {
        "trackerPrefix": "slow",
        "invoke": {"binary": str(resolver), "args": ["{{id}}"], "timeoutMs": 500},
    }
    caps = tmp_path / "caps"
    write_capability(caps, feature("tracker", taskContentResolver=tcr))
    write_plan(project, "01", plan_md("01", tasks=[task_xml("t", attrs=' tracker-id="slow:42"')]))
    executable(project / ".looprail" / "agents" / "executor", f"touch {tmp_path / 'SENTINEL'}")
    result, _ = run_with(project, caps)
    assert result.status == "halted"
    assert "tracker-id 'slow:42'" in result.reason and "timed out after 500ms" in result.reason
    assert not (tmp_path / "SENTINEL").exists()  # no fallback to the inline plan


def test_review_lane_file_list_is_bounded(tmp_path):
    from tests.support.reviewer import review_step, reviewer_cap

    project = make_project(tmp_path)
    caps = tmp_path / "caps"
    write_capability(caps, review_step())
    write_capability(caps, reviewer_cap("lane", binary="true"))
    sentinel = tmp_path / "run"
    p = run_cli(
        "review-lane", "dispatch-step", "--cap-id", "code-review", "--point", "execute:post",
        "--explicit", "lane", "--repo-root", str(project), "--depth", "d", "--base-sha", "s",
        "--run-dir", str(sentinel), "--raw", "--project", str(project), "--capabilities", str(caps),
        input="a\n" * (3 << 20),  # 6 MiB of paths: more than the 4 MiB cap
    )  # fmt: skip
    assert p.returncode == 1 and json.loads(p.stdout)["reason"] == "invalid_paths"
    assert "not UTF-8 or too large" in p.stderr
    assert not sentinel.exists()


def test_output_of_a_chatty_step_is_capped(tmp_path):
    project = tiny_project(tmp_path)
    executable(
        project / ".looprail" / "skills" / "gsd-chatty",
        f"{sys.executable} -c \"print('x' * (8 << 20))\"",
    )
    caps = tmp_path / "caps"
    write_capability(
        caps,
        feature("chatty", skills=["chatty"], steps=[step_cap("halt", ref={"skill": "chatty"})]),
    )
    runtime = LocalRuntime(project, output_cap=1024, progress=lambda line: None)
    from looprail.runtime.base import DispatchContext

    outcome = run_skill(runtime, "gsd-chatty", DispatchContext(project=project, phase_number="1"))
    assert outcome.ok and len(outcome.stdout) == 1024 and outcome.truncated
