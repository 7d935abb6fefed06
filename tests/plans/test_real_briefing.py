"""Real GSD phases (`../shared/conformance/real-projects/`, skipped without it): the prompt each
role agent gets (`build_prompt`, what a stand-in CLI records; tests/e2e/test_prompts_carry.py
records them end to end) holds every fact its plan and phase hold, verbatim (issue 42, point 1),
and `read_first` is read as these plans write it: no prose becomes a path."""

from __future__ import annotations

from pathlib import Path

import pytest

from looprail.layout import PHASE_DOCS, PROJECT_DOCS, phase_artifact
from looprail.machine.tasks import task_work
from looprail.plans import load_phase
from looprail.plans.plancheck import check_phase_plans
from looprail.plans.roadmap import read_roadmap, roadmap_section
from looprail.runtime.prompts import build_prompt
from looprail.runtime.request import DispatchContext, build_request
from tests.plans import real_projects as rp

pytestmark = pytest.mark.skipif(
    not rp.projects(), reason="../shared/conformance/real-projects is absent"
)


@pytest.fixture(scope="module")
def phases(tmp_path_factory) -> list[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("real")
    copies = [rp.copy_project(source, root) for source in rp.projects()]
    return [(p, phase) for p in copies for _, phase in rp.phase_tokens(p)]


def _ctx(project: Path, phase, point: str, **extra) -> DispatchContext:
    return DispatchContext(
        project=project, phase_number=phase.number, phase_dir=phase.dir, point=point, **extra
    )


def test_every_task_prompt_carries_its_plan_verbatim(phases):
    checked = 0
    for project, token in phases:
        for plan, task, work, prompt in rp.executor_prompts(project, token):
            expected = [
                plan.path.relative_to(project).as_posix(),
                plan.written.get("must_haves", ""),
                plan.written.get("requirements", ""),
                plan.verification or "",
                plan.success_criteria or "",
                *(t.name or "" for t in plan.tasks),
                *work.task_sections.values(),
            ]
            missing = [t[:60] for t in expected if t.strip() and t.strip() not in prompt]
            assert not missing, f"{plan.path.name} {task.id}: {missing}"
            # the plan's other tasks, saying which are done (a plan's tasks run in order)
            for other in plan.tasks:
                state = "done" if other.index < task.index else "to do"
                state = "this task" if other is task else state
                assert f"{other.name or other.type} — {state}" in prompt, (task.id, other.id)
            for line in (plan.context or "").splitlines():  # `@path` and `@path (note)`
                if line.strip().startswith("@"):
                    ref, _, note = line.strip()[1:].partition(" ")
                    shown = f"- {ref} — {note.strip()}" if note else f"- {ref}"
                    assert shown in prompt, line
            # a path is a path: the notes of annotated entries never become one
            assert all(" " not in p for p in work.read_first), work.read_first
            checked += 1
    assert checked > 100


def test_annotated_read_first_keeps_the_note_with_the_file(phases):
    found = [(project, token) for project, token in phases if project.name.startswith("demoshane")]
    phase = next(load_phase(p, t) for p, t in found if t == "41.3")
    project = next(p for p, t in found if t == "41.3")
    plan = phase.plans[0]
    work = task_work(plan, plan.tasks[0], project)
    assert work.read_first == ("frontend/src/components/Sidebar.tsx",)
    note = work.read_first_notes["frontend/src/components/Sidebar.tsx"]
    assert note.startswith("read the full file: groupByFolderThenType logic, TYPE_ORDER")
    ctx = _ctx(project, phase, "execute:task", plan_id=plan.id)
    prompt = build_prompt(build_request("task", work.key, ctx, role="executor", task=work), project)
    assert f"### frontend/src/components/Sidebar.tsx — {note}" in prompt


def test_every_phase_prompt_carries_the_roadmap_section_and_the_must_haves(phases):
    for project, token in phases:
        phase = load_phase(project, token)
        roadmap = read_roadmap(project) or ""
        section = roadmap_section(roadmap, phase.number, heading=True)
        for step, role in (
            ("discuss", "orchestrator"),
            ("plan", "planner"),
            ("verify", "verifier"),
        ):
            ctx = _ctx(project, phase, f"{step}:pre")
            request = build_request("phase", step, ctx, role=role, step=step)
            prompt = build_prompt(request, project)
            if section and section.strip():
                assert section.strip()[: 64 * 1024 - 100] in prompt, (project.name, token)
            assert ".planning/STATE.md" in prompt  # every corpus project keeps its STATE.md
            # every project and phase document there is, by path, to read
            names = sorted(p.name for p in phase.dir.iterdir()) if phase.dir.is_dir() else []
            docs = [d for d in PROJECT_DOCS if (project / d).is_file()]
            docs += [
                (phase.dir / n).relative_to(project).as_posix()
                for n in filter(None, (phase_artifact(names, s) for s in PHASE_DOCS))
            ]
            missing = [d for d in docs if f"- {d}\n" not in prompt]
            assert not missing, (project.name, token, step, missing)
            if step == "verify":
                for plan in phase.plans:
                    assert plan.written.get("must_haves", "") in prompt, plan.path.name


def test_the_plan_checks_decide_every_real_phase(phases):
    """Deterministic, and never refusing: a finding names its plan file (or the phase)."""
    for project, token in phases:
        phase = load_phase(project, token)
        first = check_phase_plans(project, phase)
        assert first == check_phase_plans(project, phase)
        for finding in first.findings:
            assert finding.where.startswith(".planning/phases/"), finding
