"""Differential over real GSD projects: every phase folder of
`../shared/conformance/real-projects/` through `looprail phase plan-index N --raw` and the
reference's `phase-plan-index N --raw`. Every field the reference prints agrees, or differs only
by a normalisation named after its entry in docs/plans.md ("Differences from the reference");
nothing the reference reads is refused; `run --dry-run` plans every phase. Skips without the
corpus or LOOPRAIL_REFERENCE (and node). The copies live in a temporary folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.plans import real_projects as rp
from tests.support import REPO, run_cli

pytestmark = [
    pytest.mark.skipif(not rp.projects(), reason="../shared/conformance/real-projects is absent"),
]
needs_reference = pytest.mark.skipif(
    not (rp.REFERENCE and shutil.which("node")), reason="LOOPRAIL_REFERENCE (and node) needed"
)


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("real")
    return [rp.copy_project(source, root) for source in rp.projects()]


def folders(copies: list[Path]) -> list[tuple[Path, str, str]]:
    return [(p, folder, phase) for p in copies for folder, phase in rp.phase_tokens(p)]


@needs_reference
def test_every_phase_agrees_with_the_reference_or_differs_as_documented(copies):
    outcomes = [rp.compare(p, folder, phase) for p, folder, phase in folders(copies)]
    refused = [f"{o.project}/{o.folder}: {o.ours['error']}" for o in outcomes if o.refused]
    differ = [f"{o.project}/{o.folder}: {o.differs}" for o in outcomes if o.differs]
    assert refused == [] and differ == []
    assert len(outcomes) >= 50  # the corpus is all there
    # Every normalisation used is one docs/plans.md documents, by name.
    documented = (REPO / "docs" / "plans.md").read_text()
    for name in {n for o in outcomes for n in o.applied}:
        assert f"`{name}`" in documented, name


def test_dry_run_plans_every_phase(copies):
    for project, folder, phase in folders(copies):
        result = run_cli("run", "--dry-run", "--phase", phase, "--project", str(project))
        assert "Traceback" not in result.stderr, (folder, result.stderr)
        assert result.returncode == 0, (folder, result.stderr)
        assert "wave" in result.stdout or "plan" in result.stdout, (folder, result.stdout)
