"""The one model of the `looprail` config section (`looprail.runtime.settings`): every key's type is
checked in one place, and the reason names the dotted key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looprail.errors import ConfigError
from looprail.runtime import registry
from looprail.runtime.settings import LooprailSettings, Timeouts, looprail_settings


def test_no_config_or_no_section_is_the_defaults():
    for config in (None, {}, {"looprail": None}):
        settings = looprail_settings(config)
        assert settings == LooprailSettings()
        assert settings.agent is None and settings.worktrees is None and settings.timeouts is None


def test_the_section_is_read_once_into_typed_fields():
    settings = looprail_settings(
        {
            "looprail": {
                "agent": "claude",
                "agents": {"claude": {"model": "x"}},
                "worktrees": True,
                "timeouts": {"task": 5},
                "checkpoint_rounds": 2,
                "later": "a key a newer looprail reads",
            }
        }
    )
    assert settings.agent == "claude" and settings.worktrees is True
    assert settings.agents == {"claude": {"model": "x"}}
    assert settings.timeouts == Timeouts(task=5)
    assert settings.checkpoint_rounds == 2
    assert registry.agent_name({"looprail": {"agent": "claude"}}) == "claude"
    assert registry.agent_section({"looprail": {"agents": {"claude": {"a": 1}}}}, "claude") == {
        "a": 1
    }


@pytest.mark.parametrize(
    ("section", "key", "reason"),
    [
        ("x", "looprail", "must be an object"),
        ({"agent": 3}, "looprail.agent", "must be a runtime name"),
        ({"agent": ""}, "looprail.agent", "must be a runtime name"),
        ({"agents": []}, "looprail.agents", "must be an object"),
        ({"agents": {"claude": "x"}}, "looprail.agents.claude", "must be an object"),
        ({"worktrees": "yes"}, "looprail.worktrees", "must be true or false"),
        ({"timeouts": 3}, "looprail.timeouts", "must be an object"),
        ({"timeouts": {"task": 0}}, "looprail.timeouts.task", "greater than 0"),
        ({"timeouts": {"tsk": 1}}, "looprail.timeouts.tsk", "Extra inputs"),
        ({"checkpoint_rounds": 0}, "looprail.checkpoint_rounds", "of at least 1"),
        ({"checkpoint_rounds": "2"}, "looprail.checkpoint_rounds", "a whole number"),
        ({"checkpoint_rounds": 1.5}, "looprail.checkpoint_rounds", "a whole number"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(section, key, reason):
    with pytest.raises(ConfigError) as caught:
        looprail_settings({"looprail": section})
    assert caught.value.field == key
    message = str(caught.value)
    assert message.startswith(f".planning/config.json: {key}: ") and reason in message
    assert "\n" not in message


@given(
    st.dictionaries(
        st.sampled_from(["agent", "agents", "worktrees", "timeouts", "checkpoint_rounds"]),
        st.none(),
    )
)
def test_null_values_are_unset(section):
    assert looprail_settings({"looprail": section}) == LooprailSettings()
