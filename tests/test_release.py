"""One version, written once in `looprail/_version.py`: `looprail --version`, the package
metadata (the installed one and a freshly built wheel's) and the journal's records of a real
run agree with it, and no module reads it from the root package."""

from __future__ import annotations

import ast
import email
import json
import subprocess
import sys
import tomllib
import zipfile

import pytest

from looprail._version import __version__
from looprail.journal.writer import Journal
from tests.support import EXAMPLE_CAPS, REPO, run_cli
from tests.support.source import modules, nodes


def test_the_version_is_written_once():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "looprail/_version.py"
    import looprail

    assert looprail.__version__ is __version__


def test_version_flag_and_installed_metadata_agree():
    from importlib.metadata import version

    p = run_cli("--version", subprocess=True)  # the fast path: no parser built
    assert p.returncode == 0 and p.stdout == f"looprail {__version__}\n"
    # through the parser (argparse's version action), the same
    p = subprocess.run(
        [sys.executable, "-m", "looprail", "-q", "--version"], capture_output=True, text=True
    )
    assert p.returncode == 0 and p.stdout == f"looprail {__version__}\n"
    assert version("looprail") == __version__


def test_a_built_wheel_carries_the_version(tmp_path):
    pytest.importorskip("build")
    pytest.importorskip("hatchling")
    p = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    (wheel,) = tmp_path.glob("looprail-*.whl")
    assert wheel.name.startswith(f"looprail-{__version__}-")
    with zipfile.ZipFile(wheel) as zf:
        meta = email.message_from_bytes(zf.read(f"looprail-{__version__}.dist-info/METADATA"))
        shipped = zf.read("looprail/_version.py").decode()
    assert meta["Version"] == __version__
    assert f'__version__ = "{__version__}"' in shipped


def test_the_journal_records_the_version_that_ran_and_resumed(hello):
    args = ("run", str(hello), "--phase", "1", "--capabilities", str(EXAMPLE_CAPS))
    config = hello / ".planning" / "config.json"
    settings = json.loads(config.read_text())
    settings["release"]["allow_ship"] = False
    config.write_text(json.dumps(settings))
    halted = run_cli(*args)
    assert halted.returncode == 1, halted.stderr
    settings["release"]["allow_ship"] = True
    config.write_text(json.dumps(settings))
    shipped = run_cli(*args)
    assert shipped.returncode == 0, shipped.stderr
    with Journal.open_readonly(hello) as journal:
        run = journal.latest_run()
        assert run is not None and run.status == "shipped"
        events = journal.events(run.id, kinds=["run_started", "run_resumed"])
    assert [e.kind for e in events] == ["run_started", "run_resumed"]
    assert [e.data["looprail"] for e in events] == [__version__, __version__]


def test_no_module_reads_the_version_from_the_root_package():
    """`from looprail import __version__` inside the package would make every module that
    needs the version import the root package (and so its lazy re-exports' table): the small
    `looprail._version` is the one to import."""
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in modules()
        for node in nodes(path)
        if isinstance(node, ast.ImportFrom)
        and node.module == "looprail"
        and any(a.name == "__version__" for a in node.names)
    ]
    assert found == []


def test_contributors_ci_runs_the_projects_ci_script():
    import yaml

    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    assert set(workflow[True]) == {"push", "pull_request"}  # YAML 1.1 reads `on:` as True
    (job,) = workflow["jobs"].values()
    assert [s["run"] for s in job["steps"] if "run" in s] == ["bash .ci/run"]
    assert job["timeout-minutes"] <= 90  # CI's own limit for one .ci/run
