"""A SUMMARY with `status: halted` is a designed stop: not done, never re-run, and what depends
on it never runs (the reference's plan-index `halted`/`blocked_by`/`runnable`)."""

from __future__ import annotations

from tests.support.loop import make_project, plan_md, run_loop, scripted, task_xml, write_plan


def _three_plans(tmp_path):
    project = make_project(tmp_path)
    write_plan(project, "01", plan_md("01", files=["a"], tasks=[task_xml("a")]))
    write_plan(project, "02", plan_md("02", files=["b"], tasks=[task_xml("b")]))
    write_plan(
        project, "03", plan_md("03", depends_on=["01-01"], files=["c"], tasks=[task_xml("c")])
    )
    return project


def test_a_halted_plan_stops_the_loop_at_its_wave_and_blocks_its_dependents(tmp_path):
    project = _three_plans(tmp_path)
    phase = project / ".planning" / "phases" / "01-demo"
    (phase / "01-01-SUMMARY.md").write_text("---\nstatus: halted # designed stop\n---\n")
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "halted"
    assert "plan 01-01 halted (01-01-SUMMARY.md says status: halted)" in out.result.reason
    tasks = [c.name for c in rt.calls_of("task")]
    assert tasks == ["01-02/T1"]  # the rest of wave 1 ran; 01-01 is not re-run; 01-03 never
    assert not (phase / "01-03-SUMMARY.md").exists()
    assert not rt.calls_of("phase") or "verify" not in [c.name for c in rt.calls_of("phase")]


def test_a_dependent_of_a_halted_plan_is_named_when_its_wave_comes(tmp_path):
    project = _three_plans(tmp_path)
    phase = project / ".planning" / "phases" / "01-demo"
    (phase / "01-01-SUMMARY.md").write_text("---\nstatus: halted\n---\n")
    (phase / "01-02-SUMMARY.md").write_text("---\nstatus: complete\n---\n")
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "halted"
    assert "plan 01-01 halted" in out.result.reason
    assert rt.calls_of("task") == []


def test_a_complete_summary_is_done(tmp_path):
    project = _three_plans(tmp_path)
    phase = project / ".planning" / "phases" / "01-demo"
    (phase / "01-01-SUMMARY.md").write_text("---\nstatus: complete\n---\n")
    rt = scripted(project)
    out = run_loop(project, rt)
    assert out.result.status == "shipped", out.result.reason
    assert sorted(c.name for c in rt.calls_of("task")) == ["01-02/T1", "01-03/T1"]
