"""The runtime seam's declared surface (issue 29, point 5): `describe()`, `unready()`,
`missing()`, the host tool, `phase_req_ids()` and the run hooks `begin_run(RunStart)` /
`end_run()` have defaults in `BaseRuntime`, so a plugin that writes only `handle` runs; what a
plugin built by the registry lacks is refused once, at creation, in one line."""

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
    """A plugin written against the typed calls only, not a `BaseRuntime`."""

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
    assert bare.unready() is None
    assert bare.missing("agents", "executor") is None
    assert bare.host_tool_for(_ctx(project, host_tool="gsd_run")) is None
    refused = bare.run_host(["windows", "status"], _ctx(project))
    assert not refused.ok and refused.detail == "no host tool is configured"
    assert bare.phase_req_ids(_ctx(project)) == "TBD"  # the workflow's fallback
    (project / ".planning" / "ROADMAP.md").write_text(
        "# Roadmap\n\n### Phase 1: Demo\n**Goal**: x\n**Requirements**: REQ-01, REQ-02\n"
    )
    assert bare.phase_req_ids(_ctx(project)) == "REQ-01, REQ-02"
    bare.begin_run(RunStart("r1", Meter(run_id="r1")))
    bare.end_run()


def test_the_description_is_the_registered_name_and_an_agent_cli_wants_worktrees(
    project: Path,
) -> None:
    assert LocalRuntime(project).describe() == RuntimeInfo(name="local")
    assert ScriptedRuntime().describe() == RuntimeInfo(name="scripted")
    assert ClaudeRuntime(project).describe() == RuntimeInfo(name="claude", wants_worktrees=True)
    with pytest.raises(Exception, match="frozen"):
        LocalRuntime(project).describe().name = "other"  # type: ignore[misc]


def test_the_local_runtime_s_req_ids_come_from_the_roadmap_without_a_host_tool(
    project: Path,
) -> None:
    (project / ".planning" / "ROADMAP.md").write_text(
        "# Roadmap\n\n### Phase 1: Demo\n**Requirements**: REQ-07\n"
    )
    local = LocalRuntime(project)
    assert local.host_tool_for(_ctx(project)) is None
    assert local.host_tool_for(_ctx(project, host_tool="gsd_run")) == "gsd_run"
    assert local.phase_req_ids(_ctx(project)) == "REQ-07" == Bare().phase_req_ids(_ctx(project))


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
    assert "lacks ask_verdict, begin_run, compact, deliver_context" in message
    assert "run_skill" not in message and "subclass looprail.runtime.base.BaseRuntime" in message
    code = main(["run", str(project), "--phase", "1", "--agent", "half", "--no-journal"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("looprail: error: runtime 'half' (Half) is not a Runtime: it lacks")
