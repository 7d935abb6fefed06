"""GSD found where its own installer put it: real installs made by the reference's
`bin/install.js` in the test's HOME, read through `lint`, `doctor` and `run`.

Skips without node or the reference (`LOOPRAIL_REFERENCE`, its `gsd-tools.cjs`).
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import EXAMPLE, run_cli, write_config

REFERENCE = os.environ.get("LOOPRAIL_REFERENCE")
INSTALLER = Path(REFERENCE).resolve().parents[2] / "bin" / "install.js" if REFERENCE else None
SOURCE_CAPABILITIES = INSTALLER.parents[1] / "capabilities" if INSTALLER else None

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="needs node"),
    pytest.mark.skipif(
        INSTALLER is None or not INSTALLER.is_file(), reason="the reference's installer is absent"
    ),
]


def install(home: Path, *flags: str, cwd: Path | None = None) -> None:
    """GSD installed by its own installer, offline, into `home`."""
    assert INSTALLER is not None
    done = subprocess.run(
        ["node", str(INSTALLER), *flags],
        cwd=cwd or home,
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def gsd_project(tmp_path: Path, config: dict | None = None) -> Path:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    if config is not None:
        write_config(project, config)
    return project


def installed_tools(home: Path) -> set[Path]:
    """Every gsd-tools.cjs the installer wrote under `home`."""
    return {p.resolve() for p in home.rglob("gsd-tools.cjs") if p.parent.name == "bin"}


def lint_json(project: Path, *args: str) -> dict:
    done = run_cli("lint", str(project), "--json", *args)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_lint_reads_the_capabilities_of_a_real_claude_install(tmp_path, _isolated_home):
    home = _isolated_home
    install(home, "--claude", "--global")
    project = gsd_project(tmp_path)
    root = home / ".claude" / "gsd-core"
    version = (root / "VERSION").read_text().strip()
    count = len(list(SOURCE_CAPABILITIES.glob("*/capability.json")))

    done = run_cli("lint", str(project))
    first = done.stdout.splitlines()[0]
    assert first == (
        f"capabilities: GSD {version} (claude, global) at ~/.claude/gsd-core, {count} "
        "capabilities; host tool: ~/.claude/gsd-core/bin/gsd-tools.cjs"
    )
    assert "no capabilities loaded" not in done.stderr
    assert "manifest-invalid" not in done.stdout
    sources = lint_json(project)["sources"]
    assert sources["hostTool"] == str(root / "bin" / "gsd-tools.cjs")
    assert sources["flavor"] == "gsd" and sources["problems"] == []


def test_the_registry_becomes_the_capability_folders_gsd_was_built_from(tmp_path, _isolated_home):
    """Each manifest of the generated registry, its inlined fragments back in their files, is
    byte for byte the capability folder of GSD's source tree (one parser reads both)."""
    install(_isolated_home, "--claude", "--global")
    run_cli("lint", str(gsd_project(tmp_path)))
    (written,) = (_isolated_home / ".cache" / "looprail" / "gsd-registry").iterdir()
    compared = filecmp.dircmp(written, SOURCE_CAPABILITIES)
    assert sorted(os.listdir(written)) == sorted(
        p.name for p in SOURCE_CAPABILITIES.iterdir() if p.is_dir()
    )
    mismatched = []
    for name in compared.common_dirs:
        for folder, _dirs, files in os.walk(written / name):
            for file in files:
                ours = Path(folder, file)
                theirs = SOURCE_CAPABILITIES / ours.relative_to(written)
                if ours.read_bytes() != theirs.read_bytes():
                    mismatched.append(str(ours.relative_to(written)))
    assert mismatched == []


RUNTIMES = ["claude", "codex", "opencode", "kilo", "copilot", "cline", "pi", "antigravity"]


def test_doctor_finds_every_global_install_the_installer_makes(tmp_path, _isolated_home):
    home = _isolated_home
    for runtime in RUNTIMES:
        install(home, f"--{runtime}", "--global")
    project = gsd_project(tmp_path, {"looprail": {"agent": "local"}})
    done = run_cli("doctor", str(project), "--json")
    messages = [c["message"] for c in json.loads(done.stdout)["checks"]]
    found = {line for line in messages if " at " in line and "GSD " in line}
    shown = {line.split(" at ", 1)[1].split(",")[0].split(":")[0] for line in found}
    named = {Path(os.path.expanduser(p.replace("~", str(home), 1))) for p in shown}
    assert {p / "bin" / "gsd-tools.cjs" for p in named} == installed_tools(home)
    # the first in the installer's runtime order is used, the others are said
    assert any(m.startswith("capabilities: GSD") and "(claude, global)" in m for m in messages)
    assert sum("also installed, not used" in m for m in messages) == len(RUNTIMES) - 1


