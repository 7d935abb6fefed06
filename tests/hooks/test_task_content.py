"""The `taskContentResolver` exit/result matrix, row by row, with real resolver processes."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from looprail.hooks.manifest import Invoke, TaskContentResolver
from looprail.hooks.task_content import (
    EMPTY,
    NO_RESOLVER,
    NOT_APPLICABLE,
    ResolvedContent,
    TaskContentError,
    TaskContentResult,
    build_argv,
    resolve_task_content,
    split_tracker_id,
    unloadable_resolvers,
)


def resolver_script(tmp_path: Path, body: str, name: str = "resolver.py") -> Path:
    script = tmp_path / name
    script.write_text("import json, os, sys, time\n" + textwrap.dedent(body))
    return script


def declare(
    script: Path | str,
    *,
    prefix: str = "beads",
    args: list[str] | None = None,
    timeout_ms: int = 20_000,
) -> TaskContentResolver:
    return TaskContentResolver(
        trackerPrefix=prefix,
        invoke=Invoke(
            binary=sys.executable,
            args=[str(script), *(args if args is not None else ["{{id}}"])],
            timeoutMs=timeout_ms,
        ),
    )


def printing(tmp_path: Path, value: object, *, prefix: str = "beads") -> TaskContentResolver:
    script = resolver_script(tmp_path, f"print(json.dumps({value!r}))\n")
    return declare(script, prefix=prefix)


def resolve(tracker_id: str, *resolvers: tuple[str, TaskContentResolver], cwd: Path):
    return resolve_task_content(tracker_id, list(resolvers), cwd=cwd)


# ── the four results ──────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("tracker_id", ["beads", ":GSD-1", "beads:", "", ":"])
def test_not_applicable_runs_nothing(tmp_path, tracker_id):
    script = resolver_script(tmp_path, "open('RAN', 'w').close()\n")
    result = resolve(tracker_id, ("beads", declare(script)), cwd=tmp_path)
    assert result is NOT_APPLICABLE
    assert result.to_json() == {"resolved": False}
    assert result.outcome == "not-applicable"
    assert not (tmp_path / "RAN").exists()


def test_no_resolver_for_the_prefix(tmp_path):
    script = resolver_script(tmp_path, "open('RAN', 'w').close()\n")
    result = resolve("jira:ABC-1", ("beads", declare(script)), cwd=tmp_path)
    assert result.to_json() == {"resolved": False, "reason": "no-resolver"}
    assert resolve("jira:ABC-1", cwd=tmp_path) is NO_RESOLVER
    assert not (tmp_path / "RAN").exists()


def test_resolved_maps_every_field(tmp_path):
    out = {
        "description": "Add the login form",
        "verify": "pytest tests/test_login.py",
        "acceptance_criteria": ["form renders", "errors shown"],
        "read_first": ["src/app.py"],
        "done": "login works",
        "priority": 1,  # unknown fields are ignored
    }
    result = resolve("beads:GSD-42", ("beads", printing(tmp_path, out)), cwd=tmp_path)
    assert result.to_json() == {
        "resolved": True,
        "content": {
            "action": "Add the login form",
            "verify": "pytest tests/test_login.py",
            "acceptanceCriteria": ["form renders", "errors shown"],
            "readFirst": ["src/app.py"],
            "done": "login works",
        },
    }
    assert result.outcome == "resolved"


def test_resolved_with_only_a_description(tmp_path):
    out = {"description": "just do it", "verify": None}
    result = resolve("beads:1", ("beads", printing(tmp_path, out)), cwd=tmp_path)
    assert result.to_json()["content"] == {
        "action": "just do it",
        "verify": "",
        "acceptanceCriteria": [],
        "readFirst": [],
        "done": "",
    }


@pytest.mark.parametrize(
    "out",
    [
        {"description": ""},
        {"description": "   \n\t "},
        {"verify": "x", "acceptance_criteria": ["a"]},
        {"description": None},
        {},
    ],
)
def test_empty_description_is_the_only_fallback(tmp_path, out):
    result = resolve("beads:GSD-1", ("beads", printing(tmp_path, out)), cwd=tmp_path)
    assert result is EMPTY
    assert result.to_json() == {"resolved": False, "reason": "empty"}


# ── every failure is an error ─────────────────────────────────────────────────────────────────


def test_ambiguous_prefix_is_an_error_naming_the_capabilities(tmp_path):
    script = resolver_script(tmp_path, "open('RAN', 'w').close()\n")
    with pytest.raises(TaskContentError) as info:
        resolve(
            "beads:1", ("beads", declare(script)), ("beads-fork", declare(script)), cwd=tmp_path
        )
    message = str(info.value)
    assert "ambiguous" in message and "beads, beads-fork" in message
    assert info.value.cap_ids == ["beads", "beads-fork"]
    assert not (tmp_path / "RAN").exists()


def test_non_zero_exit_is_an_error_with_the_stderr_tail(tmp_path):
    script = resolver_script(tmp_path, "print('bd: no such issue', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(TaskContentError) as info:
        resolve("beads:GSD-9", ("beads", declare(script)), cwd=tmp_path)
    message = str(info.value)
    assert message.startswith("task content for tracker-id 'beads:GSD-9' (prefix 'beads', ")
    assert "capability beads" in message
    assert "exited 3" in message
    assert message.endswith("stderr: bd: no such issue")
    assert info.value.stderr_tail.strip() == "bd: no such issue"


def test_non_zero_exit_with_valid_json_is_still_an_error(tmp_path):
    script = resolver_script(tmp_path, "print(json.dumps({'description': 'x'}))\nsys.exit(1)\n")
    with pytest.raises(TaskContentError, match="exited 1"):
        resolve("beads:1", ("beads", declare(script)), cwd=tmp_path)


def test_missing_binary_is_an_error(tmp_path):
    resolver = TaskContentResolver(
        trackerPrefix="beads",
        invoke=Invoke(binary="no-such-resolver-looprail", args=["{{id}}"], timeoutMs=5000),
    )
    with pytest.raises(TaskContentError, match="could not start"):
        resolve("beads:1", ("beads", resolver), cwd=tmp_path)


def test_timeout_is_an_error(tmp_path):
    script = resolver_script(tmp_path, "time.sleep(30)\n")
    with pytest.raises(TaskContentError, match="timed out after 300ms"):
        resolve("beads:1", ("beads", declare(script, timeout_ms=300)), cwd=tmp_path)


@pytest.mark.parametrize(
    ("stdout", "needle"),
    [
        ("", "stdout is empty"),
        ("not json {", "not valid JSON"),
        ("[]", "JSON array, not an object"),
        ("null", "JSON null, not an object"),
        ('"description"', "JSON string, not an object"),
        ("42", "JSON number, not an object"),
        ('{"description": 5}', "'description' must be a string, got number"),
        ('{"description": "x", "verify": []}', "'verify' must be a string, got array"),
        ('{"description": "x", "acceptance_criteria": "a"}', "must be an array of strings"),
        ('{"description": "x", "read_first": [1]}', "must be an array of strings"),
        ("[" * 100_000, "nested too deeply"),  # a RecursionError must not escape as a traceback
        ('{"description": NaN}', "not valid JSON"),
    ],
)
def test_malformed_output_is_an_error(tmp_path, stdout, needle):
    script = resolver_script(tmp_path, f"sys.stdout.write({stdout!r})\n")
    with pytest.raises(TaskContentError) as info:
        resolve("beads:1", ("beads", declare(script)), cwd=tmp_path)
    assert "malformed output" in str(info.value)
    assert needle in str(info.value)


def test_error_messages_are_one_line_and_escaped(tmp_path):
    script = resolver_script(
        tmp_path, "sys.stderr.write('line one\\nline two\\x1b[31m red\\r\\n')\nsys.exit(2)\n"
    )
    with pytest.raises(TaskContentError) as info:
        resolve("beads:evil\nid", ("beads", declare(script)), cwd=tmp_path)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message and "\x1b" not in message
    assert "line one\\nline two\\x1b[31m red" in message
    assert "'beads:evil\\nid'" in message


def test_only_the_last_2000_stderr_characters_are_kept(tmp_path):
    script = resolver_script(
        tmp_path, "sys.stderr.write('HEAD' + 'x' * 5000 + 'TAIL')\nsys.exit(1)\n"
    )
    with pytest.raises(TaskContentError) as info:
        resolve("beads:1", ("beads", declare(script)), cwd=tmp_path)
    assert len(info.value.stderr_tail) == 2000
    assert "HEAD" not in str(info.value) and str(info.value).endswith("TAIL")


def test_a_capability_that_failed_to_load_is_never_no_resolver(tmp_path):
    script = resolver_script(tmp_path, "open('RAN', 'w').close()\n")
    with pytest.raises(TaskContentError, match="failed to load: bad version"):
        resolve_task_content(
            "beads:1",
            [("other", declare(script, prefix="other"))],
            cwd=tmp_path,
            unloadable=[("beads", "beads", "failed to load: bad version")],
        )
    assert not (tmp_path / "RAN").exists()


def test_unloadable_resolvers_reads_failed_manifests(tmp_path):
    from looprail.errors import Issue
    from looprail.hooks.capset import FailedCapability

    def Failed(cap_id: str, body: str) -> FailedCapability:
        file = tmp_path / f"{cap_id}.json"
        file.write_text(body)
        return FailedCapability(
            cap_id, str(file), "project", (Issue(str(file), "$.version", "not semver"),)
        )

    failed = [
        Failed("beads", json.dumps({"taskContentResolver": {"trackerPrefix": "beads"}})),
        Failed("plain", json.dumps({"id": "plain"})),
        Failed("broken", "{not json"),
    ]
    [(cap_id, prefix, reason)] = unloadable_resolvers(failed)
    assert (cap_id, prefix) == ("beads", "beads")
    assert reason.endswith("$.version: not semver")


# ── invocation details ────────────────────────────────────────────────────────────────────────


def echoing_argv(tmp_path: Path) -> Path:
    return resolver_script(
        tmp_path, "print(json.dumps({'description': json.dumps(sys.argv[1:])}))\n"
    )


def test_id_replaces_whole_elements_only(tmp_path):
    resolver = declare(
        echoing_argv(tmp_path),
        args=["show", "{{id}}", "--id={{id}}", "prefix-{{id}}", "{{id}}", "{{ id }}"],
    )
    result = resolve("beads:GSD-7", ("beads", resolver), cwd=tmp_path)
    argv = json.loads(result.content.action)
    assert argv == ["show", "GSD-7", "--id={{id}}", "prefix-{{id}}", "GSD-7", "{{ id }}"]


def test_split_is_on_the_first_colon(tmp_path):
    result = resolve("beads:issue:GSD-1", ("beads", declare(echoing_argv(tmp_path))), cwd=tmp_path)
    assert json.loads(result.content.action) == ["issue:GSD-1"]
    assert split_tracker_id("beads:issue:GSD-1") == ("beads", "issue:GSD-1")
    assert split_tracker_id("a:b") == ("a", "b")
    assert split_tracker_id("nocolon") is None


def test_the_id_is_one_argument_never_shell_text(tmp_path):
    result = resolve(
        "beads:$(touch PWNED); `touch PWNED2` 'x' \"y\"",
        ("beads", declare(echoing_argv(tmp_path))),
        cwd=tmp_path,
    )
    assert json.loads(result.content.action) == ["$(touch PWNED); `touch PWNED2` 'x' \"y\""]
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()


def test_runs_in_cwd_with_stdin_closed(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    script = resolver_script(
        tmp_path, "print(json.dumps({'description': os.getcwd() + '|' + repr(sys.stdin.read())}))\n"
    )
    result = resolve("beads:1", ("beads", declare(script)), cwd=project)
    where, stdin = result.content.action.split("|")
    assert Path(where).resolve() == project.resolve()
    assert stdin == "''"


def test_stderr_on_success_is_ignored(tmp_path):
    script = resolver_script(
        tmp_path,
        "print('warning: cache stale', file=sys.stderr)\n"
        "print(json.dumps({'description': 'ok'}))\n",
    )
    result = resolve("beads:1", ("beads", declare(script)), cwd=tmp_path)
    assert result.resolved is True and result.content.action == "ok"


def test_build_argv():
    invoke = Invoke(binary="bd", args=["show", "{{id}}", "--json"], timeoutMs=1000)
    assert build_argv(invoke, "GSD-1") == ["bd", "show", "GSD-1", "--json"]


def test_result_model_rejects_inconsistent_shapes():
    with pytest.raises(ValueError):
        TaskContentResult(resolved=True)
    with pytest.raises(ValueError):
        TaskContentResult(resolved=False, content=ResolvedContent(action="x"))
    with pytest.raises(ValueError):
        TaskContentResult(resolved=False, reason="other")


@pytest.mark.parametrize("where", ["tracker-id", "binary", "args"])
def test_a_nul_byte_in_the_argv_is_an_error_not_a_traceback(tmp_path, where):
    script = resolver_script(tmp_path, "open('RAN', 'w').close()\n")
    resolver = declare(script, args=["{{id}}", "a\0b"] if where == "args" else None)
    if where == "binary":
        resolver = TaskContentResolver(
            trackerPrefix="beads",
            invoke=Invoke(binary="py\0thon", args=["{{id}}"], timeoutMs=20_000),
        )
    tracker_id = "beads:G\0SD-1" if where == "tracker-id" else "beads:GSD-1"
    with pytest.raises(TaskContentError, match="NUL byte") as info:
        resolve(tracker_id, ("beads", resolver), cwd=tmp_path)
    assert "\0" not in str(info.value)
    assert not (tmp_path / "RAN").exists()
