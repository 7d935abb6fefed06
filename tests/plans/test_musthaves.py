"""`looprail check artifacts PLAN` and `check key-links PLAN`: a plan's must_haves against the
project's files (docs/checks.md, "must_haves"), through the CLI; the JavaScript regex dialect
of a key link's pattern (`plans/jsregex.py`) against node where node is installed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.plans.jsregex import js_regex
from tests.support import examples, run_cli

PLAN = ".planning/phases/01-x/01-01-PLAN.md"


def project(tmp_path: Path, must_haves: str, files: dict[str, str], wave: int = 1) -> Path:
    plan = tmp_path / PLAN
    plan.parent.mkdir(parents=True)
    plan.write_text(
        f"---\nphase: 01-x\nplan: 01\nwave: {wave}\nmust_haves:\n{must_haves}---\n"
        "<tasks><task><name>t</name></task></tasks>\n"
    )
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def check(root: Path, command: str, *extra: str) -> tuple[int, dict | str, str]:
    result = run_cli("check", command, PLAN, *extra, "--project", str(root))
    out = result.stdout.strip()
    if result.returncode == 0 and not extra:
        return 0, json.loads(out), result.stderr
    return result.returncode, out, result.stderr


ARTIFACTS = """\
  artifacts:
    - path: src/app.py
      min_lines: 3
      contains: "def main"
      exports: [main, helper]
"""


def test_an_artifact_that_keeps_its_promises_passes(tmp_path: Path) -> None:
    root = project(
        tmp_path, ARTIFACTS, {"src/app.py": "def main():\n    helper()\ndef helper(): ..."}
    )
    code, report, _ = check(root, "artifacts")
    assert code == 0
    assert report == {
        "all_passed": True,
        "passed": 1,
        "total": 1,
        "artifacts": [{"path": "src/app.py", "exists": True, "issues": [], "passed": True}],
    }
    assert check(root, "artifacts", "--raw")[1] == "valid"


def test_a_stub_artifact_fails_with_each_broken_promise(tmp_path: Path) -> None:
    root = project(tmp_path, ARTIFACTS, {"src/app.py": "pass\n"})
    code, report, _ = check(root, "artifacts")
    assert code == 0  # a verdict, not an error
    assert report["artifacts"][0]["issues"] == [
        "Only 2 lines, need 3",
        "Missing pattern: def main",
        "Missing export: main",
        "Missing export: helper",
    ]
    assert (report["all_passed"], report["passed"]) == (False, 0)
    assert check(root, "artifacts", "--raw")[1] == "invalid"


def test_a_missing_file_and_a_folder_fail(tmp_path: Path) -> None:
    must = "  artifacts:\n    - path: gone.py\n    - path: tests/\n"
    root = project(tmp_path, must, {"tests/test_a.py": "x"})
    _, report, _ = check(root, "artifacts")
    assert [(a["exists"], a["issues"]) for a in report["artifacts"]] == [
        (False, ["File not found"]),
        (True, ["Is a folder, not a file"]),  # the reference crashes here (EISDIR)
    ]


def test_a_file_outside_the_project_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("token")
    root = tmp_path / "p"
    must = "  artifacts:\n    - path: link.txt\n      contains: token\n    - path: ../outside/secret.txt\n"
    project(root, must, {})
    (root / "link.txt").symlink_to(outside / "secret.txt")
    _, report, _ = check(root, "artifacts")
    assert [a["issues"] for a in report["artifacts"]] == [["Is outside the project: not read"]] * 2


def test_yaml_is_read_as_yaml(tmp_path: Path) -> None:
    """Escapes and quotes mean what YAML says (the reference keeps them as written)."""
    must = (
        "  artifacts:\n"
        "    - path: a.py\n"
        '      contains: "x = \\"y\\""\n'
        "      exports: ['it''s']\n"
        "  key_links:\n"
        "    - from: a.py\n"
        "      to: b.py\n"
        '      pattern: "x\\\\s*=\\\\s*\\""\n'
    )
    root = project(tmp_path, must, {"a.py": 'x = "y"\nit\'s\n'})
    assert check(root, "artifacts", "--raw")[1] == "valid"
    _, report, _ = check(root, "key-links")
    assert report["links"][0]["detail"] == "Pattern found in source"


LINKS = """\
  key_links:
    - from: src/app.py
      to: src/db.py
      via: import
      pattern: "from db import"
    - from: src/app.py
      to: src/db.py
      via: the target holds it
      pattern: "def connect"
    - from: src/app.py
      to: src/db.py
