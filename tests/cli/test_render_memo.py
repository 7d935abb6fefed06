"""The render-hooks memo (`looprail/cli/render_memo.py`): a repeat of a call with nothing changed
is replayed, and whatever changes, a call's output is the output of an uncached call."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import (
    feature,
    run_cli,
    write_capability,
    write_config,
)

SETTLE = 0.06  # past the caches' 50 ms racy-stat margin


def _contribution(path: str, point: str = "plan:pre") -> dict[str, object]:
    return {
        "point": point,
        "into": "planner",
        "fragment": {"path": path},
        "produces": [],
        "consumes": [],
    }


def _manifest(cap: str, n: int = 0) -> dict[str, object]:
    return feature(
        cap,
        activationKey=f"memo.{cap}",
        config={f"memo.{cap}": {"type": "boolean", "default": True}},
        contributions=[_contribution("f.md"), _contribution("f.md", "execute:task")][: 1 + n % 2],
    )


def _render(project: Path, root: Path, argv: list[str], cached: bool = True):
    p = run_cli(
        "loop",
        "render-hooks",
        *argv,
        "--project",
        str(project),
        "--capabilities",
        str(root),
        env={"LOOPRAIL_NO_CACHE": None if cached else "1"},
    )
    return p.returncode, p.stdout, p.stderr


def _memo_files() -> list[Path]:
    base = Path(os.environ["XDG_CACHE_HOME"], "looprail")
    return sorted(base.glob("render-*.bin")) if base.is_dir() else []


def _setup(tmp: Path) -> tuple[Path, Path]:
    project, root = tmp / "project", tmp / "caps"
    project.mkdir()
    write_capability(root, _manifest("alpha"), files={"f.md": "alpha text"})
    write_capability(root, _manifest("beta"), files={"f.md": "beta text"})
    return project, root


def test_a_repeat_is_replayed_from_the_memo(tmp_path, monkeypatch):
    project, root = _setup(tmp_path)
    argv = ["plan:pre", "--raw"]
    first = _render(project, root, argv)  # builds the set's cache entry
    time.sleep(SETTLE)
    second = _render(project, root, argv)  # renders from the entry and writes the memo
    assert first == second and len(_memo_files()) == 1
    from looprail.hooks import resolve

    def explode(*_a, **_k):
        raise AssertionError("a replayed call does not resolve")

    monkeypatch.setattr(resolve, "resolve", explode)
    assert _render(project, root, argv) == second


def test_what_is_never_memoised(tmp_path):
    project, root = _setup(tmp_path)
    phases = project / ".planning" / "phases" / "01-x"
    phases.mkdir(parents=True)
    # --phase reads the phase folders; LOOPRAIL_NO_CACHE turns every cache off
    for argv, cached in ((["plan:pre", "--phase", "1"], True), (["plan:pre"], False)):
        for _ in range(3):
            time.sleep(SETTLE)
            assert _render(project, root, argv, cached=cached)[0] == 0
    assert _memo_files() == []
    # a set with project capabilities: consent is checked at every call
    write_capability(
        project / ".looprail" / "capabilities", _manifest("gamma"), files={"f.md": "g"}
    )
    for _ in range(3):
        time.sleep(SETTLE)
        assert _render(project, root, ["plan:pre", "--raw"])[0] == 0
    assert _memo_files() == []


def test_a_damaged_memo_is_ignored_and_rewritten(tmp_path):
    project, root = _setup(tmp_path)
    argv = ["plan:pre"]
    for _ in range(2):
        want = _render(project, root, argv)
        time.sleep(SETTLE)
    (memo,) = _memo_files()
    raw = memo.read_bytes()
    for broken in (b"", raw[: len(raw) // 2], raw.replace(b"alpha text", b"omega text"), b"\xff"):
        memo.write_bytes(broken)
        assert _render(project, root, argv) == want
    assert _render(project, root, argv) == want


# --------------------------------------------------------------------------- the property

ARGVS = (
    ["plan:pre", "--raw"],
    ["plan:pre"],
    ["execute:task", "--raw"],
    ["plan:pre", "--strict"],
    ["plan:pre", "--active-cap", "alpha"],
)


def _edit(tmp: Path, project: Path, root: Path, op: str, n: int) -> None:
    config = project / ".planning" / "config.json"
    if op == "fragment":
        (root / "alpha" / "f.md").write_text(f"alpha text {n}")
    elif op == "config-off":
        write_config(project, {"memo": {"alpha": n % 2 == 0}})
    elif op == "config-unknown":
        write_config(project, {f"unknown{n}": 1})
    elif op == "config-broken":
        write_config(project, "{ not json" + " " * n)
    elif op == "config-gone":
        config.unlink(missing_ok=True)
    elif op == "manifest":
        write_capability(root, _manifest("beta", n), files={"f.md": "beta text"})
    elif op == "add-cap":
        write_capability(root, _manifest(f"new{n % 3}"), files={"f.md": f"new {n}"})
    elif op == "remove-cap":
        shutil.rmtree(root / f"new{n % 3}", ignore_errors=True)
    elif op == "project-cap-gone":
        shutil.rmtree(project / ".looprail", ignore_errors=True)
    elif op == "project-cap":
        write_capability(
            project / ".looprail" / "capabilities", _manifest("gamma"), files={"f.md": "g"}
        )
    elif op == "wait":
        time.sleep(SETTLE)


STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "render",
                "render",
                "render",
                "wait",
                "fragment",
                "config-off",
                "config-unknown",
                "config-broken",
                "config-gone",
                "manifest",
                "add-cap",
                "remove-cap",
                "project-cap",
                "project-cap-gone",
                "project-cap-gone",
            ]
        ),
        st.integers(0, len(ARGVS) - 1),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_every_call_renders_what_an_uncached_call_renders(steps):
    tmp = Path(tempfile.mkdtemp(prefix="looprail-memo-"))
    try:
        project, root = _setup(tmp)
        cache = os.environ["XDG_CACHE_HOME"]
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")  # this example's own caches
        try:
            for i, (op, which) in enumerate(steps):
                if op != "render":
                    _edit(tmp, project, root, op, i)
                    continue
                argv = ARGVS[which]
                want = _render(project, root, argv, cached=False)
                # after a change: the first builds the set's entry and stores its memo (when
                # what it read had settled), the next ones replay it
                for _ in range(4):
                    assert _render(project, root, argv) == want, (steps, i)
                    time.sleep(SETTLE)
        finally:
            os.environ["XDG_CACHE_HOME"] = cache
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_memo_key_is_the_argv_and_the_folder(tmp_path, monkeypatch):
    """The same argv from another folder (relative paths mean other files) is another memo."""
    project, root = _setup(tmp_path)
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "caps", other / "caps")
    (other / "caps" / "alpha" / "f.md").write_text("elsewhere")
    (other / "project").mkdir()
    argv = ("loop", "render-hooks", "plan:pre", "--raw", "--project", "project")
    argv += ("--capabilities", "caps")
    outs = {}
    for folder in (tmp_path, other, tmp_path, other):
        for _ in range(2):
            time.sleep(SETTLE)
            p = run_cli(*argv, cwd=folder)
            assert p.returncode == 0, p.stderr
            outs.setdefault(folder, set()).add(p.stdout)
    assert len(outs[tmp_path]) == 1 and len(outs[other]) == 1
    assert outs[tmp_path] != outs[other]
    assert "elsewhere" in json.dumps(sorted(outs[other]))


def test_a_memo_others_could_have_written_is_never_replayed(tmp_path):
    """A memo is what a host is told to run: one that is writable by others, or a symlink, is
    not replayed even with a good checksum and key (then rewritten as this user's own)."""
    import marshal
    import zlib

    from looprail.cli import render_memo

    project, root = _setup(tmp_path)
    argv = ["plan:pre", "--raw"]
    for _ in range(2):
        want = _render(project, root, argv)
        time.sleep(SETTLE)
    (memo,) = _memo_files()
    fields = list(marshal.loads(memo.read_bytes().partition(b"\n")[2]))
    fields[6] = '{"planted": true}'
    body = marshal.dumps(tuple(fields))
    planted = f"{render_memo.MEMO_FORMAT} {zlib.crc32(body):08x}\n".encode() + body
    memo.write_bytes(planted)
    memo.chmod(0o600)
    assert _render(project, root, argv)[1] == '{"planted": true}'  # this user's own: trusted
    for mode in (0o622, 0o660):
        memo.write_bytes(planted)
        memo.chmod(mode)
        assert _render(project, root, argv) == want
    elsewhere = tmp_path / "planted.bin"
    elsewhere.write_bytes(planted)
    memo.unlink()
    memo.symlink_to(elsewhere)
    assert _render(project, root, argv) == want


def test_an_output_past_the_limit_is_written_whole_and_not_memoised(tmp_path, monkeypatch):
    from looprail.cli import render_memo

    project, root = _setup(tmp_path)
    want = _render(project, root, ["plan:pre", "--raw"], cached=False)
    monkeypatch.setattr(render_memo, "MAX_OUTPUT", len(want[1]) // 2)
    for _ in range(3):
        assert _render(project, root, ["plan:pre", "--raw"]) == want
        time.sleep(SETTLE)
    assert _memo_files() == []
