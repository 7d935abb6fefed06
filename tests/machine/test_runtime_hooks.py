"""What a run tells its runtime, through declared methods only (issue 29, point 5): the run
begins with `begin_run(RunStart)` — the journaled run id and the run's cost meter, passed, not
assigned onto the runtime — and ends with `end_run()` however it ended; the journal names the
agent as the runtime's `describe()` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from looprail.runtime.base import RunStart, RuntimeInfo
from looprail.runtime.meter import Meter
from looprail.runtime.scripted import ScriptedRuntime
from tests.support.loop import make_project, plan_md, run_loop, task_xml, write_plan


class Hooked(ScriptedRuntime):
    """A scripted runtime that declares its own name and records the run hooks."""

    def __init__(self, phase_dir: Path) -> None:
        super().__init__()
        self.hooks: list[tuple[str, RunStart | None]] = []
        self.effect(("phase", "discuss"), lambda r: (phase_dir / "01-CONTEXT.md").write_text("c"))
        self.effect(
            ("phase", "verify"),
            lambda r: (phase_dir / "01-VERIFICATION.md").write_text("---\nstatus: passed\n---\n"),
        )

    def describe(self) -> RuntimeInfo:
        return RuntimeInfo(name="hooked")

    def begin_run(self, run: RunStart) -> None:
        self.hooks.append(("begin", run))

    def end_run(self) -> None:
        self.hooks.append(("end", None))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path)
    write_plan(root, "01", plan_md("01", tasks=[task_xml("one")]))
    return root


def _phase_dir(project: Path) -> Path:
    return project / ".planning" / "phases" / "01-demo"


def test_a_journaled_run_passes_its_id_and_meter_then_ends(project: Path) -> None:
    from looprail.journal import Journal

    runtime = Hooked(_phase_dir(project))
    out = run_loop(project, runtime, journal=True)
    assert out.result.status == "shipped", out.result.reason
    assert [h for h, _ in runtime.hooks] == ["begin", "end"]
    run = runtime.hooks[0][1]
    assert run is not None and run.run_id == out.run_id
    assert isinstance(run.meter, Meter) and run.meter.run_id == out.run_id
    assert "meter" not in vars(runtime)  # passed, never assigned onto the runtime
    jr = Journal.open_readonly(project)
    try:
        row = jr.get_run(out.run_id)
        assert row is not None and row.machine_config["agent"] == "hooked"
    finally:
        jr.close()


def test_an_unjournaled_run_begins_without_an_id(project: Path) -> None:
    runtime = Hooked(_phase_dir(project))
    out = run_loop(project, runtime)
    assert out.result.status == "shipped", out.result.reason
    assert [(h, r.run_id if r else None) for h, r in runtime.hooks] == [
        ("begin", None),
        ("end", None),
    ]


@pytest.mark.parametrize("journal", [True, False])
def test_the_run_ends_for_the_runtime_when_the_run_raises(project: Path, journal: bool) -> None:
    runtime = Hooked(_phase_dir(project))

    def explode(_request: object) -> None:
        raise RuntimeError("a bug in the runtime")

    runtime.effect(("task", "*"), explode)
    with pytest.raises(RuntimeError, match="a bug in the runtime"):
        run_loop(project, runtime, journal=journal)
    assert [h for h, _ in runtime.hooks] == ["begin", "end"]
