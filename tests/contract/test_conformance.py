"""The reference's golden outputs: for every scenario in ../shared/conformance/render-hooks,
`looprail loop render-hooks <point> --raw` over the 44 first-party capabilities prints an envelope
equal as JSON to the recorded one, exits alike, and answers `--active-cap` alike."""

from __future__ import annotations

import json

import pytest

from looprail.points import POINTS
from tests.support import CONFORMANCE, GSD_CAPABILITIES, run_cli, write_config

pytestmark = pytest.mark.skipif(
    not (CONFORMANCE / "render-hooks").is_dir(),
    reason="../shared/conformance is absent (a plain clone): conformance goldens not available",
)

SCENARIOS = sorted((CONFORMANCE / "render-hooks").glob("*.json")) if CONFORMANCE.is_dir() else []


def _project(tmp_path, scenario):
    project = tmp_path / "project"
    project.mkdir()
    if scenario["config_json"] is not None:
        cfg = scenario["config_json"]
        write_config(project, cfg if isinstance(cfg, str) else json.dumps(cfg))
    return project


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_render_hooks_matches_reference_in_process(tmp_path, path):
    """Every point of every scenario through the same code the CLI runs (fast, exhaustive)."""
    from looprail.cli import main

    scenario = json.loads(path.read_text())
    project = _project(tmp_path, scenario)
    for result in scenario["results"]:
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(
                [
                    "loop",
                    "render-hooks",
                    result["point"],
                    "--raw",
                    "--project",
                    str(project),
                    "--capabilities",
                    str(GSD_CAPABILITIES),
                ]
            )
        assert (code == 0) == (result["exit"] == 0), (result["point"], err.getvalue())
        if result["exit"] == 0:
            assert json.loads(out.getvalue()) == result["stdout"], result["point"]
        else:
            assert out.getvalue() == ""
            assert "Valid points: " + ", ".join(POINTS) in err.getvalue()


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_active_cap_matches_reference(tmp_path, path):
    from looprail.config import load_project_config
    from looprail.hooks.compiled import load_compiled
    from looprail.hooks.resolve import active_cap

    scenario = json.loads(path.read_text())
    project = _project(tmp_path, scenario)
    compiled = load_compiled(project, [GSD_CAPABILITIES])
    config, _ = load_project_config(project)
    for point in POINTS:
        expected = set(scenario["active_cap_true"].get(point, []))
        table = compiled.hooks_at(point)
        checked = {h["capId"] for g in ("steps", "contributions", "gates") for h in table[g]}
        checked |= {"security", "no-such-cap"}
        got = {cid for cid in checked if active_cap(compiled, config, point, cid)}
        assert got == expected, point


@pytest.mark.parametrize("path", SCENARIOS[:2], ids=lambda p: p.stem)
def test_render_hooks_cli_subprocess(tmp_path, path):
    """The real console process, for a few points (the in-process test covers them all)."""
    scenario = json.loads(path.read_text())
    project = _project(tmp_path, scenario)
    by_point = {r["point"]: r for r in scenario["results"]}
    for point in ("plan:pre", "ship:pre", "execute:task"):
        r = by_point[point]
        proc = run_cli(
            "loop",
            "render-hooks",
            point,
            "--raw",
            "--project",
            str(project),
            "--capabilities",
            str(GSD_CAPABILITIES),
        )
        assert (proc.returncode == 0) == (r["exit"] == 0)
        if r["exit"] == 0:
            assert json.loads(proc.stdout) == r["stdout"]
        else:
            assert "Traceback" not in proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1
        for cap in ("security", "no-such-cap"):
            proc = run_cli(
                "loop",
                "render-hooks",
                point,
                "--active-cap",
                cap,
                "--project",
                str(project),
                "--capabilities",
                str(GSD_CAPABILITIES),
            )
            if r["exit"] == 0:
                expected = cap in scenario["active_cap_true"].get(point, [])
                assert proc.stdout.strip() == ("true" if expected else "false")


def test_every_first_party_manifest_validates():
    proc = run_cli("capability", "validate", str(GSD_CAPABILITIES))
    assert proc.returncode == 0, proc.stderr
    assert "44 valid, 0 invalid" in proc.stdout
