"""Fixtures for running the real GSD capability set: a GSD-format project (the reference's
config template, a ROADMAP, REQUIREMENTS, a phase with three plans in two waves) and small
deterministic role agents and skills under `.looprail/` (docs/runtime.md).

Every executable is a `/bin/sh` script that reads nothing it does not need and writes only the
artifact its role produces, so a run is reproducible and fast.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

REFERENCE_ROOT = Path("/root/.cache/looprail-reference/gsd")

# The reference's `gsd-core/templates/config.json`, as test data (its keys and values), with the
# workflow features the 44 manifests read turned on.
TEMPLATE_CONFIG: dict[str, Any] = {
    "mode": "interactive",
    "granularity": "standard",
    "workflow": {
        "research": True,
        "plan_check": True,
        "verifier": True,
        "auto_advance": False,
        "nyquist_validation": True,
        "security_enforcement": True,
        "security_asvs_level": 1,
        "security_block_on": "high",
        "discuss_mode": "discuss",
        "research_before_questions": False,
        "code_review_command": None,
        "plan_bounce": False,
        "plan_bounce_script": None,
        "plan_bounce_passes": 2,
        "cross_ai_execution": False,
        "cross_ai_command": "",
        "cross_ai_timeout": 300,
        "test_gate_timeout": 600,
    },
    "ship": {"pr_body_sections": []},
    "planning": {"commit_docs": True, "search_gitignored": False, "sub_repos": []},
    "git": {"create_tag": True},
    "parallelization": {
        "enabled": True,
        "plan_level": True,
        "task_level": False,
        "skip_checkpoints": True,
        "max_concurrent_agents": 3,
        "min_plans_for_parallel": 2,
    },
    "gates": {
        "confirm_project": True,
        "confirm_phases": True,
        "confirm_roadmap": True,
        "confirm_breakdown": True,
        "confirm_plan": True,
        "execute_next_plan": True,
        "issues_review": True,
        "confirm_transition": True,
    },
    "safety": {"always_confirm_destructive": True, "always_confirm_external_services": True},
    "hooks": {"context_warnings": True},
    "project_code": None,
    "agent_skills": {},
    "claude_md_path": "./.claude/CLAUDE.md",
}

FEATURES_ON = (
    "ui_phase",
    "ui_review",
    "ui_safety_gate",
    "schema_drift_gate",
    "plan_drift_precheck",
    "post_planning_gaps",
    "api_coverage_gate",
    "tdd_mode",
    "windows_enforce",
    "security_enforcement",
    "code_review",
    "nyquist_validation",
)

PHASE = "01-demo"

ROADMAP = """# Roadmap

## Phase 1: Demo
**Goal:** Build the demo
**Requirements**: REQ-01, REQ-02
"""

REQUIREMENTS = """# Requirements

