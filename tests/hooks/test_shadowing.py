"""A project (or global) copy of a first-party capability is never loaded: `capability list`,
`lint` and `trust` say so plainly, and why (first-party wins)."""

from __future__ import annotations

import json

import pytest

from looprail.cli import main
from tests.support import feature, write_capability


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPRAIL_HOME", str(tmp_path / "home"))
    project = tmp_path / "project"
    (project / ".planning" / "phases" / "01-x").mkdir(parents=True)
    caps = tmp_path / "caps"
    write_capability(caps, feature("sec"))
    write_capability(project / ".looprail" / "capabilities", feature("sec", title="my fix"))
    return project, caps


def test_capability_list_says_the_copy_has_no_effect(setup, capsys):
    project, caps = setup
    assert main(["capability", "list", "--project", str(project), "--capabilities", str(caps)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "NO EFFECT" in x)
    assert line.split()[:3] == ["sec", "-", "project"]
    assert "has no effect" in line and "first-party wins" in line
    assert (
        main(
            ["capability", "list", "--json", "--project", str(project), "--capabilities", str(caps)]
        )
        == 0
    )
    body = json.loads(capsys.readouterr().out)
    [shadow] = body["shadowed"]
    assert shadow["id"] == "sec" and shadow["origin"] == "project"
    assert shadow["loadedInstead"] == str(caps / "sec")
    assert [c["origin"] for c in body["capabilities"] if c["id"] == "sec"] == ["first-party"]


def test_lint_says_it_plainly_with_a_fix(setup, capsys):
    project, caps = setup
    main(["lint", "--json", "--project", str(project), "--capabilities", str(caps)])
    findings = json.loads(capsys.readouterr().out)["findings"]
    [f] = [f for f in findings if f["code"] == "shadowed-capability"]
    assert f["file"] == ".looprail/capabilities/sec/capability.json"
    assert "has no effect" in f["message"] and "first-party wins" in f["message"]
    assert "its own id" in f["fix"]
    assert not [f for f in findings if f["code"] == "registry-warning"]  # said once


def test_trust_never_calls_a_shadowed_copy_trusted(setup, capsys):
    project, caps = setup
    code = main(["trust", "--yes", "--project", str(project), "--capabilities", str(caps)])
    captured = capsys.readouterr()
    assert code == 0
    assert "has no effect" in captured.err and "consent would not make it run" in captured.err
    assert "trusted" not in captured.out.replace("nothing to review", "")
