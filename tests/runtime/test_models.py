"""A model per role (issue 42, point 4): GSD's model keys resolved as `gsd-tools resolve-model`
resolves them, `looprail.agents.<cli>.models.<role>` over them, and each role's CLI call given
its model.

The differential tests need LOOPRAIL_REFERENCE (the reference's gsd-tools.cjs) and node, and
skip without them: every agent type of the reference's catalog (and one it does not know), under
every profile and every runtime it knows (and none, and one it does not know), and under each
kind of model key, is answered by `resolve_gsd` as the reference answers it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from looprail.errors import ConfigError
from looprail.journal.report import format_spend
from looprail.runtime.adapter import ROLES, AgentSettings
from looprail.runtime.agents import ADAPTERS
from looprail.runtime.models import (
    CATALOG_FILE,
    ROLE_AGENTS,
    catalog,
    resolve_gsd,
    role_model,
    role_models,
)
from tests.support import REFERENCE_DRIVER, REPO
from tests.support.agents import agent_env, looprail

REFERENCE = os.environ.get("LOOPRAIL_REFERENCE", "")
needs_reference = pytest.mark.skipif(
    not REFERENCE or shutil.which("node") is None, reason="LOOPRAIL_REFERENCE or node is absent"
)


def _agents() -> list[str]:
    return [*catalog()["agents"], "gsd-not-an-agent"]


def _distinct_agents() -> list[str]:
    """One agent type per distinct catalog entry (what resolution reads of an agent), and one
    the catalog does not know."""
    first: dict[str, str] = {}
    for agent, entry in catalog()["agents"].items():
        first.setdefault(json.dumps(entry, sort_keys=True), agent)
    return [*first.values(), "gsd-not-an-agent"]


RUNTIMES = [None, *catalog()["runtimeTierDefaults"], "gemini"]  # none, each known, one unknown
PROFILES = [None, *catalog()["profiles"], "Quality", "no-such-profile"]


def _config(**keys: Any) -> dict[str, Any]:
    return {k: v for k, v in keys.items() if v is not None}


def _key_variants() -> list[dict[str, Any]]:
    """One config per kind of model key the reference reads, with the values that choose
    differently (a Claude id with and without an alias, a tier per phase type, each provider
    and budget, runtime tiers, the ids switch)."""
    claude_ids = [e["model"] for e in catalog()["runtimeTierDefaults"]["claude"].values()]
    variants: list[dict[str, Any]] = [
        {"model_overrides": {"gsd-executor": claude_ids[0], "gsd-planner": "my-model"}},
        {"model_overrides": {"gsd-verifier": "claude-opus-4-0", "gsd-planner": "fable"}},
        {"models": {"execution": "haiku", "planning": "inherit", "verification": "nope"}},
        {"model_profile": "budget", "models": {"verification": "opus"}},
        {"resolve_model_ids": True},
        {"resolve_model_ids": True, "model_profile": "inherit"},
        {"resolve_model_ids": "omit"},
        {"model_profile_overrides": {"codex": {"opus": "o-big", "sonnet": {"model": "o-mid"}}}},
        {"model_profile_overrides": {"gemini": {"sonnet": "gemini-pro"}, "cline": {"haiku": "x"}}},
        {
            "model_policy": {
                "runtime_tiers": {"codex": {"sonnet": "rt-c"}, "claude": {"opus": "haiku"}}
            }
        },
        {"model_policy": {"provider": "generic", "high": "g-high", "medium": "g-med"}},
        {"model_policy": {"provider": "custom", "low": "c-low"}, "model_profile": "budget"},
        {"model_policy": {"provider": "no-such-provider"}},
    ]
    for provider in catalog()["providerPresets"]:
        for budget in (None, "low", "high"):  # none is "medium"
            variants.append({"model_policy": _config(provider=provider, budget=budget)})
    return variants


def _reference_answers(
    tmp_path: Path, configs: list[dict[str, Any]], agents: list[str]
) -> list[list[str]]:
    """The reference's `resolve-model` model for every agent under each config (one project
    folder per config; one node process for all, through tests/reference_driver.cjs)."""
    jobs = []
    for i, config in enumerate(configs):
        folder = tmp_path / f"p{i}"
        (folder / ".planning").mkdir(parents=True)
        (folder / ".planning" / "config.json").write_text(json.dumps(config))
        jobs += [json.dumps({"cwd": str(folder), "resolveModel": a}) for a in agents]
    out = tmp_path / "answers.jsonl"
    subprocess.run(
        ["node", str(REFERENCE_DRIVER), REFERENCE, str(out)],
        input="\n".join(jobs) + "\n",
        text=True,
        check=True,
        timeout=600,
    )
    lines = out.read_text().splitlines()
    models = [json.loads(json.loads(line)["stdout"])["model"] for line in lines]
    n = len(agents)
    return [models[i : i + n] for i in range(0, len(models), n)]


@needs_reference
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_agent_under_every_profile_resolves_as_the_reference(
    tmp_path: Path, runtime: str | None
) -> None:
    configs = [_config(runtime=runtime, model_profile=profile) for profile in PROFILES]
    _agree(tmp_path, configs, _agents())


@needs_reference
@pytest.mark.parametrize("runtime", [None, "claude", "codex", "opencode", "cline", "gemini"])
def test_every_model_key_resolves_as_the_reference(tmp_path: Path, runtime: str | None) -> None:
    configs = [_config(runtime=runtime, **keys) for keys in _key_variants()]
    _agree(tmp_path, configs, _distinct_agents())


def _agree(tmp_path: Path, configs: list[dict[str, Any]], agents: list[str]) -> None:
    answers = _reference_answers(tmp_path, configs, agents)
    wrong = [
        (config, agent, expected, got)
        for config, row in zip(configs, answers, strict=True)
        for agent, expected in zip(agents, row, strict=True)
        if (got := resolve_gsd(config, agent).model) != expected
    ]
    assert not wrong, f"{len(wrong)} of {len(configs) * len(agents)} differ, e.g. {wrong[:5]}"


@needs_reference
@pytest.mark.parametrize(
    "config",
    [
        {},
        {"runtime": "codex", "model_profile": "budget"},
        {"model_overrides": {"gsd-verifier": "x"}},
    ],
)
def test_the_driver_answers_as_the_command_line_does(tmp_path: Path, config: dict) -> None:
    """`gsd-tools resolve-model AGENT` itself, run in the project, as a user runs it."""
    (tmp_path / ".planning").mkdir()
    (tmp_path / ".planning" / "config.json").write_text(json.dumps(config))
    for agent in ROLE_AGENTS.values():
        if agent is None:
            continue
        done = subprocess.run(
            ["node", REFERENCE, "resolve-model", agent, "--raw"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == resolve_gsd(config, agent).model


@needs_reference
def test_the_catalog_is_the_references_own() -> None:
    core = Path(REFERENCE).resolve().parent
    theirs = json.loads((core / "shared" / "model-catalog.json").read_text())
    ours = json.loads((REPO / "looprail" / "runtime" / CATALOG_FILE).read_text())
    assert ours.pop("_source").startswith("@opengsd/gsd-core")
    assert ours == theirs, "refresh it: python scripts/model_catalog.py $LOOPRAIL_REFERENCE"


def test_every_role_has_its_agent_type_and_each_known_one_is_in_the_catalog() -> None:
    assert set(ROLE_AGENTS) == set(ROLES)
    for agent in filter(None, ROLE_AGENTS.values()):
        assert agent in catalog()["agents"]


def test_looprail_settings_win_over_gsd_role_first() -> None:
    config = {"model_profile": "quality"}
    gsd = role_models(config, "claude", AgentSettings())
    assert gsd["planner"].model == resolve_gsd(config, "gsd-planner").model
    assert "model_profile quality" in gsd["planner"].source
    everyone = AgentSettings.parse("claude", {"model": "m-all"})
    assert {m.model for m in role_models(config, "claude", everyone).values()} == {"m-all"}
    one = AgentSettings.parse("claude", {"model": "m-all", "models": {"executor": "m-exec"}})
    mine = role_models(config, "claude", one)
    assert mine["executor"].model == "m-exec"
    assert mine["executor"].source == "looprail.agents.claude.models.executor"
    assert mine["verifier"].model == "m-all"


def test_the_orchestrator_has_no_gsd_agent_and_keeps_the_clis_default() -> None:
    for cli in ADAPTERS:
        assert (
            role_model({"model_profile": "quality"}, cli, AgentSettings(), "orchestrator").model
            is None
        )


@pytest.mark.parametrize("cli", ["codex", "opencode"])
def test_a_gsd_runtime_gets_the_catalogs_model_and_another_cli_none(cli: str) -> None:
    config = {"runtime": cli, "model_profile": "budget"}
    tier = catalog()["agents"]["gsd-executor"]["budget"]
    expected = catalog()["runtimeTierDefaults"][cli][tier]["model"]
    assert role_model(config, cli, AgentSettings(), "executor").model == expected
    other = "codex" if cli == "opencode" else "opencode"
    elsewhere = role_model(config, other, AgentSettings(), "executor")
    assert elsewhere.model is None and f"for runtime {cli}, not {other}" in elsewhere.source


def test_a_claude_tier_is_never_passed_to_another_cli() -> None:
    # gemini is no GSD runtime: GSD answers a Claude tier, which gemini cannot take
    answer = resolve_gsd({"runtime": "gemini"}, "gsd-planner").model
    assert answer in catalog()["adaptiveTierMap"].values()
    assert role_model({"runtime": "gemini"}, "gemini", AgentSettings(), "planner").model is None
    # ... while a model_policy for it is passed on
    config = {"runtime": "gemini", "model_policy": {"provider": "google"}}
    assert role_model(config, "gemini", AgentSettings(), "planner").model == (
        resolve_gsd(config, "gsd-planner").model
    )


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"model_profile": 3}, "model_profile"),
        ({"model_overrides": ["x"]}, "model_overrides"),
        ({"model_overrides": {"gsd-planner": 1}}, "model_overrides.gsd-planner"),
        ({"resolve_model_ids": "yes"}, "resolve_model_ids"),
        ({"model_policy": {"budget": 2}}, "model_policy.budget"),
        (
            {"model_policy": {"runtime_tiers": {"codex": {"opus": 5}}}},
            "model_policy.runtime_tiers.codex.opus",
        ),
        ({"model_profile_overrides": {"codex": "x"}}, "model_profile_overrides.codex"),
    ],
)
def test_a_gsd_model_key_of_the_wrong_type_is_one_line_naming_it(config: dict, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_gsd(config, "gsd-planner")
    assert caught.value.field == field
    assert str(caught.value).startswith(f".planning/config.json: {field}: must be")


@pytest.mark.parametrize(
    ("models", "reason"),
    [
        ("opus", "models: must be an object of role -> model"),
        ({"coder": "opus"}, "models.coder: not a role"),
        ({"planner": ""}, "models.planner: must be a non-empty string"),
    ],
)
def test_a_bad_models_setting_is_one_line_naming_it(models: object, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"looprail.agents.codex.{reason}"):
        AgentSettings.parse("codex", {"models": models})


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed for plan worktrees")
@pytest.mark.parametrize(
    ("agent", "gsd"),
    [
        ("claude", {"model_profile": "quality"}),
        ("codex", {"runtime": "codex", "model_profile": "budget"}),
    ],
)
def test_each_roles_call_gets_its_model_and_the_report_sums_by_role(
    tmp_path: Path, agent: str, gsd: dict[str, str]
) -> None:
    """`looprail run` with a fake agent CLI: each call's argv carries its role's model, the
    journal says which, and `report` sums tokens and cost per role."""
    env = agent_env(tmp_path)
    assert looprail("init", "demo", "--agent", agent, cwd=tmp_path, env=env).returncode == 0
    demo = tmp_path / "demo"
    ours = {"models": {"verifier": "v-model"}}
    config = {**gsd, "looprail": {"agent": agent, "agents": {agent: ours}}}
    (demo / ".planning" / "config.json").write_text(json.dumps(config))
    done = looprail("run", "--phase", "1", cwd=demo, env=env)
    assert done.returncode == 0, done.stderr
    expected = role_models(config, agent, AgentSettings.parse(agent, ours))
    data = json.loads(looprail("report", "--json", cwd=demo, env=env).stdout)
    for call in data["agentCalls"]:
        model = expected[call["role"]].model
        assert call["model"] == model
        argv = json.loads((demo / call["transcript"] / "meta.json").read_text())["argv"]
        given = argv[argv.index("--model") + 1] if "--model" in argv else None
        assert given == model, (call["role"], argv)
    roles = data["spend"]["roles"]
    assert list(roles) == ["orchestrator", "planner", "executor", "verifier"]  # as they ran
    assert roles["executor"]["calls"] == 3 and roles["verifier"]["calls"] == 1
    assert sum(r["outputTokens"] for r in roles.values()) == data["spend"]["run"]["outputTokens"]
    text = looprail("report", cwd=demo, env=env).stdout
    assert f"  role verifier (v-model): {format_spend(roles['verifier'])}" in text


def test_doctor_shows_each_roles_model_and_where_it_comes_from(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    assert looprail("init", "demo", "--agent", "codex", cwd=tmp_path, env=env).returncode == 0
    demo = tmp_path / "demo"
    ours = {"models": {"verifier": "v-model"}}
    config = {"runtime": "codex", "looprail": {"agent": "codex", "agents": {"codex": ours}}}
    (demo / ".planning" / "config.json").write_text(json.dumps(config))
    done = looprail("doctor", "--json", cwd=demo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = next(c["models"] for c in json.loads(done.stdout)["checks"] if "models" in c)
    for role, m in role_models(config, "codex", AgentSettings.parse("codex", ours)).items():
        assert shown[role] == (f"{m.model} ({m.source})" if m.model else m.source)
    assert shown["verifier"] == "v-model (looprail.agents.codex.models.verifier)"
    text = looprail("doctor", cwd=demo, env=env).stdout
    assert f"  planner: {shown['planner']}\n" in text

    config["model_profile"] = ["quality"]  # a GSD key of the wrong type
    (demo / ".planning" / "config.json").write_text(json.dumps(config))
    done = looprail("doctor", cwd=demo, env=env)
    assert done.returncode == 1
    assert "✗ codex: models: .planning/config.json: model_profile: must be a string" in done.stdout


def test_a_run_with_a_bad_gsd_model_key_stops_before_any_work(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    assert looprail("init", "demo", "--agent", "claude", cwd=tmp_path, env=env).returncode == 0
    demo = tmp_path / "demo"
    config = {"model_overrides": {"gsd-planner": 3}, "looprail": {"agent": "claude"}}
    (demo / ".planning" / "config.json").write_text(json.dumps(config))
    done = looprail("run", "--phase", "1", cwd=demo, env=env)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "looprail: error: .planning/config.json: model_overrides.gsd-planner: must be a string"
    ]
    assert not (tmp_path / "calls.jsonl").exists()  # no agent was called
