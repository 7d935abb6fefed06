"""`looprail loop render-hooks` and `looprail capability …` through the CLI (in process; the first
test runs a real subprocess)."""

from __future__ import annotations

import json

from tests.support import feature, run_cli, write_capability, write_config


def step(skill, **kw):
    base = {
        "point": "plan:pre",
        "ref": {"skill": skill},
        "produces": [],
        "consumes": [],
        "onError": "skip",
    }
    base.update(kw)
    return base


def setup(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    root = tmp_path / "caps"
    write_capability(root, feature("cap", skills=["s"], steps=[step("s")]))
    return project, root


def test_raw_envelope_and_human_form(tmp_path):
    project, root = setup(tmp_path)
    p = run_cli(
        "loop",
        "render-hooks",
        "plan:pre",
        "--raw",
        "--project",
        str(project),
        "--capabilities",
        str(root),
        subprocess=True,
    )
    assert p.returncode == 0, p.stderr
    env = json.loads(p.stdout)
    assert env["activeHooks"] == [
        {"capId": "cap", "kind": "step", "ref": {"skill": "s"}, "onError": "skip"}
    ]
    p = run_cli(
        "loop", "render-hooks", "plan:pre", "--project", str(project), "--capabilities", str(root)
    )
    assert p.stdout.startswith("### Step 1: skill:s (cap)")


def test_invalid_point_is_one_line_listing_points(tmp_path):
    project, root = setup(tmp_path)
    p = run_cli("loop", "render-hooks", "plan", "--raw", "--project", str(project))
    assert p.returncode != 0 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "ship:post" in lines[0] and "Traceback" not in p.stderr


def test_project_defaults_to_cwd_and_env_capabilities(tmp_path):
    project, root = setup(tmp_path)
    p = run_cli(
        "loop",
        "render-hooks",
        "plan:pre",
        "--active-cap",
        "cap",
        cwd=project,
        env={"LOOPRAIL_CAPABILITIES": str(root)},
    )
    assert p.stdout.strip() == "true"
    p = run_cli(
        "loop",
        "render-hooks",
        "ship:pre",
        "--active-cap",
        "cap",
        cwd=project,
        env={"LOOPRAIL_CAPABILITIES": str(root)},
    )
    assert p.stdout.strip() == "false" and p.returncode == 0


def test_strict_fails_on_fail_open_warning(tmp_path):
    project, root = setup(tmp_path)
    write_capability(
        project / ".looprail" / "capabilities",
        feature(
            "broken",
            gates=[
                {"point": "ship:pre", "check": {"query": "q"}, "blocking": "yes", "onError": "skip"}
            ],
        ),
    )
    p = run_cli("loop", "render-hooks", "ship:pre", "--raw", "--project", str(project))
    assert p.returncode == 0 and "broken" in json.loads(p.stdout)["warnings"][0]
    assert "broken" in p.stderr
    p = run_cli("loop", "render-hooks", "ship:pre", "--raw", "--strict", "--project", str(project))
    assert p.returncode == 1


def test_malformed_config_warns_once_and_still_answers(tmp_path):
    project, root = setup(tmp_path)
    write_config(project, "{oops")
    p = run_cli(
        "loop",
        "render-hooks",
        "plan:pre",
        "--raw",
        "--project",
        str(project),
        "--capabilities",
        str(root),
    )
    assert p.returncode == 0
    assert p.stderr.count("not valid JSON") == 1


def test_unknown_config_key_warns(tmp_path):
    project, root = setup(tmp_path)
    write_config(project, {"workflow": {"reserch": True}, "mode": "yolo"})
    p = run_cli(
        "loop",
        "render-hooks",
        "plan:pre",
        "--raw",
        "--project",
        str(project),
        "--capabilities",
        str(root),
    )
    assert "'workflow.reserch' is not declared" in p.stderr
    assert "mode" not in p.stderr


def test_capability_validate_reports_every_error_and_exits_1(tmp_path):
    root = tmp_path / "caps"
    write_capability(root, feature("good"))
    write_capability(root, feature("bad", steps=[step("nope", when="x.y")]))
    p = run_cli("capability", "validate", str(root))
    assert p.returncode == 1
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 2
    assert all("bad/capability.json: $.steps[0]" in e for e in errors)
    assert "1 valid, 1 invalid" in p.stdout
    p = run_cli("capability", "validate", str(root), "--json")
    data = json.loads(p.stdout)
    assert data["ok"] is False and data["valid"] == ["good"] and len(data["errors"]) == 2


def test_capability_validate_single_folder(tmp_path):
    d = write_capability(tmp_path, feature("solo"))
    p = run_cli("capability", "validate", str(d))
    assert p.returncode == 0 and "1 valid" in p.stdout


def test_capability_list_shows_activeness(tmp_path):
    project, root = setup(tmp_path)
    write_capability(
        root,
        feature(
            "gated", config={"g.on": {"type": "boolean", "default": False}}, activationKey="g.on"
        ),
    )
    p = run_cli(
        "capability", "list", "--json", "--project", str(project), "--capabilities", str(root)
    )
    rows = {r["id"]: r for r in json.loads(p.stdout)["capabilities"]}
    assert rows["cap"]["active"] is True and rows["cap"]["points"] == ["plan:pre"]
    assert rows["gated"]["active"] is False and "activationKey" in rows["gated"]["reason"]


def test_capability_remove_only_overlays(tmp_path):
    project, root = setup(tmp_path)
    d = write_capability(project / ".looprail" / "capabilities", feature("extra"))
    p = run_cli("capability", "remove", "extra", "--project", str(project))
    assert p.returncode == 0 and not d.exists()
    p = run_cli("capability", "remove", "cap", "--project", str(project))
    assert p.returncode == 2 and "no such overlay capability" in p.stderr


def test_schema_capability(tmp_path):
    p = run_cli("schema", "capability")
    assert p.returncode == 0 and json.loads(p.stdout)["title"] == "looprail capability.json"


def test_an_over_long_path_is_one_line_not_a_traceback(tmp_path):
    long = "d" * 5000
    for args in (
        ("loop", "render-hooks", "plan:pre", "--capabilities", long),
        ("capability", "validate", long),
        ("capability", "list", "--capabilities", long),
    ):
        out = run_cli(*args, "--project", str(tmp_path), cwd=tmp_path)
        assert "Traceback" not in out.stderr, args
        assert out.stderr.count("\n") <= 2, (args, out.stderr)


def test_phase_context(tmp_path):
    project, root = setup(tmp_path)
    (project / ".planning" / "phases" / "02-api").mkdir(parents=True)
    base = (
        "loop",
        "render-hooks",
        "plan:pre",
        "--raw",
        "--project",
        str(project),
        "--capabilities",
        str(root),
    )
    env = json.loads(run_cli(*base, "--phase", "2").stdout)
    assert env["context"] == {"phase": "2", "phaseDir": ".planning/phases/02-api"}
    assert "warnings" not in env
    env = json.loads(run_cli(*base, "--phase", "7").stdout)
    assert "context" not in env and "no phase folder" in env["warnings"][0]
    assert "context" not in json.loads(run_cli(*base).stdout)
