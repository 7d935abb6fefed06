"""Attacks of issue 27 that already held, pinned so they keep holding (docs/security.md,
"Promises and the tests that prove them"): capability ids with `..`, worktree branch names made
of hostile plan ids, and the Dask merge-back sandbox."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.errors import HaltError
from tests.support import examples, feature, run_cli, write_capability


@pytest.mark.parametrize("cap_id", ["..", "../../etc", "a/../../b", ".", "../victim"])
def test_a_capability_id_never_names_a_folder_outside_the_overlay(tmp_path, cap_id):
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "capability.json").write_text("{}")
    removed = run_cli("capability", "remove", cap_id, "--project", str(project))
    assert removed.returncode == 2 and "no such overlay capability" in removed.stderr
    assert (tmp_path / "victim" / "capability.json").exists()
    source = write_capability(tmp_path / "src", feature("ok"), folder="src")
    (source / "capability.json").write_text(
        (source / "capability.json").read_text().replace('"id": "ok"', f'"id": "{cap_id}"')
    )
    installed = run_cli("capability", "install", str(source), "--project", str(project), "--yes")
    assert installed.returncode != 0 and "$.id" in installed.stderr, installed.stderr
    assert not (project / ".looprail" / "capabilities").exists()


@settings(max_examples=examples(200), deadline=None)
@given(run=st.text(max_size=40), plan=st.text(max_size=40), wave=st.integers(0, 99))
def test_worktree_branch_names_are_plain_whatever_the_ids(tmp_path_factory, run, plan, wave):
    from looprail.machine.workspace import GitWorkspace

    workspace = GitWorkspace(tmp_path_factory.getbasetemp(), run or None)
    branch = workspace.branch(wave, plan)
    assert re.fullmatch(r"looprail/[A-Za-z0-9._-]+/w\d+-[A-Za-z0-9._-]+", branch), branch
    assert not any(part.startswith((".", "-")) for part in branch.split("/"))


@pytest.mark.parametrize(
    "rel", ["../outside.txt", "/etc/passwd-x", "sub/../../outside.txt", ".git/hooks/pre-commit"]
)
def test_a_dask_workers_change_never_lands_outside_the_project_or_in_git(tmp_path, rel):
    pytest.importorskip("distributed")
    from looprail.machine.dask.job import apply_changes

    project = tmp_path / "p"
    project.mkdir()
    with pytest.raises(HaltError, match="a worker's change points outside the project"):
        apply_changes(project, {rel: b"pwned"})
    assert not (tmp_path / "outside.txt").exists()
    assert not Path("/etc/passwd-x").exists()
    assert not (project / ".git").exists()


def test_a_dask_workers_change_never_lands_in_looprails_own_folder(tmp_path):
    pytest.importorskip("distributed")
    from looprail.layout import LOOPRAIL_DIR
    from looprail.machine.dask.job import apply_changes

    project = tmp_path / "p"
    project.mkdir()
    with pytest.raises(HaltError):
        apply_changes(project, {f"{LOOPRAIL_DIR}/agents/executor": b"#!/bin/sh\n"})
    assert not (project / LOOPRAIL_DIR).exists()
