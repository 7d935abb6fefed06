"""Input that should be caught before a run: predicate kinds and fields (a discriminated union in
the models and the JSON Schema), strings that fail the command grammar (a warning), the role
agents the local runtime needs."""

from __future__ import annotations

import json

from tests.support import GSD_CAPABILITIES, feature, needs_corpus, run_cli, write_capability


def _gate(check, **kw):
    return {"point": "ship:pre", "check": check, "blocking": True, "onError": "halt", **kw}


def test_schema_has_one_predicate_shape_per_kind():
    r = run_cli("schema", "capability")
    assert r.returncode == 0, r.stderr
    schema = json.loads(r.stdout)
    predicate = schema["$defs"]["Check"]["properties"]["predicate"]
    union = next(branch for branch in predicate["anyOf"] if "oneOf" in branch)
    assert union["discriminator"]["propertyName"] == "kind"
    assert sorted(union["discriminator"]["mapping"]) == [
        "artifact-exists",
        "artifact-frontmatter-equals",
        "command-exit-zero",
        "config-equals",
    ]
    config_equals = schema["$defs"]["ConfigEquals"]
    assert config_equals["properties"]["kind"]["const"] == "config-equals"
    assert set(config_equals["required"]) == {"kind", "key", "equals"}
    assert config_equals["additionalProperties"] is False


def test_validate_names_file_and_field_of_a_predicate_typo(tmp_path):
    caps = tmp_path / "caps"
    write_capability(
        caps, feature("rel", gates=[_gate({"predicate": {"kind": "config-equal", "key": "a"}})])
    )
    r = run_cli("capability", "validate", str(caps))
    assert r.returncode == 1
    assert (
        f"error: {caps}/rel/capability.json: $.gates[0].check.predicate.kind: unknown kind "
        "'config-equal' (did you mean config-equals?" in r.stderr
    )
    assert "Traceback" not in r.stderr
    assert r.stdout == "0 valid, 1 invalid (1 error)\n"


def test_validate_warns_but_passes_on_strings_failing_the_grammar(tmp_path):
    caps = tmp_path / "caps"
    step = {
        "point": "plan:post",
        "ref": {"command": "Lint Now"},
        "produces": [],
        "consumes": [],
        "onError": "skip",
    }
    write_capability(
        caps, feature("g", steps=[step], gates=[_gate({"query": "ui plan-gate; rm -rf ~"})])
    )
    r = run_cli("capability", "validate", str(caps))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1 valid, 0 invalid\n"
    file = f"{caps}/g/capability.json"
    assert (
        f"looprail: warning: {file}: $.steps[0].ref.command: 'Lint Now' fails the grammar; "
        "looprail refuses it at dispatch" in r.stderr
    )
    assert f"{file}: $.gates[0].check.query: 'ui plan-gate; rm -rf ~' fails the grammar" in (
        r.stderr
    )
    data = json.loads(run_cli("capability", "validate", str(caps), "--json").stdout)
    assert data["ok"] is True and data["valid"] == ["g"]
    assert [w.split(": ")[1] for w in data["warnings"]] == [
        "$.steps[0].ref.command",
        "$.gates[0].check.query",
    ]
    # a clean one has no warnings
    clean = tmp_path / "clean"
    write_capability(clean, feature("c", gates=[_gate({"query": "ui plan-gate"})]))
    r = run_cli("capability", "validate", str(clean))
    assert r.returncode == 0 and r.stderr == ""


def test_validate_takes_dotted_queries_as_the_dispatcher_does(tmp_path):
    """One rule for a query: `ui.plan-gate` passes validate as it passes dispatch (and the dry
    run shows it as run); a dot in a step command is still refused, by both."""
    caps = tmp_path / "caps"
    step = {
        "point": "plan:post",
        "ref": {"command": "verify.drift"},
        "produces": [],
        "consumes": [],
        "onError": "skip",
    }
    write_capability(caps, feature("ui", steps=[step], gates=[_gate({"query": "ui.plan-gate"})]))
    r = run_cli("capability", "validate", str(caps))
    assert r.returncode == 0, r.stderr
    assert "'ui.plan-gate'" not in r.stderr
    assert "$.steps[0].ref.command: 'verify.drift' fails the grammar" in r.stderr


@needs_corpus
def test_validate_of_the_reference_capabilities_warns_of_no_dotted_query():
    r = run_cli("capability", "validate", str(GSD_CAPABILITIES))
    assert r.returncode == 0, r.stderr
    assert "fails the grammar" not in r.stderr
    assert "44 valid, 0 invalid" in r.stdout
