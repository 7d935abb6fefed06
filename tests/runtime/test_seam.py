"""The runtime seam's declared surface (issue 29, point 5; issue 38 item 12): `handle`,
`describe()` (name, worktrees, host tool, readiness) and the run hooks `begin_run(RunStart)` /
`end_run()`; all but `handle` have defaults in `BaseRuntime`, so a plugin that writes only
`handle` runs; what a plugin built by the registry lacks is refused once, at creation, in one
line."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from looprail.cli import main
from looprail.errors import BudgetReached
from looprail.runtime import registry
from looprail.runtime.agents import ClaudeRuntime
from looprail.runtime.base import (
    BaseRuntime,
    DispatchContext,
    Outcome,
    Request,
    RunStart,
    Runtime,
    RuntimeInfo,
    host_tool_for,
    phase_req_ids,
    run_host,
)
from looprail.runtime.local import LocalRuntime
from looprail.runtime.meter import Meter
from looprail.runtime.registry import RuntimeSettings, create_runtime
from looprail.runtime.scripted import ScriptedRuntime


class Bare(BaseRuntime):
    """A third-party runtime that declares nothing but `handle` (and how it is built)."""

    @classmethod
    def from_settings(cls, settings: RuntimeSettings) -> Bare:
        return cls()

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        return Outcome.succeeded(data={"block": False, "message": ""})


class Half:
    """A plugin written against the typed calls of old, not a `BaseRuntime`."""

    @classmethod
    def from_settings(cls, settings: RuntimeSettings) -> Half:
        return cls()

    def run_skill(self, skill_id: str, ctx: DispatchContext) -> Outcome:
        return Outcome.succeeded()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".planning" / "phases" / "01-demo").mkdir(parents=True)
    return root


def _ctx(project: Path, **kw) -> DispatchContext:
    return DispatchContext(project=project, phase_number="1", **kw)


def test_a_runtime_that_declares_nothing_gets_the_defaults(project: Path) -> None:
    bare = Bare()
    assert isinstance(bare, Runtime)
    assert bare.describe() == RuntimeInfo(name="Bare", wants_worktrees=False)
    assert bare.describe().unready is None and bare.describe().host_tool is None
    assert host_tool_for(bare, _ctx(project)) is None  # looprail evaluates the host's gates
    assert phase_req_ids(bare, _ctx(project)) == "TBD"  # the workflow's fallback
    (project / ".planning" / "ROADMAP.md").write_text(
        "# Roadmap\n\n### Phase 1: Demo\n**Goal**: x\n**Requirements**: REQ-01, REQ-02\n"
    )
    assert phase_req_ids(bare, _ctx(project)) == "REQ-01, REQ-02"
    bare.begin_run(RunStart("r1", Meter(run_id="r1")))
    bare.end_run()


def test_the_description_is_the_registered_name_its_host_tool_and_readiness(
    project: Path,
) -> None:
    assert LocalRuntime(project).describe() == RuntimeInfo(name="local")
    assert ScriptedRuntime().describe() == RuntimeInfo(name="scripted")
    claude = ClaudeRuntime(project, host_tool="gsd_run", env={"PATH": str(project)})
    info = claude.describe()
    assert (info.name, info.wants_worktrees, info.host_tool) == ("claude", True, "gsd_run")
    assert info.unready is not None and info.unready.startswith("claude: `claude` not found")
    with pytest.raises(Exception, match="frozen"):
        LocalRuntime(project).describe().name = "other"  # type: ignore[misc]


def test_the_host_tool_is_the_context_s_else_the_declared_one(project: Path) -> None:
    (project / ".planning" / "ROADMAP.md").write_text(
        "# Roadmap\n\n### Phase 1: Demo\n**Requirements**: REQ-07\n"
    )
    local = LocalRuntime(project)
    assert host_tool_for(local, _ctx(project)) is None
    assert host_tool_for(local, _ctx(project, host_tool="gsd_run")) == "gsd_run"
    assert host_tool_for(LocalRuntime(project, host_tool="msd_run"), _ctx(project)) == "msd_run"
    assert phase_req_ids(local, _ctx(project)) == "REQ-07" == phase_req_ids(Bare(), _ctx(project))
    refused = run_host(local, ["windows", "status"], _ctx(project))
    assert not refused.ok and refused.detail == "no host tool is configured"


def test_an_agent_runtime_meters_only_the_run_it_was_given(project: Path) -> None:
    claude = ClaudeRuntime(project)
    spent = Meter(run_id="r1", budget_usd=1.0, spent_usd=1.0)
    with pytest.raises(BudgetReached, match="budget reached"):
        claude.begin_run(RunStart("r1", spent))  # a run resumed at its budget stops here
    claude.end_run()
    # After the run, work belongs to no run: no budget of that run stops it.
    claude.begin_run(RunStart("r2", Meter(run_id="r2", budget_usd=5.0)))
    assert claude.transcripts.run_id == "r2"
    claude.end_run()


def test_a_plugin_that_is_not_a_runtime_is_refused_naming_what_it_lacks(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    point = EntryPoint(name="half", value="tests.runtime.test_seam:Half", group=registry.GROUP)
    monkeypatch.setattr(registry, "_entry_points", lambda: {"half": point})
    with pytest.raises(Exception, match="is not a Runtime") as caught:
        create_runtime("half", RuntimeSettings(project=project))
    message = str(caught.value)
    assert "lacks begin_run, describe, end_run, handle" in message
    assert "run_skill" not in message and "subclass looprail.runtime.base.BaseRuntime" in message
    code = main(["run", str(project), "--phase", "1", "--agent", "half", "--no-journal"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("looprail: error: runtime 'half' (Half) is not a Runtime: it lacks")