- [ ] **REQ-01**: first
- [ ] **REQ-02**: second
"""


def config_with_features(**workflow: Any) -> dict[str, Any]:
    config = json.loads(json.dumps(TEMPLATE_CONFIG))
    config["workflow"].update(dict.fromkeys(FEATURES_ON, True))
    config["workflow"].update(workflow)
    return config


def plan_text(plan: str, *, wave: int, depends_on: list[str], requirements: str) -> str:
    return (
        "---\n"
        f"phase: {PHASE}\n"
        f"plan: {plan}\n"
        "type: execute\n"
        f"wave: {wave}\n"
        f"depends_on: {json.dumps(depends_on)}\n"
        f"files_modified: [src/f{plan}.txt]\n"
        "autonomous: true\n"
        f"requirements: [{requirements}]\n"
        "---\n"
        f"<objective>\nPlan {plan}: {requirements}\n</objective>\n"
        "<tasks>\n"
        f'<task type="auto"><name>T1</name><files>src/f{plan}.txt</files>'
        f"<action>write src/f{plan}.txt</action><verify>test -f src/f{plan}.txt</verify>"
        "<done>written</done></task>\n"
        "</tasks>\n"
    )


def make_gsd_project(root: Path, *, config: dict[str, Any] | None = None, git: bool = True) -> Path:
    """A GSD-format project: config, ROADMAP, REQUIREMENTS, phase 1 with plans 01 and 02 in
    wave 1 and 03 (depending on both) in wave 2; a git repository with one commit (the drift and
    UI checks of the reference read git)."""
    project = root / "project"
    phase = project / ".planning" / "phases" / PHASE
    phase.mkdir(parents=True)
    planning = project / ".planning"
    (planning / "config.json").write_text(json.dumps(config or config_with_features(), indent=2))
    (planning / "ROADMAP.md").write_text(ROADMAP)
    (planning / "REQUIREMENTS.md").write_text(REQUIREMENTS)
    for plan, wave, deps in (("01", 1, []), ("02", 1, []), ("03", 2, ["01-01", "01-02"])):
        (phase / f"01-{plan}-PLAN.md").write_text(
            plan_text(plan, wave=wave, depends_on=deps, requirements="REQ-01, REQ-02")
        )
    if git:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", **_committer()}
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
            subprocess.run(["git", *args], cwd=project, env=env, check=True, timeout=30)
    return project


def _committer() -> dict[str, str]:
    return {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


# ── role agents and skills ────────────────────────────────────────────────────────────────────

_OK = "#!/bin/sh\nexit 0\n"

ROLE_SCRIPTS = {
    # discuss writes CONTEXT.md; ship has nothing to write here
    "agents/orchestrator": (
        "#!/bin/sh\n"
        'if [ "$LOOPRAIL_NAME" = discuss ]; then\n'
        '  printf "# Context\\n\\n<decisions>\\n</decisions>\\n" > "$LOOPRAIL_PHASE_DIR/01-CONTEXT.md"\n'
        "fi\n"
        "exit 0\n"
    ),
    "agents/planner": _OK,  # the plans exist already
    # each task writes the file its plan names
    "agents/executor": (
        "#!/bin/sh\n"
        'mkdir -p src && plan="${LOOPRAIL_PLAN_ID#*-}" && echo "$LOOPRAIL_TASK_ID" > "src/f$plan.txt"\n'
    ),
    "agents/verifier": (
        "#!/bin/sh\n"
        'printf -- "---\\nstatus: passed\\n---\\n# Verification\\n" '
        '> "$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md"\n'
    ),
    # verify:post security review: a SECURITY.md with no open threats (the ship:pre gate reads it)
    "skills/gsd-secure-phase": (
        "#!/bin/sh\n"
        'printf -- "---\\nthreats_open: ${LOOPRAIL_TEST_THREATS_OPEN:-0}\\n---\\n# Security\\n" '
        '> "$LOOPRAIL_PHASE_DIR/01-SECURITY.md"\n'
    ),
}


def manifest_step_names(capabilities: Path, flavor: str = "gsd") -> set[str]:
    """`skills/<flavor>-<skill>` and `agents/<agent>` for every step of every manifest."""
    names: set[str] = set()
    for manifest in sorted(capabilities.glob("*/capability.json")):
        data = json.loads(manifest.read_text())
        for hook in [*data.get("steps", []), *data.get("hooks", [])]:
            ref = hook.get("ref") or {}
            if isinstance(ref.get("skill"), str):
                names.add(f"skills/{flavor}-{ref['skill']}")
            if isinstance(ref.get("agent"), str):
                names.add(f"agents/{ref['agent']}")
    return names


def write_executables(project: Path, capabilities: Path | None = None) -> list[str]:
    """The role agents, plus a no-op skill/agent for every step the manifests name; returns
    the paths written (relative to `.looprail/`)."""
    root = project / ".looprail"
    scripts = dict.fromkeys(manifest_step_names(capabilities) if capabilities else (), _OK)
    scripts.update(ROLE_SCRIPTS)
    for rel, text in scripts.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    return sorted(scripts)


def write_ledger(project: Path, statuses: list[str]) -> None:
    """A broken-windows ledger `.planning/WINDOWS.md` with one entry per status."""
    entries = [
        {
            "id": i + 1,
            "kind": "todo",
            "phase": "1",
            "file": "src/x.py",
            "line": None,
            "description": f"window {i + 1}",
            "status": status,
            "reason": "" if status == "open" else "because",
            "recorded_at": "2026-01-01T00:00:00.000Z",
            "resolved_at": None,
        }
        for i, status in enumerate(statuses)
    ]
    counts = {s: statuses.count(s) for s in ("open", "waived", "fixed")}
    (project / ".planning" / "WINDOWS.md").write_text(
        "---\nschema_version: 1\n"
        f"open_count: {counts['open']}\nwaived_count: {counts['waived']}\n"
        f"fixed_count: {counts['fixed']}\ntotal_count: {len(statuses)}\n"
        "last_updated: 2026-01-01T00:00:00.000Z\n---\n\n# Broken Windows Ledger\n\n"
        f"````json\n{json.dumps(entries, indent=2)}\n````\n"
    )
