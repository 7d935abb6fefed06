"""Gate check evaluation: predicate kinds with real processes and files, the query grammar, and
the verdict/error split of the two-step contract."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looprail.hooks.gates.checks import (
    COMMAND_GRAMMAR,
    EXIT_UNAVAILABLE,
    CheckContext,
    CheckError,
    Verdict,
    evaluate_check,
    evaluate_predicate,
    evaluate_predicate_json,
    validate_query,
)
from looprail.hooks.gates.predicates import json_equal
from looprail.plans.frontmatter import read_frontmatter
from looprail.runtime.base import BaseRuntime, DispatchContext, Outcome, Request


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".planning" / "phases" / "01-setup").mkdir(parents=True)
    return tmp_path


@pytest.fixture
def ctx(project: Path) -> CheckContext:
    return CheckContext(
        project=project,
        phase_number="01",
        phase_dir=Path(".planning/phases/01-setup"),
        config={"workflow": {"security_enforcement": True, "level": 2}, "flat.key": "x"},
        phase_req_ids="REQ-1,REQ-2",
    )


def predicate(ctx: CheckContext, **fields: Any):
    return evaluate_check({"predicate": fields}, ctx)


class FakeRuntime(BaseRuntime):
    """Records every request (its kind, words or verdict ask, context); answers with a fixed
    Outcome."""

    def __init__(self, outcome: Outcome | None = None):
        super().__init__()
        self.outcome = outcome or Outcome.succeeded(data={"block": False, "message": "fine"})
        self.calls: list[tuple[str, Any, Any]] = []

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        asked = request.verdict.model_dump() if request.verdict else list(request.words or ())
        self.calls.append((request.kind, asked, ctx))
        return self.outcome


# ── command-exit-zero ─────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("code", [1, 2, 127])
def test_command_exit_zero_non_zero_blocks_with_the_code(ctx, code):
    result = predicate(ctx, kind="command-exit-zero", command=f"echo why >&2; exit {code}")
    assert isinstance(result, Verdict)
    assert result.block is True
    assert result.message == f"command exited {code}: why"
    assert result.details == {"kind": "command-exit-zero", "exitCode": code}


def test_command_exit_zero_exit_zero_passes(ctx):
    result = predicate(ctx, kind="command-exit-zero", command="true")
    assert result == Verdict(
        False, "command exited 0", {"kind": "command-exit-zero", "exitCode": 0}
    )


def test_command_not_found_is_a_block_not_an_error(ctx):
    result = predicate(ctx, kind="command-exit-zero", command="no-such-command-looprail-x")
    assert isinstance(result, Verdict) and result.block
    assert result.message.startswith("command exited 127")


def test_command_exit_zero_timeout_blocks(ctx):
    result = predicate(ctx, kind="command-exit-zero", command="sleep 20", timeout=0.3)
    assert isinstance(result, Verdict) and result.block
    assert result.message == "command timed out after 0.3s"
    assert result.details["timedOut"] is True


def test_command_runs_in_the_project(ctx, project):
    result = predicate(ctx, kind="command-exit-zero", command="pwd > where.txt")
    assert result.block is False
    assert Path((project / "where.txt").read_text().strip()).resolve() == project.resolve()


def test_phase_values_arrive_as_environment_variables(ctx, project):
    command = 'printf "%s|%s|%s" "${PHASE_NUMBER}" "$PHASE_DIR" "${PHASE_REQ_IDS}" > env.txt'
    assert predicate(ctx, kind="command-exit-zero", command=command).block is False
    number, phase_dir, req_ids = (project / "env.txt").read_text().split("|")
    assert number == "01"
    assert Path(phase_dir) == project / ".planning/phases/01-setup"
    assert req_ids == "REQ-1,REQ-2"


def test_phase_values_are_never_spliced_into_the_command(project):
    hostile = "'; touch SENTINEL; echo '"
    ctx = CheckContext(
        project=project,
        phase_number='1"; touch SENTINEL2; echo "',
        phase_dir=None,
        config=None,
        phase_req_ids=hostile,
    )
    command = (
        'echo ${PHASE_REQ_IDS} > req.txt; echo "${PHASE_NUMBER}" > num.txt; '
        "echo '${PHASE_NUMBER}' > literal.txt"
    )
    assert predicate(ctx, kind="command-exit-zero", command=command).block is False
    assert not (project / "SENTINEL").exists()
    assert not (project / "SENTINEL2").exists()
    assert (project / "req.txt").read_text().strip() == hostile.strip()
    assert (project / "num.txt").read_text().strip() == ctx.phase_number
    # The command text is not rewritten: a single-quoted placeholder stays literal.
    assert (project / "literal.txt").read_text().strip() == "${PHASE_NUMBER}"


def test_a_command_that_cannot_start_is_an_error(tmp_path):
    ctx = CheckContext(project=tmp_path / "missing", phase_number="1")
    result = evaluate_predicate({"kind": "command-exit-zero", "command": "true"}, ctx)
    assert isinstance(result, CheckError)
    assert result.unavailable is True
    assert result.reason.startswith("could not start the command")


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({}, "'command' must be a non-empty string (missing)"),
        ({"command": ""}, "'command' must be a non-empty string (string)"),
        ({"command": ["ls"]}, "'command' must be a non-empty string (array)"),
        ({"command": "x" * 4097}, "'command' is longer than 4096 characters"),
        ({"command": "true", "timeout": 0}, "'timeout' must be a positive number of seconds"),
        ({"command": "true", "timeout": "5"}, "'timeout' must be a positive number of seconds"),
        ({"command": "true", "timeout": True}, "'timeout' must be a positive number of seconds"),
    ],
)
def test_malformed_command_predicate_is_an_error(ctx, project, fields, reason):
    result = predicate(ctx, kind="command-exit-zero", **fields)
    assert result == CheckError(f"check.predicate (command-exit-zero): {reason}")


# ── unknown and malformed predicates ──────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"kind": "command-exists", "command": "ls"}, "unknown kind 'command-exists'"),
        ({"command": "true"}, "check.predicate.kind must be a non-empty string"),
        ({"kind": 3}, "check.predicate.kind must be a non-empty string"),
        ([], "check.predicate must be an object, got array"),
        (None, "check.predicate must be an object, got null"),
    ],
)
def test_unknown_or_malformed_predicate_is_an_error_never_a_pass(ctx, value, reason):
    result = evaluate_check({"predicate": value}, ctx)
    assert isinstance(result, CheckError)
    assert reason in result.reason
    assert result.unavailable is False


def test_predicate_json_text(ctx):
    assert evaluate_predicate_json('{"kind": "artifact-exists", "artifact": "x"}', ctx).block
    assert "not valid JSON" in evaluate_predicate_json("{kind:", ctx).reason
    assert evaluate_predicate_json("[1]", ctx).reason.endswith("got array")
    # Hostile depth is a malformed predicate, not a RecursionError traceback.
    assert "nested too deeply" in evaluate_predicate_json("[" * 100_000, ctx).reason
    # Not JSON, and ambiguous JSON, are malformed (as they are in a manifest), never a verdict.
    nan = '{"kind": "config-equals", "key": "k", "equals": NaN}'
    assert "not valid JSON" in evaluate_predicate_json(nan, ctx).reason
    twice = '{"kind": "command-exit-zero", "kind": "artifact-exists", "artifact": "x"}'
    assert 'duplicate key "kind"' in evaluate_predicate_json(twice, ctx).reason
    # Parses, but comparing or printing it recurses past the interpreter's usual limit (pinned
    # here: a library in the process may have raised it).
    deep = "[" * 900 + "]" * 900
    text = '{"kind": "config-equals", "key": "k", "equals": ' + deep + "}"
    deep_ctx = CheckContext(project=ctx.project, config={"k": json.loads(deep)})
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        assert "nested too deeply" in evaluate_predicate_json(text, deep_ctx).reason
    finally:
        sys.setrecursionlimit(limit)
    assert evaluate_predicate('{"kind": "config-equals", "key": "k", "equals": 1}', ctx).block


# ── artifact-exists ───────────────────────────────────────────────────────────────────────────


def test_artifact_exists_in_the_phase_dir_then_the_project_root(ctx, project):
    phase_dir = project / ".planning/phases/01-setup"
    assert predicate(ctx, kind="artifact-exists", artifact="CONTEXT.md").block is True
    (project / "CONTEXT.md").write_text("root")
    found = predicate(ctx, kind="artifact-exists", artifact="CONTEXT.md")
    assert found.block is False and str(project / "CONTEXT.md") in found.message
    (phase_dir / "01-CONTEXT.md").write_text("phase")
    found = predicate(ctx, kind="artifact-exists", artifact="CONTEXT.md")
    assert found.block is False and "01-CONTEXT.md" in found.message


def test_artifact_exists_nested_path_and_missing_message(ctx, project):
    (project / "docs").mkdir()
    (project / "docs" / "API.md").write_text("x")
    assert predicate(ctx, kind="artifact-exists", artifact="docs/API.md").block is False
    missing = predicate(ctx, kind="artifact-exists", artifact="docs/NONE.md")
    assert missing.block is True
    assert missing.message.startswith("artifact docs/NONE.md not found in ")
    assert missing.details == {"kind": "artifact-exists", "artifactNotFound": True}


@pytest.mark.parametrize("artifact", ["/etc/passwd", "../outside.md", "a/../../b", "a\\b", ""])
def test_artifact_paths_must_stay_relative(ctx, artifact):
    result = predicate(ctx, kind="artifact-exists", artifact=artifact)
    assert isinstance(result, CheckError)
    assert "'artifact'" in result.reason


# ── artifact-frontmatter-equals ───────────────────────────────────────────────────────────────


def write_security(project: Path, text: str, name: str = "01-SECURITY.md") -> None:
    (project / ".planning/phases/01-setup" / name).write_text(text)


SECURITY = {
    "kind": "artifact-frontmatter-equals",
    "artifact": "SECURITY.md",
    "field": "threats_open",
}


def test_frontmatter_match_passes_as_the_reference_compares(ctx, project):
    write_security(project, "---\nthreats_open: 0\n---\n# Security\n")
    result = predicate(ctx, **SECURITY, equals=0)
    assert result == Verdict(
        False,
        'frontmatter field "threats_open" matches expected value (0)',
        {"kind": "artifact-frontmatter-equals", "match": True},
    )
    assert predicate(ctx, **SECURITY, equals="0").block is False  # text against text
    assert predicate(ctx, **SECURITY, equals=0.0).block is False  # JSON 0.0 is the number 0


def test_frontmatter_mismatch_blocks(ctx, project):
    write_security(project, "---\nthreats_open: 2\n---\n")
    result = predicate(ctx, **SECURITY, equals=0)
    assert result.block is True
    assert result.message == 'frontmatter field "threats_open" in 01-SECURITY.md is 2, expected 0'
    assert result.details["actual"] == "2"  # the reference's reader keeps scalars as text


def test_frontmatter_missing_artifact_blocks(ctx):
    result = predicate(ctx, **SECURITY, equals=0)
    assert result.block is True
    assert result.details == {"kind": "artifact-frontmatter-equals", "artifactNotFound": True}


def test_frontmatter_only_looks_in_the_phase_dir(ctx, project):
    (project / "SECURITY.md").write_text("---\nthreats_open: 0\n---\n")
    assert predicate(ctx, **SECURITY, equals=0).block is True


def test_frontmatter_exact_name_and_project_root_without_phase(project):
    (project / "SECURITY.md").write_text("---\nthreats_open: 0\n---\n")
    ctx = CheckContext(project=project, phase_number="")
    assert predicate(ctx, **SECURITY, equals=0).block is False


# The value column is what the reference's `check predicate` answers (verified against it; the
# differential test in test_gsd_gates.py re-checks these when LOOPRAIL_REFERENCE is set).
@pytest.mark.parametrize(
    ("value", "blocks"),
    [
        ("0", False),
        ('"0"', False),
        ("'0'", False),
        ("0.0", True),
        ("00", True),
        ("+0", True),
        ("-0", True),
        ("0x0", True),
        ("0 # c", True),
        ("false", True),
        ("null", True),
        ("", True),
        ("[0]", True),
    ],
)
def test_frontmatter_values_compare_as_text(ctx, project, value, blocks):
    write_security(project, f"---\nthreats_open: {value}\n---\n")
    result = predicate(ctx, **SECURITY, equals=0)
    assert isinstance(result, Verdict) and result.block is blocks


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("# no frontmatter\n", 'field "threats_open" in 01-SECURITY.md is undefined'),
        ("---\nother: 1\n---\n", "is undefined"),
        ("---\nthreats_open: 0\n", "is undefined"),  # not closed: no frontmatter
        ("---\n- a list\n---\n", "is undefined"),
        ("---\nthreats_open: " + "[" * 5000 + "\n---\n", "expected 0"),
        ("\xff\xfe---\n", "is undefined"),
    ],
)
def test_frontmatter_problems_fail_closed(ctx, project, text, needle):
    write_security(project, text)
    result = predicate(ctx, **SECURITY, equals=0)
    assert isinstance(result, Verdict) and result.block is True
    assert needle in result.message


def test_frontmatter_values_compare_by_their_text(ctx, project):
    write_security(
        project,
        "---\nok: true\nwhen: 2024-05-01\nlist: [a, 1]\nnested:\n  a: 1\nthreats_open: 0\n---\n",
    )
    base = {"kind": "artifact-frontmatter-equals", "artifact": "SECURITY.md"}
    assert predicate(ctx, **base, field="ok", equals=True).block is False
    assert predicate(ctx, **base, field="ok", equals="true").block is False
    assert predicate(ctx, **base, field="ok", equals=1).block is True
    assert predicate(ctx, **base, field="when", equals="2024-05-01").block is False
    assert predicate(ctx, **base, field="list", equals=["a", "1"]).block is False
    assert predicate(ctx, **base, field="nested", equals={"a": "1"}).block is False
    # a literal key only, as the reference reads it: a dotted field is never found
    assert predicate(ctx, **base, field="nested.a", equals="1").block is True


@pytest.mark.parametrize(
    "fields",
    [
        {"artifact": "SECURITY.md", "field": "x"},
        {"artifact": "SECURITY.md", "equals": 0},
        {"field": "x", "equals": 0},
        {"artifact": 5, "field": "x", "equals": 0},
    ],
)
def test_malformed_frontmatter_predicate_is_an_error(ctx, fields):
    assert isinstance(predicate(ctx, kind="artifact-frontmatter-equals", **fields), CheckError)


@pytest.mark.parametrize("artifact", ["../SECURITY.md", "sub/SECURITY.md", "/etc/passwd", ".."])
def test_frontmatter_artifact_that_is_not_a_file_name_is_not_found(ctx, project, artifact):
    (project / "SECURITY.md").write_text("---\nthreats_open: 0\n---\n")
    result = predicate(ctx, **{**SECURITY, "artifact": artifact}, equals=0)
    assert result.block is True and result.details["artifactNotFound"] is True


def test_frontmatter_prefers_exact_then_first_suffixed(ctx, project):
    write_security(project, "---\nthreats_open: 1\n---\n", "02-SECURITY.md")
    write_security(project, "---\nthreats_open: 0\n---\n", "01-SECURITY.md")
    assert predicate(ctx, **SECURITY, equals=0).block is False
    write_security(project, "---\nthreats_open: 3\n---\n", "SECURITY.md")
    assert "is 3" in predicate(ctx, **SECURITY, equals=0).message


def test_read_frontmatter():
    assert read_frontmatter("---\na: 1\n---\nbody") == {"a": 1}
    assert read_frontmatter("\ufeff---\na: 1\n...\n") == {"a": 1}
    assert read_frontmatter("---\n---\n") == {}
    assert read_frontmatter("body") == {}


# ── config-equals ─────────────────────────────────────────────────────────────────────────────


def test_config_equals(ctx):
    on = {"kind": "config-equals", "key": "workflow.security_enforcement"}
    assert predicate(ctx, **on, equals=True).block is False
    assert predicate(ctx, **on, equals=False).block is True
    assert predicate(ctx, kind="config-equals", key="workflow.level", equals=2.0).block is False
    # a literal dotted key is not a path (as the reference resolves `when`)
    assert predicate(ctx, kind="config-equals", key="flat.key", equals="x").block is True
    missing = predicate(ctx, kind="config-equals", key="workflow.absent", equals=False)
    assert missing.block is True
    assert missing.message == "config key workflow.absent is not set, expected false"
    assert isinstance(predicate(ctx, kind="config-equals", key="k"), CheckError)
    assert isinstance(predicate(ctx, kind="config-equals", equals=1), CheckError)


def test_config_equals_without_a_config_blocks(project):
    ctx = CheckContext(project=project, phase_number="1", config=None)
    assert predicate(ctx, kind="config-equals", key="a", equals=None).block is True


def test_json_equal():
    assert json_equal(0, 0.0) and json_equal(None, None) and json_equal({"a": [1]}, {"a": [1.0]})
    assert not json_equal(True, 1) and not json_equal(0, False) and not json_equal("0", 0)
    assert not json_equal(None, 0) and not json_equal([1], [1, 2]) and not json_equal({}, [])


# ── check shape ───────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "check",
    [
        {},
        {"query": "a", "predicate": {"kind": "config-equals"}},
        {"message": "only a message"},
    ],
)
def test_a_check_needs_exactly_one_shape(ctx, check):
    runtime = FakeRuntime()
    result = evaluate_check(check, ctx, runtime)
    assert isinstance(result, CheckError)
    assert "exactly one of query, predicate, agentVerdict" in result.reason
    assert runtime.calls == []


def test_a_check_is_evaluated_in_its_compiled_form_only(ctx):
    # One shape: the machine runs the compiled gate hook's mapping (the manifest's JSON); the
    # pydantic model is refused, not converted on the side.
    from looprail.hooks.manifest import Check

    check = Check(predicate={"kind": "config-equals", "key": "workflow.level", "equals": 2})
    assert evaluate_check(check.model_dump(exclude_none=True), ctx).block is False
    refused = evaluate_check(check, ctx)
    assert isinstance(refused, CheckError) and "check must be an object" in refused.reason


# ── query: grammar first, then the runtime ────────────────────────────────────────────────────

REFUSED = [
    "ui..plan-gate",  # a dot only joins two words: `..` can never reach a file name
    ".ui",
    "ui.",
    "ui. plan",
    "ui.Plan",
    "ui._x",
    "verify 'x'",
    'verify "x"',
    "verify; rm -rf /",
    "verify `id`",
    "verify $(id)",
    "verify\nid",
    "verify\n",
    "-verify",
    "verify -x",
    "Verify",
    "verify  drift",
    " verify",
    "verify ",
    "",
    "9verify",
    "vérify",
]


@pytest.mark.parametrize("query", REFUSED)
def test_refused_queries_never_reach_the_runtime(ctx, query):
    runtime = FakeRuntime()
    result = evaluate_check({"query": query}, ctx, runtime)
    assert isinstance(result, CheckError)
    assert result.reason.startswith("check.query fails the grammar (words [a-z][a-z0-9-]*")
    assert "\n" not in result.reason
    assert runtime.calls == []
    assert validate_query(query) is False


@pytest.mark.parametrize(
    "query",
    [
        "ui.plan-gate",
        "ui.safety-gate",
        "api-coverage.verify-pre",
        "verify.schema-drift",
        "verify.codebase-drift",
        "gap-analysis.plan-post",
        "tdd.review-checkpoint",
        "verify schema-drift",
        "a.b.c d.e",
    ],
)
def test_dotted_queries_go_to_the_runtime_as_words(ctx, query):
    runtime = FakeRuntime()
    result = evaluate_check({"query": query}, ctx, runtime)
    assert isinstance(result, Verdict), result
    assert validate_query(query) is True
    assert [c[1] for c in runtime.calls] == [query.split(" ")]


@given(st.text(alphabet="ab.-_ /\n;$`'\"Z9", max_size=12))
def test_query_grammar_property(text):
    """Whatever passes is lowercase dotted words with single spaces: no `..`, no path
    separator, no leading dot or hyphen, no shell character, nothing after a newline."""
    if validate_query(text):
        for word in text.split(" "):
            assert word and word[0].isalpha() and not word.endswith(".")
            assert ".." not in word and "/" not in word and not word.startswith("-")
            assert all(part and part[0].isalpha() for part in word.split("."))
        assert set(text) <= set("ab.- 9") and "\n" not in text


@pytest.mark.parametrize("value", [None, 5, ["verify"], {"q": 1}])
def test_non_string_queries_are_refused(ctx, value):
    runtime = FakeRuntime()
    result = evaluate_check({"query": value}, ctx, runtime)
    assert isinstance(result, CheckError)
    assert result.reason.startswith("check.query must be a string")
    assert runtime.calls == []


def test_a_valid_query_goes_to_the_runtime_as_words(ctx, project):
    runtime = FakeRuntime()
    result = evaluate_check({"query": "verify schema-drift"}, ctx, runtime)
    assert result == Verdict(False, "fine")
    [(kind, words, dispatch)] = runtime.calls
    assert (kind, words) == ("query", ["verify", "schema-drift"])
    assert isinstance(dispatch, DispatchContext)
    assert dispatch.phase_number == "01"
    assert dispatch.phase_dir == project / ".planning/phases/01-setup"


def test_the_callers_dispatch_context_is_passed_through(ctx, project):
    runtime = FakeRuntime()
    mine = DispatchContext(project=project, phase_number="7", point="ship:pre", cap_id="sec")
    evaluate_check({"query": "a"}, ctx, runtime, runtime_ctx=mine)
    assert runtime.calls[0][2] is mine


def test_command_grammar_is_anchored_at_the_very_end():
    assert COMMAND_GRAMMAR.match("a b-c d9")
    assert COMMAND_GRAMMAR.match("a\n") is None
    assert COMMAND_GRAMMAR.search("x; a") is None


def test_query_without_runtime_is_an_error(ctx):
    assert evaluate_check({"query": "a"}, ctx).unavailable is True


# ── the verdict/error split ───────────────────────────────────────────────────────────────────


def outcome_result(ctx, outcome: Outcome):
    return evaluate_check({"query": "verify drift"}, ctx, FakeRuntime(outcome))


def test_exit_69_is_could_not_look_even_with_json(ctx):
    outcome = Outcome.failed("no index", exit_code=EXIT_UNAVAILABLE, stdout='{"block": false}')
    result = outcome_result(ctx, outcome)
    assert isinstance(result, CheckError)
    assert result.unavailable is True
    assert "could not look" in result.reason and "no index" in result.reason


def test_a_failed_check_is_an_error_not_a_block(ctx):
    result = outcome_result(ctx, Outcome.failed("exited 1", exit_code=1, stdout='{"block": true}'))
    assert result == CheckError("check.query 'verify drift' failed (exit 1): exited 1")


def test_a_timed_out_check_is_an_error(ctx):
    result = outcome_result(ctx, Outcome.failed("timed out after 30s", timed_out=True))
    assert isinstance(result, CheckError) and "no exit code" in result.reason


@pytest.mark.parametrize(
    ("stdout", "problem"),
    [
        ("", "printed no verdict"),
        ("   \n", "printed no verdict"),
        ("not json", "not a JSON object"),
        ("[true]", "not a JSON object"),
        ('{"message": "m"}', 'no boolean "block"'),
        ('{"block": "true"}', 'no boolean "block"'),
        ('{"block": 1}', 'no boolean "block"'),
        ('{"block": true, "message": 3}', '"message" is not a string'),
    ],
)
def test_exit_zero_without_a_usable_verdict_is_an_error(ctx, stdout, problem):
    result = outcome_result(ctx, Outcome.succeeded(stdout))
    assert isinstance(result, CheckError)
    assert problem in result.reason
    assert result.unavailable is False


def test_block_true_is_a_delivered_verdict(ctx):
    out = Outcome.succeeded(data={"block": True, "message": "UI gaps", "action_required": "fix"})
    result = outcome_result(ctx, out)
    assert result == Verdict(True, "UI gaps", {"action_required": "fix"})
    assert result.to_json() == {"block": True, "message": "UI gaps"}


def test_message_defaults_to_empty(ctx):
    assert outcome_result(ctx, Outcome.succeeded('{"block": false}')) == Verdict(False, "")


# ── agentVerdict ──────────────────────────────────────────────────────────────────────────────


def test_agent_verdict_asks_the_runtime(ctx):
    runtime = FakeRuntime(Outcome.succeeded(json.dumps({"block": True, "message": "looks off"})))
    spec = {"ref": "reviewer", "prompt": "Is the plan coherent?"}
    result = evaluate_check({"agentVerdict": spec}, ctx, runtime)
    assert result == Verdict(True, "looks off")
    assert runtime.calls[0][:2] == ("verdict", spec)


def test_agent_verdict_errors(ctx):
    runtime = FakeRuntime(Outcome.succeeded(""))
    assert isinstance(evaluate_check({"agentVerdict": {"ref": "r"}}, ctx, runtime), CheckError)
    runtime = FakeRuntime()
    assert isinstance(evaluate_check({"agentVerdict": "r"}, ctx, runtime), CheckError)
    assert len(runtime.calls) == 0


def test_a_nul_byte_in_the_command_is_malformed_not_a_traceback(ctx):
    result = predicate(ctx, kind="command-exit-zero", command="true\0; rm -rf x")
    assert isinstance(result, CheckError) and "NUL byte" in result.reason


@pytest.mark.parametrize("kind", ["artifact-exists", "artifact-frontmatter-equals"])
def test_an_over_long_artifact_name_blocks_instead_of_raising(ctx, kind):
    fields = {"field": "x", "equals": 1} if kind == "artifact-frontmatter-equals" else {}
    result = predicate(ctx, kind=kind, artifact="a" * 5000, **fields)
    assert isinstance(result, Verdict) and result.block is True


def test_command_exit_zero_timeout_is_bounded(ctx):
    result = predicate(ctx, kind="command-exit-zero", command="true", timeout=10**9)
    assert isinstance(result, CheckError) and "at most 3600" in result.reason
