"""The project-folder check is written once (`fsutil.project_folder`): every command and
library entry point refuses a missing folder with the same line, the name shown escaped."""

from __future__ import annotations

import ast

import pytest

from looprail.cli import main
from looprail.errors import UsageError
from looprail.fsutil import project_folder
from tests.support import REPO
from tests.support.source import modules, nodes

PACKAGE = REPO / "looprail"


def test_the_wording_lives_in_one_module():
    holders = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in modules()
        for node in nodes(path)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "no such project folder" in node.value
    )
    assert holders == ["fsutil.py"]


def test_a_hostile_name_is_escaped_and_cut(tmp_path):
    name = str(tmp_path / ("bad\x1b[31mname\n" + "x" * 300))
    with pytest.raises(UsageError) as caught:
        project_folder(name, label="--project: ")
    line = str(caught.value)
    assert line.startswith("--project: ") and line.endswith(": no such project folder")
    assert "\x1b" not in line and "\n" not in line and "…" in line


@pytest.mark.parametrize(
    "argv",
    [["lint", "--project", "{}"], ["history", "--project", "{}"], ["ui", "{}"]],
)
def test_commands_refuse_a_missing_project_with_one_line(tmp_path, capsys, argv):
    missing = str(tmp_path / "nope")
    code = main([a.replace("{}", missing) for a in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().endswith(f"{missing}: no such project folder")
    assert len(err.strip().splitlines()) == 1


def test_the_library_refuses_it_too(tmp_path):
    from looprail.lint import lint_project

    with pytest.raises(UsageError, match="no such project folder"):
        lint_project(tmp_path / "nope")
