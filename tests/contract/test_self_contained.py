"""The repository stands on its own: code and docs cite `docs/contract.md`, not documents that
only exist outside it (the design notes, the seed files, ADR numbers of another project)."""

from __future__ import annotations

import re

from tests.support import REPO

OUTSIDE = re.compile(
    r"DESIGN\.md|\bseeds?/|\bseeds? \d+\b|\bADR[- ]?\d+|gsd-core\.md|reference/[a-z-]+\.md"
)
# In code, the reference's own files and other projects' names, cited bare. The docs may name
# them where they say what they are (docs/checks.md's table of the reference's workflows,
# docs/native-hooks.md's link to HooKit); a comment cites those docs instead.
OUTSIDE_IN_CODE = re.compile(
    r"gsd-core/|\bworkflows/[a-z-]+\.md|\bHooKit\b"
    r"|(?<![\w/-])(?:plan-phase|execute-phase|verify-work|ship|discuss-phase)\.md"
)


def test_no_citation_resolves_only_outside_the_repo():
    files = [*REPO.joinpath("looprail").rglob("*.py"), *REPO.joinpath("docs").glob("*.md")]
    files.append(REPO / "README.md")
    hits = []
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            in_code = rel.endswith(".py") and OUTSIDE_IN_CODE.search(line)
            if OUTSIDE.search(line) or in_code:
                hits.append(f"{rel}:{n}: {line.strip()}")
    assert hits == []


def test_every_docs_path_cited_exists():
    """`docs/<name>.md` named in code or the README is a file of this repository (the docs
    also show a user's project, whose `docs/api.md` is an example)."""
    cited = re.compile(r"\bdocs/([a-z0-9-]+\.md)\b")
    files = [*REPO.joinpath("looprail").rglob("*.py"), REPO / "README.md"]
    missing = sorted(
        f"{path.relative_to(REPO).as_posix()}: docs/{name}"
        for path in files
        for name in cited.findall(path.read_text(encoding="utf-8"))
        if not (REPO / "docs" / name).is_file()
    )
    assert missing == []


def test_the_contract_names_the_reference_once_and_covers_the_contract():
    text = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
    assert text.count("gsd-core, the reference implementation") == 1
    for section in ("Points", "Envelope", "Activeness", "Flavors", "Dispatch", "execute:task",
                    "Waves"):  # fmt: skip
        assert f"\n## {section}\n" in text
    from looprail.points import POINTS

    assert all(f"`{p}`" in text for p in POINTS)
