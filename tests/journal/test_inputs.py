"""The inputs digest a run is resumed against, and the human diff of two digests."""

from __future__ import annotations

import hashlib

from looprail.journal import diff_inputs, digest_inputs


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_digest_is_sha256_by_relative_posix_path_sorted(tmp_path):
    plan = write(tmp_path / ".planning/phases/01-x/01-01-PLAN.md", "# plan\n")
    config = write(tmp_path / ".planning/config.json", "{}")
    digest = digest_inputs([plan, config], tmp_path)
    assert list(digest) == [".planning/config.json", ".planning/phases/01-x/01-01-PLAN.md"]
    assert digest[".planning/config.json"] == hashlib.sha256(b"{}").hexdigest()


def test_relative_paths_are_taken_from_the_root_and_directories_expand(tmp_path):
    write(tmp_path / "caps/a/capability.json", "a")
    write(tmp_path / "caps/b/capability.json", "b")
    write(tmp_path / "caps/b/fragment.md", "f")
    digest = digest_inputs(["caps", "missing.json"], tmp_path)
    assert list(digest) == [
        "caps/a/capability.json",
        "caps/b/capability.json",
        "caps/b/fragment.md",
    ]


def test_files_outside_the_root_keep_an_absolute_key(tmp_path):
    outside = write(tmp_path / "elsewhere/capability.json", "{}")
    root = tmp_path / "project"
    root.mkdir()
    assert list(digest_inputs([outside], root)) == [outside.resolve().as_posix()]


def test_diff_names_changed_added_and_removed_files_by_path(tmp_path):
    plan = write(tmp_path / ".planning/phases/01-x/01-01-PLAN.md", "v1")
    gone = write(tmp_path / ".planning/phases/01-x/01-02-PLAN.md", "v1")
    same = write(tmp_path / ".planning/config.json", "{}")
    old = digest_inputs([plan, gone, same], tmp_path)
    plan.write_text("v2")
    gone.unlink()
    added = write(tmp_path / ".looprail/capabilities/x/capability.json", "{}")
    new = digest_inputs([plan, gone, same, added], tmp_path)
    assert diff_inputs(old, new) == [
        "added: .looprail/capabilities/x/capability.json",
        "changed: .planning/phases/01-x/01-01-PLAN.md",
        "removed: .planning/phases/01-x/01-02-PLAN.md",
    ]
    assert diff_inputs(new, new) == []