"""


def test_key_links_found_in_source_or_target(tmp_path: Path) -> None:
    files = {"src/app.py": "from db import connect  # src/db.py", "src/db.py": "def connect(): ..."}
    _, report, _ = check(project(tmp_path, LINKS, files), "key-links")
    assert [(link["verified"], link["detail"]) for link in report["links"]] == [
        (True, "Pattern found in source"),
        (True, "Pattern found in target"),
        (True, "Target referenced in source"),  # no pattern: `from` names `to`
    ]
    assert (report["all_verified"], report["verified"], report["pending"], report["total"]) == (
        True,
        3,
        0,
        3,
    )
    assert [link["from"] for link in report["links"]] == ["src/app.py"] * 3


def test_a_missing_key_link_fails(tmp_path: Path) -> None:
    files = {"src/app.py": "print('no link')", "src/db.py": ""}
    root = project(tmp_path, LINKS, files)
    _, report, _ = check(root, "key-links")
    assert report["links"][0] == {
        "from": "src/app.py",
        "to": "src/db.py",
        "via": "import",
        "verified": False,
        "detail": 'Pattern "from db import" not found in source or target',
    }
    assert check(root, "key-links", "--raw")[1] == "invalid"


def test_a_source_a_later_wave_writes_is_pending(tmp_path: Path) -> None:
    must = "  key_links:\n    - from: src/later.py\n      to: x\n    - from: src/never.py\n      to: x\n"
    root = project(tmp_path, must, {})
    (root / PLAN).with_name("01-02-PLAN.md").write_text(
        "---\nwave: 2\nfiles_modified: [src/later.py]\n---\n<tasks><task><name>t</name></task></tasks>\n"
    )
    _, report, _ = check(root, "key-links")
    assert report["links"][0]["pending"] is True
    assert "pending" not in report["links"][1]
    assert (report["verified"], report["pending"], report["all_verified"]) == (0, 1, False)


def test_bad_input_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    root = project(tmp_path, "  truths: [it works]\n", {})
    for command in ("artifacts", "key-links"):
        code, out, err = check(root, command)
        assert code == 1 and out == ""
        assert err.strip().splitlines() == [
            f"looprail: error: {PLAN}: must_haves.{command.replace('-', '_')}: none to check"
        ]
    result = run_cli("check", "artifacts", "nope.md", "--project", str(root))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "nope.md" in result.stderr


def test_text_entries_are_warned_and_not_passed(tmp_path: Path) -> None:
    root = project(tmp_path, '  artifacts:\n    - "src/a.tsx — the sidebar"\n', {})
    code, _, err = check(root, "artifacts")
    assert code == 1
    assert "must_haves.artifacts[0]: text, not a mapping with a path; not checked" in err


# --- the JavaScript dialect ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        ("end$", "the end\n", False),  # `$` is the end of the text in JavaScript
        ("end$", "the end", True),
        (r"\d+", "٣", False),  # \d is ASCII
        (r"a\sb", "a\u00a0b", True),  # \s is Unicode
        ("(?<word>ab)\\k<word>", "abab", True),
        ("[^]", "\n", True),
        ("x[]", "x", False),
        ("a{,2}", "a{,2}", True),  # text, not a quantifier
        ("[[]", "[", True),
    ],
)
def test_javascript_regex_dialect(pattern: str, text: str, found: bool) -> None:
    assert bool(js_regex(pattern).search(text)) is found


NODE = shutil.which("node")
TOKENS = ["a", "b", ".", "*", "+", "?", "$", "^", "\\d", "\\s", "\\w", "\\b", "[ab]", "[^a]",
          "(", ")", "|", "{1,2}", "{,2}", "\\.", " ", "\n", "[]", "[^]", "1", "(?:", "(?=",
          "(?!", "\\/", "-", "]", "{", "}"]  # fmt: skip


@pytest.mark.skipif(NODE is None, reason="node needed")
@settings(deadline=None, max_examples=examples(40))
@given(
    patterns=st.lists(st.lists(st.sampled_from(TOKENS), max_size=6).map("".join), min_size=20),
    text=st.text(alphabet="ab1 .\n\u00a0٣", max_size=12),
)
def test_the_dialect_agrees_with_node(patterns: list[str], text: str) -> None:
    script = (
        "const [ps, t] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(ps.map(p => { try { return new RegExp(p).test(t) }"
        " catch { return null } })))"
    )
    node = subprocess.run(
        [NODE, "-e", script], input=json.dumps([patterns, text]), capture_output=True, text=True
    )
    for pattern, theirs in zip(patterns, json.loads(node.stdout), strict=True):
        try:
            ours: bool | None = bool(js_regex(pattern).search(text))
        except Exception:
            ours = None
        assert ours == theirs, (pattern, text)  # None: invalid in both
