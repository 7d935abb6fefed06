"""The documentation site (mkdocs.yml): the getting-started page runs the README's two
commands, the site builds with --strict, its API reference documents every name `looprail`
and `looprail.testing` export, the diagrams are served from diagrams/, and a public class or
function without a docstring fails the strict build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types

import pytest

from tests.support import REPO


def _quick_start(markdown: str) -> list[str]:
    """The lines of the first sh block that starts by setting up a virtual environment."""
    found = re.search(r"```sh\n(python3 -m venv \.venv .*?)```", markdown, re.DOTALL)
    assert found, "no sh block starting with `python3 -m venv .venv`"
    return found[1].splitlines()


def test_the_readmes_two_commands_are_what_ci_and_getting_started_run():
    readme = _quick_start((REPO / "README.md").read_text())
    assert len(readme) == 2  # install; ship the example
    assert all(len(line) < 140 and " # " not in line for line in readme)  # copyable lines
    assert _quick_start((REPO / "docs" / "getting-started.md").read_text()) == readme
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert all(line in ci for line in readme), "`.ci/run` no longer runs the README's commands"


def test_the_readme_is_a_first_page_and_the_reference_lives_in_docs():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 80 and len(readme.split()) < 700
    assert re.findall(r"^## (.*)$", readme, re.MULTILINE) == [
        "Quick start",
        "On your GSD project",
        "Read more",
    ]
    gsd = readme.split("## On your GSD project", 1)[1].split("```sh\n", 1)[1].split("```")[0]
    assert [line.split()[:2] for line in gsd.splitlines()] == [["looprail", "init"]] + [
        ["looprail", "run"]
    ] * 2
    assert "docs/reference.md" in readme and "reference.md" in (REPO / "mkdocs.yml").read_text()


def _mkdocs_hooks() -> types.ModuleType:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import mkdocs_hooks
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return mkdocs_hooks


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for module in ("mkdocs", "mkdocstrings_handlers.python", "material"):
        pytest.importorskip(module, reason="the docs extra is not installed")
    out = tmp_path_factory.mktemp("site")
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def test_the_api_reference_documents_every_export(site):
    import looprail
    import looprail.testing

    hooks = _mkdocs_hooks()
    page = (site / "api" / "index.html").read_text()
    anchors = set(re.findall(r'<h3 id="([^"]+)"', page))
    for module in (looprail, looprail.testing):
        for name in module.__all__:
            if name.startswith("__"):
                continue
            target = hooks.api_target(module.__name__, name, getattr(module, name))
            assert target in anchors, f"{module.__name__}.{name} is not in the API reference"
    # the runtime plugin interface and the pytest plugin's fixtures
    assert {"looprail.runtime.base.BaseRuntime", "looprail.runtime.base.Request"} <= anchors
    assert "looprail.testing.plugin.loop_harness" in page
    # docstrings are rendered, not only headings
    assert "What the state machine calls" in page


def test_diagrams_and_screenshots_are_served(site):
    for name in ("loop.svg", "hello-loop.svg", "loop.png"):
        assert (site / "diagrams" / name).read_bytes() == (REPO / "diagrams" / name).read_bytes()
    assert (
        '<img alt="looprail loop" src="loop.svg"' in (site / "diagrams" / "index.html").read_text()
    )
    assert (site / "ui-live.png").is_file() and (site / "ui-halted.png").is_file()
    assert (site / "getting-started" / "index.html").is_file()


def test_an_export_without_a_docstring_is_a_warning(monkeypatch, caplog):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    mkdocs_hooks = _mkdocs_hooks()
    fake = types.ModuleType("fake_api")

    def documented() -> None:
        """Has one."""

    def bare() -> None:
        pass

    documented.__module__ = bare.__module__ = "fake_api"  # defined there, as an export is
    fake.documented, fake.bare = documented, bare
    fake.__all__ = ["__version__", "documented", "bare"]
    fake.__version__ = "1"
    monkeypatch.setitem(sys.modules, "fake_api", fake)
    with caplog.at_level("WARNING", logger="mkdocs.hooks.looprail"):
        md = mkdocs_hooks._api_blocks("fake_api", "api.md", set())
    assert md.splitlines() == ["::: fake_api.documented", "", "::: fake_api.bare"]
    assert [r.getMessage() for r in caplog.records] == ["api.md: fake_api.bare has no docstring"]