def test_the_agents_own_install_is_preferred(tmp_path, _isolated_home):
    install(_isolated_home, "--claude", "--global")
    install(_isolated_home, "--codex", "--global")
    project = gsd_project(tmp_path)
    config = json.loads((project / ".planning" / "config.json").read_text())
    config.setdefault("looprail", {})["agent"] = "codex"
    write_config(project, config)
    sources = lint_json(project)["sources"]
    assert "(codex, global)" in sources["capabilities"]
    assert sources["hostTool"] == str(_isolated_home / ".codex/gsd-core/bin/gsd-tools.cjs")


def test_a_project_local_install_is_said_and_used_only_when_named(tmp_path, _isolated_home):
    project = gsd_project(tmp_path)
    install(_isolated_home, "--claude", "--local", cwd=project)
    local = project / ".claude" / "gsd-core"

    done = run_cli("lint", str(project))
    assert "not read on its own (it came with the project" in done.stdout
    assert f"--capabilities {local}" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if "no capabilities loaded" in line]
    assert len(warnings) == 1

    sources = lint_json(project, "--capabilities", str(local))["sources"]
    assert sources["hostTool"] == str(local / "bin" / "gsd-tools.cjs")
    named = run_cli("lint", str(project), "--capabilities", str(local))
    assert "no capabilities loaded" not in named.stderr


def test_the_config_names_capabilities_host_tool_and_flavor(tmp_path, _isolated_home):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    install(elsewhere, "--claude", "--global")  # an install the search would not find
    project = gsd_project(tmp_path)
    config = json.loads((project / ".planning" / "config.json").read_text())
    config["looprail"] = {
        **config.get("looprail", {}),
        "capabilities": [str(elsewhere / ".claude")],
        "host_tool": "bin/my-tool",
        "flavor": "msd",
    }
    write_config(project, config)
    sources = lint_json(project)["sources"]
    version = (elsewhere / ".claude" / "gsd-core" / "VERSION").read_text().strip()
    assert sources["capabilities"] == (
        f".planning/config.json (looprail.capabilities): GSD {version} (named) at "
        f"{elsewhere / '.claude' / 'gsd-core'}"
    )
    assert sources["hostTool"] == str(project.resolve() / "bin" / "my-tool")
    assert sources["flavor"] == "msd"
    # a flag still wins
    flagged = lint_json(project, "--flavor", "gsd", "--host-tool", "gsd_run")["sources"]
    assert (flagged["flavor"], flagged["hostTool"]) == ("gsd", "gsd_run")


def test_config_capabilities_inside_the_project_are_refused(tmp_path):
    project = gsd_project(tmp_path, {"looprail": {"capabilities": ["vendored/caps"]}})
    done = run_cli("lint", str(project))
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert ".planning/config.json" in line and "looprail.capabilities" in line
    assert "inside the project" in line and "Traceback" not in done.stderr


def test_a_run_says_where_its_capabilities_came_from_first(tmp_path, _isolated_home):
    install(_isolated_home, "--claude", "--global")
    project = gsd_project(tmp_path)
    done = run_cli("run", str(project), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0].startswith("capabilities: GSD ")


def test_a_run_with_no_capabilities_warns_once_before_it_starts(tmp_path):
    project = gsd_project(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    done = run_cli("run", str(project), "--phase", "1")
    lines = done.stderr.splitlines()
    assert lines[0] == "capabilities: no GSD install found; host tool: none"
    assert lines[1].startswith("looprail: warning: no capabilities loaded (no GSD install found)")
    assert sum("no capabilities loaded" in line for line in lines) == 1
    assert lines[2].startswith("run ")


def test_gsd_overlays_are_searched_with_their_trust(tmp_path, _isolated_home):
    """`~/.gsd/capabilities` is the user's (trusted); `<project>/.gsd/capabilities` came with
    the project: inactive until `looprail trust`."""
    assert SOURCE_CAPABILITIES is not None
    shutil.copytree(SOURCE_CAPABILITIES / "tdd", _isolated_home / ".gsd" / "capabilities" / "tdd")
    project = gsd_project(tmp_path)
    shutil.copytree(SOURCE_CAPABILITIES / "drift", project / ".gsd" / "capabilities" / "drift")

    def rows() -> dict:
        done = run_cli("capability", "list", "--project", str(project), "--json")
        return {r["id"]: r for r in json.loads(done.stdout)["capabilities"]}

    before = rows()
    assert before["tdd"]["origin"] == "global"
    assert before["drift"]["origin"] == "project" and "no consent" in str(before["drift"])
    assert run_cli("trust", "--project", str(project), "--yes").returncode == 0
    assert "no consent" not in str(rows()["drift"])
