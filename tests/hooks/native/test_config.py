"""Native hooks files: validation (HooKit checklist §A.15 items 1–16), merge, trust, loading."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from looprail.hooks.native.document import hooks_json_schema
from looprail.hooks.native.events import EVENT_NAMES, EVENTS, task_candidate
from looprail.hooks.native.loading import load_native_hooks
from looprail.hooks.native.models import NativeHook, Preset
from looprail.hooks.native.parsing import read_hooks_file, validate_hooks_document
from tests.support import examples


def issues_of(doc, scope="global") -> list[tuple[str, str]]:
    result = validate_hooks_document(doc, file="hooks.json", scope=scope)
    assert all(i.file == "hooks.json" for i in result.issues)
    return [(i.path, i.reason) for i in result.issues]


def assert_valid(doc, scope="global"):
    result = validate_hooks_document(doc, file="hooks.json", scope=scope)
    assert result.issues == (), result.issues
    assert result.status == "valid"
    return result


def hook(**fields):
    return {"description": "d", "event": "task_call", "shell": "true", **fields}


def write(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


# --------------------------------------------------------------------------- entry validation


def test_a_valid_hook_becomes_a_typed_immutable_model():
    result = assert_valid(
        {
            "$schema": "./schema.json",
            "local": {
                "lint": hook(
                    event="plan:pre",
                    filter={"phase": "^0[1-3]$", "wave": [1, 2]},
                    when="test -f Makefile",
                    shell="make lint",
                    timeoutMs=20000,
                )
            },
        }
    )
    (lint,) = result.hooks
    assert isinstance(lint, NativeHook)
    assert lint.ref == "local/lint"
    assert lint.entry.filter == {"phase": "^0[1-3]$", "wave": [1, 2]}
    assert (lint.entry.when, lint.entry.shell, lint.entry.timeout_ms, lint.entry.default) == (
        "test -f Makefile",
        "make lint",
        20000,
        True,
    )
    with pytest.raises(AttributeError):
        lint.entry = lint.entry  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        lint.entry.shell = "rm -rf /"  # type: ignore[misc]


def test_description_and_event_are_required_and_unknown_events_list_the_supported_ones():
    problems = issues_of({"local": {"x": {"shell": "true"}, "y": hook(event="made_up")}})
    assert ("$.local.x.description", "is required and must be a string") in problems
    assert any(p == "$.local.x.event" and "is required" in r for p, r in problems)
    (reason,) = [r for p, r in problems if p == "$.local.y.event"]
    assert reason.startswith('unknown event "made_up"; supported events: discuss:pre')
    for name in EVENT_NAMES:
        assert name in reason


@pytest.mark.parametrize(
    ("entry", "path", "needle"),
    [
        ({"description": "d", "event": "task_call"}, "$.local.x", 'needs "shell" or "action"'),
        (hook(shell=True), "$.local.x.shell", "must be a string"),
        (hook(timeout=5), "$.local.x.timeout", 'did you mean "timeoutMs"'),
        (hook(hook="task_call"), "$.local.x.hook", "unknown field"),
        (hook(default="yes"), "$.local.x.default", "true or false"),
        (hook(when=1), "$.local.x.when", "must be a string"),
        (hook(timeoutMs=0), "$.local.x.timeoutMs", "integer from 1"),
        (hook(timeoutMs=True), "$.local.x.timeoutMs", "integer from 1"),
        (hook(maxSelections=2), "$.local.x.maxSelections", "has no"),
        (
            hook(maxSelections=0, action={"type": "interrupt", "outcome": "block"}),
            "$.local.x.maxSelections",
            "positive integer",
        ),
    ],
)
def test_hook_shape_rules(entry, path, needle):
    problems = issues_of({"local": {"x": entry}})
    assert any(p == path and needle in r for p, r in problems), problems


def test_hooks_and_presets_do_not_mix():
    problems = issues_of(
        {
            "local": {
                "mixed": {**hook(), "preset": ["local/a"]},
                "p": {"description": "d", "preset": ["local/a"], "when": "true", "filter": {}},
            }
        }
    )
    paths = {p for p, _ in problems}
    assert {
        "$.local.mixed.event",
        "$.local.mixed.shell",
        "$.local.p.when",
        "$.local.p.filter",
    } <= paths
    assert all("not allowed on a Preset" in r for _, r in problems)


@pytest.mark.parametrize("name", ["", "a/b", "a\x00b"])
def test_entry_names_must_be_non_empty_without_slash_or_nul(name):
    problems = issues_of({"local": {name: hook()}})
    assert len(problems) == 1
    assert "names must be non-empty and contain neither / nor NUL" in problems[0][1]


def test_section_keys_are_local_or_owner_repo():
    problems = issues_of({"one": {}, "a/b/c": {}, "local": {}, "o/r": {}})
    assert [p for p, _ in problems] == ["$.one", '$["a/b/c"]']
    assert 'expected "local" or owner/repo' in problems[0][1]


def test_project_repository_sections_must_be_declared_in_repos_but_global_ones_need_not():
    doc = {"o/r": {"x": hook()}, "o/declared": {"y": hook()}, "repos": ["o/declared"]}
    assert issues_of(doc, scope="project") == [
        ('$["o/r"]', 'repository section "o/r" is not declared in this file\'s "repos"')
    ]
    assert_valid(doc, scope="global")


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"repos": "o/r"}, "$.repos"),
        ({"repos": ["no-slash"]}, "$.repos[0]"),
        ({"repos": ["o/r", "o/r"]}, "$.repos[1]"),
        ({"$schema": 1}, "$.$schema"),
        ([], "$"),
    ],
)
def test_top_level_rules(doc, path):
    problems = issues_of(doc)
    assert [p for p, _ in problems] == [path]


def test_root_that_is_not_an_object_says_so():
    assert issues_of([]) == [("$", "top level is not a JSON object")]


def test_filter_values_regexes_and_paths():
    problems = issues_of(
        {
            "local": {
                "x": hook(
                    filter={
                        "name": "[",
                        "files": ["ok", "("],
                        "deep": [{"a": 1}],
                        "obj": {"a": 1},
                    }
                ),
                "y": hook(filter=["not", "an", "object"]),
            }
        }
    )
    by_path = dict(problems)
    assert by_path["$.local.x.filter.name"].startswith('invalid regular expression "["')
    assert by_path["$.local.x.filter.files[1]"].startswith('invalid regular expression "("')
    assert "$.local.x.filter.deep[0]" in by_path
    assert "$.local.x.filter.obj" in by_path
    assert "$.local.y.filter" in by_path


def test_nan_and_infinity_are_not_json(tmp_path):
    for token in ("NaN", "Infinity", "-Infinity"):
        path = write(
            tmp_path / f"{token}.json",
            '{"local": {"x": {"description": "d", '
            f'"event": "task_call", "shell": "true", "filter": {{"n": {token}}}}}}}}}',
        )
        loaded = read_hooks_file(path, scope="global")
        assert loaded.status == "invalid"
        assert loaded.issues[0].path == "$"
        assert "not valid JSON" in loaded.issues[0].reason


def test_hook_result_filters_are_restricted():
    problems = issues_of(
        {
            "local": {
                "a": hook(event="hook_result", filter={"originHook": "x"}),
                "b": hook(event="hook_result", filter={"outcome": "error"}),
                "c": hook(event="hook_result", filter={"code": "^1$"}),
                "d": hook(event="hook_result", filter={"outcome": "r.*"}),
                "e": hook(event="hook_result", filter={"hookRef": 3}),
            }
        }
    )
    assert [p for p, _ in problems] == [
        "$.local.a.filter.originHook",
        "$.local.b.filter.outcome",
        "$.local.c.filter.code",
        "$.local.d.filter.outcome",
        "$.local.e.filter.hookRef",
    ]
    assert_valid(
        {
            "local": {
                "ok": hook(
                    event="hook_result",
                    filter={
                        "hookRef": "^local/",
                        "outcome": ["block", "report"],
                        "code": [1, None],
                        "originEvent": "task_call",
                        "invocationId": [],
                    },
                )
            }
        }
    )


def test_presets_reject_duplicates_and_nesting_but_accept_dangling_references():
    problems = issues_of(
        {
            "local": {
                "dup": {"description": "d", "preset": ["local/a", "local/a"]},
                "bad-ref": {"description": "d", "preset": ["no-slash"]},
            }
        }
    )
    assert [p for p, _ in problems] == ["$.local.dup.preset[1]", '$.local["bad-ref"].preset[0]']
    nested = issues_of(
        {
            "local": {
                "inner": {"description": "d", "preset": ["local/a"]},
                "outer": {"description": "d", "preset": ["local/inner"]},
            }
        }
    )
    assert nested == [
        (
            "$.local.outer.preset[0]",
            'references Preset "local/inner"; nested Presets are not supported',
        )
    ]
    result = assert_valid({"local": {"p": {"description": "d", "preset": ["local/gone", "o/r/x"]}}})
    assert isinstance(result.entries[0], Preset)


def test_values_of_the_wrong_json_type_are_problems_not_crashes():
    problems = issues_of(
        {
            "local": {
                "a": hook(event=["task_call"]),
                "b": hook(action={"type": ["interrupt"], "outcome": "block"}),
                "c": hook(
                    action={
                        "type": "message",
                        "outcome": "block",
                        "message": "m",
                        "delivery": ["steer"],
                        "sendAs": ["user"],
                    }
                ),
                "d": hook(filter={"x": {"y": 1}}, description=None),
            }
        }
    )
    assert [p for p, _ in problems] == [
        "$.local.a.event",
        "$.local.b.action.type",
        "$.local.c.action.sendAs",
        "$.local.d.description",
        "$.local.d.filter.x",
    ]


def test_every_problem_is_reported_not_only_the_first():
    problems = issues_of(
        {"local": {"a": hook(shell=1), "b": hook(event="nope"), "c": hook(default=0)}}
    )
    assert len(problems) == 3


def test_duplicate_keys_are_rejected(tmp_path):
    path = write(tmp_path / "hooks.json", '{"local": {}, "local": {}}')
    loaded = read_hooks_file(path, scope="global")
    assert [(i.path, i.reason) for i in loaded.issues] == [("$", 'duplicate key "local"')]


# --------------------------------------------------------------------------- loading


@pytest.fixture
def layout(tmp_path):
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    home.mkdir()
    return home, project


def test_global_file_lives_in_looprail_home(layout, monkeypatch):
    home, project = layout
    write(home / "hooks.json", {"local": {"g": hook()}})
    monkeypatch.setenv("LOOPRAIL_HOME", str(home))
    hooks = load_native_hooks(project, trusted=False)
    assert [h.ref for h in hooks.hooks] == ["local/g"]
    assert hooks.warnings == ()


def test_project_entry_replaces_global_entry_whole_and_keeps_its_position(layout):
    home, project = layout
    write(
        home / "hooks.json",
        {
            "local": {
                "first": hook(when="test -f secret", shell="exit 1"),
                "second": hook(),
            }
        },
    )
    write(
        project / ".looprail" / "hooks.json",
        {"local": {"first": hook(event="plan:pre"), "third": hook()}},
    )
    hooks = load_native_hooks(project, trusted=True, home=home)
    assert [h.ref for h in hooks.hooks] == ["local/first", "local/second", "local/third"]
    first = hooks.hooks[0]
    assert (first.scope, first.entry.event, first.entry.when, first.entry.shell) == (
        "project",
        "plan:pre",
        None,
        "true",
    )
    assert [h.scope for h in hooks.hooks] == ["project", "global", "project"]


def test_untrusted_project_file_is_not_read_even_when_malformed(layout):
    home, project = layout
    write(home / "hooks.json", {"local": {"g": hook()}})
    write(project / ".looprail" / "hooks.json", "{ this is not json")
    calls = []

    def predicate(path: Path) -> bool:
        calls.append(path)
        return False

    hooks = load_native_hooks(project, trusted=predicate, home=home)
    assert calls == [project]
    assert [h.ref for h in hooks.hooks] == ["local/g"]
    assert [f.status for f in hooks.files] == ["valid", "untrusted"]
    (warning,) = hooks.warnings
    assert "not trusted" in warning


def test_a_trust_predicate_that_fails_means_untrusted(layout):
    home, project = layout
    write(project / ".looprail" / "hooks.json", {"local": {"p": hook()}})

    def broken(path: Path) -> bool:
        raise RuntimeError("trust store unavailable")

    hooks = load_native_hooks(project, trusted=broken, home=home)
    assert hooks.hooks == ()
    assert any("could not check project trust" in w for w in hooks.warnings)


def test_an_invalid_file_activates_none_of_its_hooks_and_warns_once(layout):
    home, project = layout
    write(home / "hooks.json", {"local": {"g": hook()}})
    write(
        project / ".looprail" / "hooks.json",
        {"local": {"fine": hook(), "broken": hook(event="nope"), "worse": hook(shell=False)}},
    )
    hooks = load_native_hooks(project, trusted=True, home=home)
    assert [h.ref for h in hooks.hooks] == ["local/g"]  # not even local/fine
    assert len(hooks.warnings) == 1
    warning = hooks.warnings[0]
    assert str(project / ".looprail" / "hooks.json") in warning
    assert "none of its hooks are active" in warning
    assert "$.local.broken.event" in warning and "1 more problem" in warning
    assert hooks.files[1].status == "invalid" and len(hooks.files[1].issues) == 2


def test_a_preset_naming_a_preset_of_the_other_file_invalidates_its_own_file(layout):
    home, project = layout
    write(
        home / "hooks.json", {"local": {"bundle": {"description": "d", "preset": []}, "g": hook()}}
    )
    write(
        project / ".looprail" / "hooks.json",
        {"local": {"p": hook(), "nest": {"description": "d", "preset": ["local/bundle"]}}},
    )
    hooks = load_native_hooks(project, trusted=True, home=home)
    assert [h.ref for h in hooks.hooks] == ["local/g"]
    assert [f.status for f in hooks.files] == ["valid", "invalid"]
    assert "nested Presets" in hooks.warnings[0]


def test_enablement_defaults_presets_and_explicit_selection(layout):
    home, project = layout
    write(
        home / "hooks.json",
        {
            "local": {
                "on": hook(),
                "off": hook(default=False),
                "member": hook(default=False),
                "bundle": {
                    "description": "d",
                    "preset": ["local/member", "local/on", "local/gone"],
                },
                "idle": {"description": "d", "preset": ["local/off"], "default": False},
            }
        },
    )
    hooks = load_native_hooks(project, trusted=False, home=home)
    assert [h.ref for h in hooks.hooks] == ["local/on", "local/member"]
    assert hooks.enabled_via == {"local/on": "default", "local/member": "local/bundle"}
    chosen = load_native_hooks(project, trusted=False, home=home, enabled=["local/idle"])
    assert [h.ref for h in chosen.hooks] == ["local/off"]
    nothing = load_native_hooks(project, trusted=False, home=home, enabled=[])
    assert nothing.hooks == ()


def test_missing_files_are_no_hooks_and_no_warnings(layout):
    home, project = layout
    hooks = load_native_hooks(project, trusted=True, home=home)
    assert (hooks.hooks, hooks.warnings) == ((), ())


def test_project_that_is_the_home_folder_reads_the_file_once(tmp_path):
    write(tmp_path / ".looprail" / "hooks.json", {"local": {"g": hook()}})
    hooks = load_native_hooks(tmp_path, trusted=True, home=tmp_path / ".looprail")
    assert [h.ref for h in hooks.hooks] == ["local/g"]
    assert len(hooks.files) == 1


# --------------------------------------------------------------------------- schema + events


def test_schema_agrees_with_the_catalog_and_the_validator():
    schema = hooks_json_schema()
    json.dumps(schema)
    hook_schema = schema["$defs"]["HookEntry"]
    assert hook_schema["properties"]["event"]["enum"] == list(EVENT_NAMES)
    assert hook_schema["additionalProperties"] is False
    variants = [
        schema["$defs"][one["$ref"].rsplit("/", 1)[1]]
        for one in hook_schema["properties"]["action"]["oneOf"]
    ]
    from looprail.hooks.native.actions import ACTION_MODELS

    assert {v["properties"]["type"]["const"]: set(v["properties"]) for v in variants} == {
        k: set(m.keys()) for k, m in ACTION_MODELS.items()
    }
    assert all(v["additionalProperties"] is False for v in variants)
    from looprail.hooks.native.document import HOOK_KEYS

    assert set(hook_schema["properties"]) == set(HOOK_KEYS)


def test_event_catalog_failure_kinds():
    assert len(EVENTS) == 17
    for name, spec in EVENTS.items():
        if name.endswith(":pre") or name == "task_call":
            assert spec.failure == "block", name
        else:
            assert spec.failure == "report", name


def test_task_candidate_carries_ids_plan_wave_files_and_content():
    candidate = task_candidate(
        "task_call",
        task_id="03-01-2",
        tracker_id="beads:GSD-42",
        name="Add login",
        plan="03-01",
        wave=2,
        files=["src/a.py"],
        content={"action": "do it"},
        resolved=True,
    )
    assert candidate["event"] == "task_call"
    assert candidate["files"] == ["src/a.py"]
    assert candidate["content"] == {"action": "do it"}
    with pytest.raises(ValueError, match="not a task event"):
        task_candidate("plan:pre", task_id="x", name="n", plan="p", wave=1)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- robustness


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(
        [
            "task_call",
            "hook_result",
            "pass",
            "block",
            "message",
            "steer",
            "user",
            "[",
            "true",
            "local/x",
            "nextTurn",
            "emit-custom-event",
        ]
    )
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "description",
                    "event",
                    "filter",
                    "when",
                    "shell",
                    "action",
                    "type",
                    "outcome",
                    "code",
                    "message",
                    "delivery",
                    "sendAs",
                    "triggerTurn",
                    "name",
                    "data",
                    "preset",
                    "default",
                    "timeoutMs",
                    "maxSelections",
                ]
            )
            | st.text(max_size=4),
            children,
            max_size=6,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=examples(300), deadline=None)
@given(entry=_json, event=st.sampled_from([*EVENT_NAMES, "nope"]))
def test_validation_never_crashes_and_always_names_a_path(entry, event):
    doc = {"local": {"x": entry, "y": {"description": "d", "event": event, "action": entry}}}
    result = validate_hooks_document(doc, file="hooks.json", scope="project")
    assert result.status in ("valid", "invalid")
    assert all(i.path.startswith("$") and i.reason and "\n" not in str(i) for i in result.issues)


def test_a_hooks_file_that_is_a_device_or_fifo_is_invalid_without_reading_it(tmp_path):
    # A cloned project can carry `.looprail/hooks.json` as a symlink to /dev/zero: reading it
    # whole would never end. Only regular files are read, and at most the size limit.
    import subprocess
    import sys

    project = tmp_path / "p"
    (project / ".looprail").mkdir(parents=True)
    (project / ".looprail" / "hooks.json").symlink_to("/dev/zero")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    probe = (
        "import sys\n"
        "from looprail.hooks.native.parsing import read_hooks_file\n"
        "for path in sys.argv[1:]:\n"
        "    f = read_hooks_file(path, scope='project')\n"
        "    print(f.status, f.issues[0].reason)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(project / ".looprail" / "hooks.json"), str(fifo)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "invalid cannot read (not a regular file)",
        "invalid cannot read (not a regular file)",
    ]


def test_an_oversized_hooks_file_is_refused(tmp_path):
    path = tmp_path / "hooks.json"
    path.write_bytes(b" " * ((1 << 20) + 1))
    result = read_hooks_file(path, scope="global")
    assert result.status == "invalid"
    assert "larger than" in result.issues[0].reason


def test_project_file_bytes_are_checked_against_consent_as_read(tmp_path):
    """Consent is checked on the exact bytes parsed: a file swapped after the trust check
    (here: an `accept` that refuses what was read) is never loaded."""
    import json as _json

    from looprail.hooks.native import load_native_hooks

    project = tmp_path / "p"
    (project / ".looprail").mkdir(parents=True)
    (project / ".looprail" / "hooks.json").write_text(
        _json.dumps({"local": {"h": {"description": "d", "event": "plan:pre", "shell": "true"}}})
    )
    home = tmp_path / "home"
    seen = []
    ok = load_native_hooks(
        project, trusted=True, home=home, accept_project_bytes=lambda raw: seen.append(raw) or True
    )
    assert [h.name for h in ok.hooks] == ["h"] and seen and b'"plan:pre"' in seen[0]
    refused = load_native_hooks(
        project, trusted=True, home=home, accept_project_bytes=lambda raw: False
    )
    assert refused.hooks == () and any("not trusted" in w for w in refused.warnings)
